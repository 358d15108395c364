// SPDX-License-Identifier: Apache-2.0
// Hostile input, round three (issue 22): what is derived from input is bounded, not only the
// input. Name bombs (one long string named by thousands of headers or symbols), an entry chain
// built to make the embedded-fatbin search quadratic, a second .nv_fatbin section, a sass image
// that decodes to something that is no cubin. Every input is generated here and small; the
// checks count bytes and outcomes, never time.
#include <archguard/bytes.hpp>
#include <archguard/container.hpp>
#include <archguard/elf.hpp>
#include <archguard/fatbin.hpp>

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "byte_builder.hpp"

using namespace archguard;
using namespace fatbin_test;

namespace {

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

/// One fatbin holding one uncompressed entry of `kind` for sm_`arch` with `payload`.
Buf fatbin_of(std::uint16_t kind, unsigned arch, const Buf& payload) {
  Buf p = payload;
  pad_to(p, 8);
  Buf e;
  put_entry_header(e, {.kind = kind, .payload_size = p.size(), .arch = arch});
  e.insert(e.end(), p.begin(), p.end());
  return fatbin_around(e, kFatbinMagic);
}

}  // namespace

TEST_CASE("a section-name bomb costs no copies: names are views", "[fatbin][hostile][issue22]") {
  // 1,000 section headers naming one string of almost 1 MiB: copied, 1 GB (the reviewed file
  // had 20,000 headers and died at 15.6 GB).
  Buf shstr(1, std::byte{0});
  const auto n_long = static_cast<std::uint32_t>(shstr.size());
  Buf long_name(kMaxNameLength - 16, std::byte{'s'});
  shstr.insert(shstr.end(), long_name.begin(), long_name.end());
  shstr.push_back(std::byte{0});
  const std::vector<Sec> secs{Sec{n_long, 1, 0, 0, Buf(16, std::byte{0})}};
  const Buf file = make_elf(shstr, secs, 62, 3, 1000, 2);
  const long before = max_rss_kib();
  auto elf = ElfFile::parse(file, "bomb.so");
  REQUIRE(elf.ok());
  REQUIRE(elf->sections().size() == 1003);
  CHECK(elf->sections().back().name.size() == long_name.size());
  const long grown_mib = (max_rss_kib() - before) / 1024;
  CHECK(grown_mib < 64);
  auto fbs = read_elf_fatbins(*elf);  // every verb does this next
  CHECK(fbs.ok());
  CHECK((max_rss_kib() - before) / 1024 < 64);
}

TEST_CASE("a name longer than the limit is an error naming the offset and the limit", "[fatbin][hostile][issue22]") {
  Buf shstr(1, std::byte{0});
  const auto n_long = static_cast<std::uint32_t>(shstr.size());
  Buf long_name(kMaxNameLength + 1, std::byte{'s'});
  shstr.insert(shstr.end(), long_name.begin(), long_name.end());
  shstr.push_back(std::byte{0});
  const Buf file = make_elf(shstr, {Sec{n_long, 1, 0, 0, Buf(16, std::byte{0})}});
  auto elf = ElfFile::parse(file, "long.so");
  REQUIRE_FALSE(elf.ok());
  CHECK(elf.message().find("long.so: section name at 0x") != std::string::npos);
  CHECK(elf.message().find("longer than the limit 0x100000") != std::string::npos);
  // The limit is an option (ScanOptions::limits, the CLI's ARCHGUARD_MAX_NAME_LENGTH).
  auto raised = ElfFile::parse(file, "long.so", kMaxNameLength * 2);
  REQUIRE(raised.ok());
  CHECK(std::any_of(raised->sections().begin(), raised->sections().end(),
                    [](const ElfSection& sec) { return sec.name.size() == kMaxNameLength + 1; }));
  auto lowered = ElfFile::parse(file, "long.so", 100);
  REQUIRE_FALSE(lowered.ok());
  CHECK(lowered.message().find("longer than the limit 0x64") != std::string::npos);
}

