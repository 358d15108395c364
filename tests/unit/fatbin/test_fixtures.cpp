// SPDX-License-Identifier: Apache-2.0
// The reader on objects nvcc built at test time with known architecture sets
// (make_fixtures.sh): the exact image list of each, as nvcc 13.0 lays it out.
#include <archguard/container.hpp>
#include <archguard/fatbin.hpp>

#include <catch2/catch.hpp>

#include "skip.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

using namespace archguard;

namespace {

const std::string kDir = ARCHGUARD_FIXTURE_DIR;

/// Skips the test case (exit 77) when the fixtures could not be built (no nvcc).
ScanReport load(const std::string& name) {
  if (!std::filesystem::exists(kDir + "/stamp"))
    archguard::test::skip_now("no nvcc fixtures in " + kDir + " (make_fixtures.sh needs nvcc)");
  auto r = scan_path(kDir + "/" + name);
  if (!r) FAIL(r.message());
  if (!r->errors.empty()) FAIL(r->errors.front());
  return std::move(*r);
}

/// The fatbins of the one object of `r`, which must be `n`.
const std::vector<Fatbin>& fatbins_of(const ScanReport& r, std::size_t n) {
  REQUIRE(r.objects.size() == 1);
  REQUIRE(r.objects[0].fatbins.size() == n);
  return r.objects[0].fatbins;
}

/// "sass sm_80 none; ptx compute_90 zstd": kind, arch, compression of every image.
std::string describe(const Fatbin& fb) {
  std::string s;
  for (const auto& e : fb.entries) {
    if (!s.empty()) s += "; ";
    s += e.kind == CodeKind::sass ? "sass " : e.kind == CodeKind::ptx ? "ptx "
                                                                      : "ltoir ";
    s += nvcc_name(e.arch, e.kind);
    if (e.kind != CodeKind::ltoir) s += " " + std::string(to_string(e.compression));
    if (e.debug) s += " debug";
  }
  return s;
}

std::string only_fatbin(const std::string& file, FatbinSection section = FatbinSection::nv_fatbin) {
  const ScanReport r = load(file);
  REQUIRE(r.objects.size() == 1);
  REQUIRE(r.objects[0].fatbins.size() == 1);
  CHECK(r.objects[0].fatbins[0].section == section);
  CHECK_FALSE(r.objects[0].fatbins[0].device_link);
  return describe(r.objects[0].fatbins[0]);
}

}  // namespace

TEST_CASE("plain, a/f, PTX-only and -G objects", "[fatbin][nvcc]") {
  CHECK(only_fatbin("plain.o") == "sass sm_80 none; sass sm_90 none; ptx compute_90 zstd");
  CHECK(only_fatbin("specific.o") ==
        "sass sm_90a none; ptx compute_90a zstd; sass sm_100f none; ptx compute_100f zstd; sass sm_120a none");
  CHECK(only_fatbin("ptxonly.o") == "ptx compute_75 zstd");
  CHECK(only_fatbin("debug.o") == "sass sm_80 zstd debug");
  const ScanReport d = load("debug.o");
  const auto& e = d.objects[0].fatbins[0].entries[0];
  CHECK(e.identifier.ends_with("fixture_kernels.cu"));  // -G records the source
  CHECK(e.version == Version2{1, 8});                   // ELF ABI 8 under CUDA 13
  const ScanReport s = load("specific.o");
  CHECK(s.objects[0].fatbins[0].only_specific());
  CHECK(s.objects[0].fatbins[0].entries[1].version == Version2{9, 0});  // PTX ISA 9.0
  CHECK((s.objects[0].fatbins[0].entries[2].flags & kEntryFlagCompatExtension) != 0);
  CHECK_FALSE(s.objects[0].fatbins[0].entries[2].extension.empty());
}

TEST_CASE("every --compress-mode", "[fatbin][nvcc]") {
  CHECK(only_fatbin("compress-default.o") == "sass sm_80 none; ptx compute_80 zstd");
  CHECK(only_fatbin("compress-balance.o") == "sass sm_80 none; ptx compute_80 zstd");
  CHECK(only_fatbin("compress-speed.o") == "sass sm_80 none; ptx compute_80 lz4");
  CHECK(only_fatbin("compress-size.o") == "sass sm_80 zstd; ptx compute_80 zstd");
  CHECK(only_fatbin("compress-none.o") == "sass sm_80 none; ptx compute_80 none");
}