TEST_CASE("names at every offset of one string are scanned once", "[fatbin][hostile][issue22]") {
  // Headers naming offsets 1, 2, 3 ... of one long string: each name is a suffix of the one
  // before; a scan per name is quadratic. The string table remembers what it scanned.
  Buf table(1, std::byte{0});
  table.insert(table.end(), 200000, std::byte{'q'});
  table.push_back(std::byte{0});
  StringTable strings(ByteReader(table, "t"));
  for (std::uint64_t at = 1; at < 200000; at += 1) {
    auto s = strings.at(at, "name");
    REQUIRE(s.ok());
    REQUIRE(s->size() == 200001 - at);
  }
  // And backwards, merging runs.
  StringTable back(ByteReader(table, "t"));
  for (std::uint64_t at = 200000; at >= 1; --at) REQUIRE(back.at(at, "name")->size() == 200001 - at);
  CHECK_FALSE(back.at(0, "name")->size() != 0);
  CHECK_FALSE(strings.at(200002, "name").ok());
}

TEST_CASE("a kernel-name bomb in one image is stopped by the name budget", "[fatbin][hostile][issue22]") {
  // A cubin with 100 entry symbols sharing one name of 1 MiB less 16: 200 MiB of names once
  // copied and demangled, past the 64 MiB per image (the reviewed image had 20,000 of 4 MiB).
  Buf shstr(1, std::byte{0});
  const auto n_symtab = add_name(shstr, ".symtab"), n_strtab = add_name(shstr, ".strtab");
  Buf strtab(1, std::byte{0});
  strtab.insert(strtab.end(), kMaxNameLength - 16, std::byte{'k'});
  strtab.push_back(std::byte{0});
  Buf symtab(24, std::byte{0});
  for (int i = 0; i < 100; ++i) {
    put(symtab, 1, 4);     // the long name
    put(symtab, 0x12, 1);  // global function
    put(symtab, 0x10, 1);  // CUDA entry
    put(symtab, 1, 2);
    put(symtab, 0, 8);
    put(symtab, 0, 8);
  }
  const Buf cubin = make_elf(shstr, {Sec{n_symtab, 2, 0, 0, symtab, 3, 24}, Sec{n_strtab, 3, 0, 0, strtab}}, 190, 2);
  const Buf fb = fatbin_of(2, 90, cubin);
  auto fbs = Fatbin::parse_all(fb, "bomb.fatbin");
  REQUIRE(fbs.ok());
  const FatbinEntry& e = fbs->at(0).entries.at(0);
  auto image = decompress(e, "bomb.fatbin");
  REQUIRE(image.ok());
  const long before = max_rss_kib();
  auto kernels = list_kernels(e, *image, "bomb.fatbin");
  REQUIRE_FALSE(kernels.ok());
  CHECK(kernels.kind() == ErrorKind::limit);
  CHECK(kernels.message().find("exceed the limit 0x4000000 bytes per image") != std::string::npos);
  CHECK((max_rss_kib() - before) / 1024 < 160);
  // Raised (DerivedLimits, the CLI's ARCHGUARD_MAX_KERNEL_NAMES), every name is listed.
  DerivedLimits raised;
  raised.max_kernel_name_bytes = std::uint64_t{256} << 20;
  auto all = list_kernels(e, *image, "bomb.fatbin", raised);
  REQUIRE(all.ok());
  CHECK(all->size() == 100);
}