TEST_CASE("rdc objects and executables, LTO-IR", "[fatbin][nvcc]") {
  CHECK(only_fatbin("rdc.o", FatbinSection::nv_relfatbin) == "sass sm_80 zstd; ptx compute_80 zstd");
  const ScanReport o = load("rdc.o");
  CHECK(o.objects[0].fatbins[0].entries[1].options.starts_with("--compile-only"));
  CHECK(only_fatbin("lto.o", FatbinSection::nv_relfatbin) == "ltoir lto_80; sass sm_90 zstd");

  const ScanReport x = load("rdc.exe");
  const auto& fbs = fatbins_of(x, 3);
  CHECK(fbs[0].section == FatbinSection::nv_fatbin);
  CHECK(fbs[0].linked);             // written by nvlink ...
  CHECK_FALSE(fbs[0].device_link);  // ... and it holds the kernels: it decides
  CHECK(describe(fbs[0]) == "sass sm_80 none");
  CHECK(fbs[1].section == FatbinSection::nv_relfatbin);
  CHECK(describe(fbs[1]) == "sass sm_80 zstd; ptx compute_80 zstd");
  CHECK(fbs[2].section == FatbinSection::nv_relfatbin);  // fixture_main.cu
}

TEST_CASE("shared library: the device-link fatbin comes first and is marked", "[fatbin][nvcc]") {
  const ScanReport r = load("libplain.so");
  const auto& fbs = fatbins_of(r, 2);
  CHECK(fbs[0].linked);
  CHECK(fbs[0].device_link);
  CHECK(describe(fbs[0]) == "sass sm_75 none");
  CHECK_FALSE(fbs[1].device_link);
  CHECK(describe(fbs[1]) == "sass sm_80 none; sass sm_90 none; ptx compute_90 zstd");

  // The self-check's path: only the bytes of .nv_fatbin, as a loaded module has them.
  auto storage = map_file(kDir + "/libplain.so");
  REQUIRE(storage.ok());
  auto elf = ElfFile::parse((*storage)->bytes(), "libplain.so");
  REQUIRE(elf.ok());
  const ElfSection* section = elf->find(".nv_fatbin");
  REQUIRE(section != nullptr);
  auto bytes = elf->section_bytes(*section);
  REQUIRE(bytes.ok());
  auto region = read_region(*bytes, "libplain.so (loaded)");
  REQUIRE(region.ok());
  REQUIRE(region->fatbins.size() == 2);
  CHECK(region->fatbins[0].device_link);
  CHECK_FALSE(region->fatbins[1].device_link);
  CHECK(describe(region->fatbins[1]) == describe(fbs[1]));
}

TEST_CASE("the device-link wrapper pointer is found through its RELATIVE relocation", "[fatbin][nvcc]") {
  // Linkers may leave the in-place word of a RELA-relocated pointer zero: the reader must then
  // take the relocation's addend. Zero the version-2 wrapper's pointer in a copy of the library.
  const ScanReport original = load("libplain.so");
  auto storage = map_file(kDir + "/libplain.so");
  REQUIRE(storage.ok());
  std::vector<std::byte> copy((*storage)->bytes().begin(), (*storage)->bytes().end());
  auto elf = ElfFile::parse(copy, "libplain.so");
  REQUIRE(elf.ok());
  const ElfSection* seg = elf->find(".nvFatBinSegment");
  REQUIRE(seg != nullptr);
  REQUIRE(seg->size >= 24);
  std::fill_n(copy.begin() + static_cast<std::ptrdiff_t>(seg->offset + 8), 8, std::byte{0});  // wrapper 0: version 2
  auto r = scan_bytes(copy, "libplain.so (zeroed pointer)");
  REQUIRE(r.ok());
  REQUIRE(r->objects.size() == 1);
  REQUIRE(r->objects[0].fatbins.size() == 2);
  CHECK(r->objects[0].fatbins[0].linked);
  CHECK(r->objects[0].fatbins[0].device_link);
  CHECK(original.objects[0].fatbins[0].device_link);
}

TEST_CASE("static library members", "[fatbin][nvcc]") {
  const ScanReport r = load("libfixture.a");
  REQUIRE(r.objects.size() == 2);
  CHECK(r.objects[0].member == "plain.o");
  CHECK(r.objects[1].member == "ptxonly.o");
  CHECK(describe(r.objects[1].fatbins[0]) == "ptx compute_75 zstd");
}