TEST_CASE("the embedded-fatbin search of a crafted entry chain is bounded", "[fatbin][hostile][issue22]") {
  // Units of 80 bytes: a fatbin header, then an entry header whose 16-byte payload is the next
  // unit's header, so that every unit's entry chain runs to the region's end, where it misses
  // the end its header claims by 8 bytes. Unbounded, each of the 13,000 candidates in 1 MiB
  // walks the rest of the chain (86 million steps; 16 MiB took over 15 minutes).
  constexpr std::size_t kUnit = 80, kUnits = (std::size_t{1} << 20) / kUnit;
  Buf region;
  for (std::size_t k = 0; k < kUnits; ++k) {
    put(region, kFatbinMagic, 4);
    put(region, 1, 2);
    put(region, 16, 2);
    put(region, kUnits * kUnit - k * kUnit - 16 - 8, 8);  // ends 8 bytes short of the region's end
    put(region, kEntryKindElf, 2);
    put(region, 0x0101, 2);
    put(region, 0x40, 4);
    put(region, 16, 8);  // stored: the next unit's header
    region.insert(region.end(), 0x40 - 16, std::byte{0});
    put_at(region, region.size() - 0x40 + 16 + 0x1c - 16, 90, 4);
  }
  std::string problem;
  const auto found = find_embedded_fatbins(region, "chain.so", ".rodata", 0x1000, 0, {}, {}, 1, &problem);
  CHECK(found.empty());
  CHECK(problem.find("chain.so: embedded-fatbin search of section .rodata at 0x1000") != std::string::npos);
  // Through the ELF reader: the file is an error (limit), with the same message.
  Buf shstr(1, std::byte{0});
  const std::uint32_t n_ro = add_name(shstr, ".rodata");
  const Buf file = make_elf(shstr, {Sec{n_ro, 1, 2, 0x10000, region}});
  auto elf = ElfFile::parse(file, "chain.so");
  REQUIRE(elf.ok());
  auto fbs = read_elf_fatbins(*elf);
  REQUIRE_FALSE(fbs.ok());
  CHECK(fbs.kind() == ErrorKind::limit);
  CHECK(fbs.message().find("fatbin entry headers checked") != std::string::npos);
  // The bound is an option (DerivedLimits, the CLI's ARCHGUARD_MAX_SEARCH_WORK): a lower one
  // stops the search the same way, naming that bound.
  DerivedLimits low;
  low.search_work_per_8_bytes = 1;
  low.search_work_floor = 0;
  problem.clear();
  find_embedded_fatbins(region, "chain.so", ".rodata", 0x1000, 0, {}, {}, 1, &problem, low);
  CHECK(problem.find("more than " + std::to_string(kUnits * kUnit / 8) + " fatbin entry headers checked") != std::string::npos);
}

TEST_CASE("real embedded fatbins stay within the search budget", "[fatbin][hostile][issue22]") {
  // 4,000 small fatbins back to back with 3 entries each: found whole, no limit.
  Buf region;
  for (int i = 0; i < 4000; ++i) {
    Buf f = fatbin_of(kEntryKindPtx, 80, bytes_of(".version 8.0\n.target sm_80\n"));
    region.insert(region.end(), f.begin(), f.end());
  }
  std::string problem;
  const auto found = find_embedded_fatbins(region, "lib.so", ".rodata", 0, 0, {}, {}, 1, &problem);
  CHECK(found.size() == 4000);
  CHECK(problem.empty());
}

TEST_CASE("a second .nv_fatbin section is read, not dropped", "[fatbin][hostile][issue22]") {
  Buf shstr(1, std::byte{0});
  const std::uint32_t n_fb = add_name(shstr, ".nv_fatbin");
  const Buf first = fatbin_of(kEntryKindPtx, 80, bytes_of(".version 8.0\n.target sm_80\n"));
  const Buf second = fatbin_of(kEntryKindPtx, 90, bytes_of(".version 8.0\n.target sm_90\n"));
  const Buf file = make_elf(shstr, {Sec{n_fb, 1, 2, 0x10000, first}, Sec{n_fb, 1, 2, 0x20000, second}});
  auto elf = ElfFile::parse(file, "two.so");
  REQUIRE(elf.ok());
  auto fbs = read_elf_fatbins(*elf);
  INFO((fbs.ok() ? std::string() : fbs.message()));
  REQUIRE(fbs.ok());
  REQUIRE(fbs->size() == 2);
  CHECK(fbs->at(0).entries.at(0).arch.sm == 80);
  CHECK(fbs->at(1).entries.at(0).arch.sm == 90);
  CHECK(fbs->at(1).section_name == ".nv_fatbin");
  CHECK(fbs->at(1).index == 1);
}

TEST_CASE("a sass image that decodes to no cubin is named", "[fatbin][hostile][issue22]") {
  const Buf fb = fatbin_of(kEntryKindElf, 90, bytes_of("this is no cubin, only text"));
  auto fbs = Fatbin::parse_all(fb, "fake.fatbin");
  REQUIRE(fbs.ok());
  const FatbinEntry& e = fbs->at(0).entries.at(0);
  auto image = decompress(e, "fake.fatbin");
  REQUIRE(image.ok());
  auto st = check_cubin_image(e, *image, "fake.fatbin");
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("fake.fatbin: entry 0 at 0x10: the sass image decodes to 0x20 bytes that are no cubin: no elf magic (first bytes 0x74 0x68 0x69 0x73)") !=
        std::string::npos);
  // A host ELF file is no cubin either.
  Buf shstr(1, std::byte{0});
  const Buf host = make_elf(shstr, {});
  const Buf fb2 = fatbin_of(kEntryKindElf, 90, host);
  auto fbs2 = Fatbin::parse_all(fb2, "host.fatbin");
  REQUIRE(fbs2.ok());
  auto image2 = decompress(fbs2->at(0).entries.at(0), "host.fatbin");
  REQUIRE(image2.ok());
  auto st2 = check_cubin_image(fbs2->at(0).entries.at(0), *image2, "host.fatbin");
  REQUIRE_FALSE(st2.ok());
  CHECK(st2.message().find("an elf file for machine 62, not cuda (190)") != std::string::npos);
}

TEST_CASE("a file truncated under its mapping before the headers are read: an error, not SIGBUS", "[fatbin][hostile][issue22]") {
  // Only payload copies were guarded: the section table, the entry headers and the embedded
  // search read the mapping directly, and a file that shrank under them killed the process
  // (18 of 40 runs of the review). Here it shrinks before anything is read: every header read
  // faults.
  Buf shstr(1, std::byte{0});
  const std::uint32_t n_ro = add_name(shstr, ".rodata");
  Buf region(std::size_t{3} << 20, std::byte{0x5a});
  const Buf file = make_elf(shstr, {Sec{n_ro, 1, 2, 0x10000, region}});
  const std::string path = (std::filesystem::temp_directory_path() / ("archguard-bus-" + std::to_string(::getpid()) + ".so")).string();
  write_bytes(path, file);
  auto storage = map_file(path);
  REQUIRE(storage.ok());
  std::filesystem::resize_file(path, 4096);              // the section table and .rodata are gone
  auto elf = ElfFile::parse((*storage)->bytes(), path);  // reads the section table: past the end now
  if (elf.ok()) {
    auto fbs = read_elf_fatbins(*elf);  // searches .rodata: past the end too
    CHECK(fbs.ok());
  }
  CHECK((*storage)->damaged());
  storage->reset();
  std::filesystem::remove(path);
}