TEST_CASE("kernels of every image, demangled", "[fatbin][nvcc]") {
  for (const char* file : {"plain.o", "specific.o", "compress-speed.o", "compress-size.o", "debug.o", "rdc.o"}) {
    const ScanReport r = load(file);
    for (const auto& e : r.objects[0].fatbins[0].entries) {
      INFO(file << " entry " << e.index);
      auto image = decompress(e, file);
      REQUIRE(image.ok());
      CHECK(image->size() == e.image_size());
      auto k = list_kernels(e, *image, file);
      REQUIRE(k.ok());
      std::vector<std::string> names;
      for (const auto& kernel : *k) names.push_back(kernel.demangled);
      std::sort(names.begin(), names.end());
      CHECK(names == std::vector<std::string>{"fixture_fill", "void fixture::scale<float>(float, float*, int)"});
    }
  }
}

namespace {

std::vector<std::string> kernel_names(const FatbinEntry& e, const std::string& file) {
  auto image = decompress(e, file);
  REQUIRE(image.ok());
  auto k = list_kernels(e, *image, file);
  REQUIRE(k.ok());
  std::vector<std::string> names;
  for (const auto& kernel : *k) names.push_back(kernel.demangled);
  std::sort(names.begin(), names.end());
  return names;
}

const std::vector<std::string> kFixtureKernels{"fixture_fill", "void fixture::scale<float>(float, float*, int)"};

}  // namespace

TEST_CASE("translation units of an executable built from three, one of them sm_80 only", "[fatbin][nvcc][tu]") {
  const ScanReport r = load("multi_tu.exe");
  const auto& fbs = fatbins_of(r, 5);
  CHECK(fbs[0].device_link);
  CHECK(fbs[0].translation_unit.empty());  // link.stub: no translation unit
  std::vector<std::string> tus;
  for (std::size_t i = 1; i < fbs.size(); ++i) tus.push_back(fbs[i].translation_unit);
  CHECK(tus == std::vector<std::string>{"new_tu.cu", "other_tu.cu", "old_tu.cu", "main.cu"});
  CHECK(describe(fbs[3]) == "sass sm_80 none");                                        // the stale TU
  CHECK(describe(fbs[1]) == "sass sm_90 none; ptx compute_90 zstd; sass sm_80 none");  // -gencode order
  for (const auto& fb : fbs) CHECK(fb.section_name == ".nv_fatbin");
  CHECK(kernel_names(fbs[3].entries[0], "multi_tu.exe") == std::vector<std::string>{"old_tu_kernel(int*)"});

  const ScanReport s = load("multi_tu_stripped.exe");  // same code, no symbol table
  REQUIRE(s.objects[0].fatbins.size() == 5);
  for (const auto& fb : s.objects[0].fatbins) CHECK(fb.translation_unit.empty());
}

TEST_CASE("translation units from a symbol table read on its own thread while the fatbins are parsed", "[fatbin][nvcc][tu]") {
  // The executable above with 70,000 more local symbols: past 65,536 entries the table is read
  // on a thread of its own when the scan may use two or more, on the caller's thread otherwise.
  const std::string file = "multi_tu_big_symtab.exe";
  if (!std::filesystem::exists(kDir + "/" + file)) archguard::test::skip_now("no " + file + " in " + kDir);
  {
    auto storage = map_file(kDir + "/" + file);
    REQUIRE(storage.ok());
    auto elf = ElfFile::parse((*storage)->bytes(), file);
    REQUIRE(elf.ok());
    auto table = elf->symbol_table();
    REQUIRE(table.ok());
    REQUIRE(table->size() > 70000);  // the case stays the threaded one
  }
  for (const unsigned threads : {1u, 4u}) {
    INFO("threads " << threads);
    ScanOptions o;
    o.threads = threads;
    auto r = scan_path(kDir + "/" + file, o);
    REQUIRE(r.ok());
    const auto& fbs = fatbins_of(*r, 5);
    std::vector<std::string> tus;
    for (const auto& fb : fbs) tus.push_back(fb.translation_unit);
    CHECK(tus == std::vector<std::string>{"", "new_tu.cu", "other_tu.cu", "old_tu.cu", "main.cu"});
  }
}