TEST_CASE("small files of a tree are read, not mapped; the mappings held are bounded", "[fatbin][hostile][issue22]") {
  // Every file with device code stayed mapped until the end: past vm.max_map_count (65,530)
  // files, a tree of objects failed. Small files are read into memory; larger ones count
  // against ScanOptions::max_mappings, and a file past the limit is an error naming it.
  const auto dir = std::filesystem::temp_directory_path() / ("archguard-maps-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Buf shstr(1, std::byte{0});
  const std::uint32_t n_fb = add_name(shstr, ".nv_fatbin");
  const Buf file = make_elf(shstr, {Sec{n_fb, 1, 2, 0x10000, fatbin_of(kEntryKindPtx, 80, bytes_of(".version 8.0\n.target sm_80\n"))}});
  for (int i = 0; i < 4; ++i) write_bytes(dir / ("lib" + std::to_string(i) + ".so"), file);
  ScanOptions o;
  o.threads = 1;
  o.max_mappings = 0;  // no mapping may be held: small files need none
  auto small = scan_path(dir.string(), o);
  REQUIRE(small.ok());
  CHECK(small->errors.empty());
  CHECK(small->objects.size() == 4);
  CHECK(small->files_read == 4);
  o.read_small_files_below = 0;  // now every file is mapped: each is past the limit
  auto mapped = scan_path(dir.string(), o);
  REQUIRE(mapped.ok());
  REQUIRE(mapped->errors.size() == 4);
  CHECK(mapped->errors[0].find("lib0.so: not read: 0 files are mapped already, the limit") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("many section headers over one region: searched once, each fatbin found once", "[fatbin][hostile][issue22]") {
  // 5,000 headers naming the same 1 MiB of .rodata: the search read it 5,000 times and listed
  // the one fatbin in it 5,000 times.
  Buf shstr(1, std::byte{0});
  const std::uint32_t n_ro = add_name(shstr, ".rodata");
  Buf region(std::size_t{1} << 20, std::byte{0x11});
  const Buf fb = fatbin_of(kEntryKindPtx, 80, bytes_of(".version 8.0\n.target sm_80\n"));
  std::copy(fb.begin(), fb.end(), region.begin() + 4096);
  const Buf file = make_elf(shstr, {Sec{n_ro, 1, 2, 0x10000, region}}, 62, 3, 5000, 2);
  auto elf = ElfFile::parse(file, "many.so");
  REQUIRE(elf.ok());
  auto fbs = read_elf_fatbins(*elf);
  REQUIRE(fbs.ok());
  CHECK(fbs->size() == 1);
}

namespace {

/// An ELF file whose .rodata holds two fatbins kept as data (at 0x100 and 0x400 of the section),
/// with non-fatbin bytes around them.
Buf elf_with_embedded(std::uint64_t& section_offset) {
  Buf shstr(1, std::byte{0});
  const std::uint32_t n_ro = add_name(shstr, ".rodata");
  Buf ro(0x100, std::byte{0x11});
  const Buf a = fatbin_of(kEntryKindPtx, 80, bytes_of(".version 8.0\n.target sm_80\n"));
  ro.insert(ro.end(), a.begin(), a.end());
  ro.resize(0x400, std::byte{0x22});
  const Buf b = fatbin_of(kEntryKindPtx, 90, bytes_of(".version 8.0\n.target sm_90\n"));
  ro.insert(ro.end(), b.begin(), b.end());
  ro.resize(0x800, std::byte{0x33});
  const Buf file = make_elf(shstr, {Sec{n_ro, 1, 2, 0x20000, ro}});
  auto elf = ElfFile::parse(file, "emb.so");
  REQUIRE(elf.ok());
  for (const auto& s : elf->sections())
    if (s.name == ".rodata") section_offset = s.offset;
  return file;
}

}  // namespace

TEST_CASE("known embedded finds are parsed instead of searched; finds that do not fit are searched again", "[fatbin][results]") {
  std::uint64_t at = 0;
  const Buf file = elf_with_embedded(at);
  auto elf = ElfFile::parse(file, "emb.so");
  REQUIRE(elf.ok());
  EmbeddedFinds found;
  auto first = read_elf_fatbins(*elf, {}, {}, 1, {}, true, nullptr, &found);
  REQUIRE(first.ok());
  REQUIRE(first->size() == 2);
  REQUIRE(found.sections.size() == 1);
  CHECK(found.sections[0].name == ".rodata");
  CHECK(found.sections[0].offset == at);
  CHECK(found.sections[0].size == 0x800);
  CHECK(found.sections[0].fatbins == std::vector<std::uint64_t>{at + 0x100, at + 0x400});

  // Given back, exactly these fatbins are read: a known list naming only the first proves that
  // nothing was searched.
  EmbeddedFinds only_first = found;
  only_first.sections[0].fatbins.pop_back();
  EmbeddedFinds again;
  auto known = read_elf_fatbins(*elf, {}, {}, 1, {}, true, &only_first, &again);
  REQUIRE(known.ok());
  REQUIRE(known->size() == 1);
  CHECK(known->at(0).offset == at + 0x100);
  CHECK(known->at(0).section == FatbinSection::embedded);
  CHECK(known->at(0).section_name == ".rodata");
  CHECK(known->at(0).entries.at(0).arch.sm == 80);
  CHECK(again.sections[0].fatbins == only_first.sections[0].fatbins);

  // Finds that do not describe this file: an offset holding no fatbin, another section size,
  // another section name, a fatbin overlapping the one before: the search runs.
  for (int variant = 0; variant < 4; ++variant) {
    EmbeddedFinds bad = found;
    if (variant == 0) bad.sections[0].fatbins[1] = at + 0x200;
    if (variant == 1) bad.sections[0].size += 8;
    if (variant == 2) bad.sections[0].name = ".data";
    if (variant == 3) bad.sections[0].fatbins[1] = at + 0x108;
    auto searched = read_elf_fatbins(*elf, {}, {}, 1, {}, true, &bad, nullptr);
    INFO("variant " << variant);
    REQUIRE(searched.ok());
    REQUIRE(searched->size() == 2);
    CHECK(searched->at(1).offset == at + 0x400);
  }
}

TEST_CASE("a judged object's payload pages are dropped, its bytes stay readable", "[fatbin][results]") {
  std::uint64_t at = 0;
  const Buf file = elf_with_embedded(at);
  const auto path = std::filesystem::temp_directory_path() / ("archguard-pages-" + std::to_string(::getpid()) + ".so");
  write_bytes(path, file);
  auto r = scan_path(path.string());
  REQUIRE(r.ok());
  REQUIRE(r->objects.size() == 1);
  CHECK(r->objects[0].identity.empty());  // no store given: no identity
  const FatbinEntry& e = r->objects[0].fatbins.at(1).entries.at(0);
  auto before = decompress(e, "x");
  REQUIRE(before.ok());
  const PayloadPages pages(std::span<const ScanReport>(&*r, 1));
  pages.release(r->objects[0]);
  auto after = decompress(e, "x");
  REQUIRE(after.ok());
  CHECK(*after == *before);
  std::filesystem::remove(path);
}

TEST_CASE("the device-link probe's answers are kept and used again", "[fatbin][results]") {
  Buf shstr(1, std::byte{0});
  const std::uint32_t n_fb = add_name(shstr, ".nv_fatbin");
  Buf both = fatbin_of(kEntryKindPtx, 80, bytes_of(".version 8.0\n.target sm_80\n.visible .entry k()\n{ ret; }\n"));
  const Buf second = fatbin_of(kEntryKindPtx, 90, bytes_of(".version 8.0\n.target sm_90\n"));
  both.insert(both.end(), second.begin(), second.end());
  const Buf file = make_elf(shstr, {Sec{n_fb, 1, 2, 0x10000, both}});
  auto elf = ElfFile::parse(file, "probe.so");
  REQUIRE(elf.ok());
  EmbeddedFinds found;
  auto first = read_elf_fatbins(*elf, {}, {}, 1, {}, true, nullptr, &found);
  REQUIRE(first.ok());
  REQUIRE(first->size() == 2);
  CHECK_FALSE(first->at(0).device_link);  // no SASS image: when in doubt, judged
  REQUIRE(found.no_kernels.size() == 1);
  CHECK(found.no_kernels[0] == std::pair{first->at(0).offset, false});
  // A kept answer is taken as it is: here one saying the first fatbin defines no kernel.
  EmbeddedFinds known = found;
  known.no_kernels[0].second = true;
  auto again = read_elf_fatbins(*elf, {}, {}, 1, {}, true, &known, nullptr);
  REQUIRE(again.ok());
  CHECK(again->at(0).device_link);
}