TEST_CASE("translation units in objects, archives and -rdc executables", "[fatbin][nvcc][tu]") {
  CHECK(load("plain.o").objects[0].fatbins[0].translation_unit == "fixture_kernels.cu");
  CHECK(load("rdc.o").objects[0].fatbins[0].translation_unit == "fixture_kernels.cu");
  const ScanReport a = load("libfixture.a");
  CHECK(a.objects[1].fatbins[0].translation_unit == "fixture_kernels.cu");
  const ScanReport x = load("rdc.exe");
  REQUIRE(x.objects[0].fatbins.size() == 3);
  CHECK(x.objects[0].fatbins[0].translation_unit.empty());  // the nvlink output
  CHECK(x.objects[0].fatbins[1].translation_unit == "fixture_kernels.cu");
  CHECK(x.objects[0].fatbins[2].translation_unit == "fixture_main.cu");
  CHECK(load("libplain.so").objects[0].fatbins[1].translation_unit == "fixture_kernels.cu");
}

TEST_CASE("standalone cubins, PTX and LTO-IR files", "[fatbin][nvcc][standalone]") {
  for (auto [file, want] : {std::pair{"sm80.cubin", "sass sm_80 none"}, std::pair{"sm90a.cubin", "sass sm_90a none"},
                            std::pair{"sm86.ptx", "ptx compute_86 none"}, std::pair{"lto90.ltoir", "ltoir lto_90"}}) {
    INFO(file);
    const ScanReport r = load(file);
    REQUIRE(r.objects.size() == 1);
    REQUIRE(r.objects[0].fatbins.size() == 1);
    const Fatbin& fb = r.objects[0].fatbins[0];
    CHECK(fb.section == FatbinSection::standalone);
    CHECK(describe(fb) == want);
    if (fb.entries[0].kind != CodeKind::ltoir) CHECK(kernel_names(fb.entries[0], file) == kFixtureKernels);
  }
  CHECK(load("sm80.cubin").objects[0].machine == kElfMachineCuda);
  CHECK(load("sm86.ptx").objects[0].fatbins[0].entries[0].version == Version2{9, 0});  // PTX ISA of CUDA 13.0
  CHECK(load("sm80.cubin").objects[0].fatbins[0].entries[0].version == Version2{1, 8});
  auto storage = map_file(kDir + "/sm90a.cubin");
  REQUIRE(storage.ok());
  CHECK(classify_device_file((*storage)->bytes()) == DeviceFileKind::cubin);
}

TEST_CASE("a fatbin whose code defines no kernel", "[fatbin][nvcc]") {
  const ScanReport r = load("nokernel.fatbin");
  REQUIRE(r.objects.size() == 1);
  REQUIRE(r.objects[0].fatbins.size() == 1);
  const Fatbin& fb = r.objects[0].fatbins[0];
  CHECK(describe(fb) == "sass sm_80 none; ptx compute_80 zstd");
  CHECK(defines_no_kernel(fb, "nokernel.fatbin"));
  CHECK(kernel_names(fb.entries[0], "nokernel.fatbin").empty());
  CHECK(kernel_names(fb.entries[1], "nokernel.fatbin").empty());
}

TEST_CASE("fatbins embedded as data are found; near misses are not", "[fatbin][nvcc][embedded]") {
  const ScanReport r = load("libembedded.so");
  const auto& fbs = fatbins_of(r, 3);  // the device-link stub, .rodata, .fixture_fatbins; not the two near misses
  CHECK(fbs[0].section == FatbinSection::nv_fatbin);
  CHECK(fbs[1].section == FatbinSection::embedded);
  CHECK(fbs[1].section_name == ".rodata");
  CHECK(fbs[2].section == FatbinSection::embedded);
  CHECK(fbs[2].section_name == ".fixture_fatbins");
  const ScanReport plain = load("embed.fatbin");
  for (std::size_t i : {1, 2}) {
    CHECK(fbs[i].index == i);
    CHECK(describe(fbs[i]) == describe(plain.objects[0].fatbins[0]));
    CHECK(describe(fbs[i]) == "sass sm_80 none; sass sm_90 none; ptx compute_90 zstd");
    CHECK(kernel_names(fbs[i].entries[0], "libembedded.so") == kFixtureKernels);
  }
}
