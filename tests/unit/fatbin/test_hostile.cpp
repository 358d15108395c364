// SPDX-License-Identifier: Apache-2.0
// Hostile and unlucky input (issue 12): size claims that are lies, a wrapper table built to make
// the relocation lookup quadratic, and a file truncated while it is mapped. Every input is
// generated here; nothing large is checked in.
#include <archguard/bytes.hpp>
#include <archguard/container.hpp>
#include <archguard/elf.hpp>
#include <archguard/fatbin.hpp>

#include <catch2/catch.hpp>
#include <lz4.h>
#include <zstd.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "byte_builder.hpp"

using namespace archguard;
using namespace fatbin_test;

namespace {

/// One fatbin with one entry: `flags` 0x11 plus compression bits, payload as given.
Buf fatbin_with(std::uint16_t kind, std::uint64_t flags, const Buf& payload, std::uint32_t compressed,
                std::uint64_t uncompressed) {
  Buf e;
  put_entry_header(e, {.kind = kind,
                       .payload_size = payload.size(),
                       .compressed = compressed,
                       .flags = flags,
                       .uncompressed = uncompressed});
  e.insert(e.end(), payload.begin(), payload.end());
  return fatbin_around(e, kFatbinMagic);
}

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

/// An ET_DYN x86-64 file: .nv_fatbin at 0x10000 holding one fatbin, .nvFatBinSegment at
/// 0x100000 with `wrappers` version-2 wrappers whose pointer words are zero, and a .rela.dyn
/// with one RELATIVE relocation per wrapper, listed in reverse so a linear search per wrapper
/// walks far.
Buf elf_with_wrappers(std::size_t wrappers) {
  const Buf fb = fatbin_with(1, 0x11, Buf(8, std::byte{'x'}), 0, 0);
  Buf shstr;
  auto name = [&shstr](const char* n) {
    const auto at = static_cast<std::uint32_t>(shstr.size());
    for (const char* p = n; *p != 0; ++p) shstr.push_back(static_cast<std::byte>(*p));
    shstr.push_back(std::byte{0});
    return at;
  };
  name("");
  const auto n_shstr = name(".shstrtab"), n_fb = name(".nv_fatbin"), n_seg = name(".nvFatBinSegment"),
             n_rela = name(".rela.dyn");
  Buf seg, rela;
  for (std::size_t i = 0; i < wrappers; ++i) {
    put(seg, kFatbinWrapperMagic, 4);
    put(seg, 2, 4);
    put(seg, 0, 8);
    put(seg, 0, 8);
  }
  for (std::size_t i = wrappers; i-- > 0;) {
    put(rela, 0x100000 + 24 * i + 8, 8);
    put(rela, 8, 8);  // R_X86_64_RELATIVE
    put(rela, 0x10000, 8);
  }
  // ET_DYN (3) for x86-64 (62).
  return make_elf(shstr,
                  {Sec{n_fb, 1, 2, 0x10000, fb}, Sec{n_seg, 1, 3, 0x100000, seg}, Sec{n_rela, 4, 2, 0x200000, rela, 0, 24}},
                  62, 3, 0, 0, n_shstr);
}

double seconds_to_read(const Buf& elf_bytes) {
  double best = 1e9;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    auto elf = ElfFile::parse(elf_bytes, "w.so");
    REQUIRE(elf.ok());
    auto fbs = read_elf_fatbins(*elf);
    REQUIRE(fbs.ok());
    REQUIRE(fbs->size() == 1);
    CHECK(fbs->front().linked);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

std::string temp_path(const char* stem) {
  return (std::filesystem::temp_directory_path() / (std::string(stem) + "-" + std::to_string(::getpid()))).string();
}

/// The error decompressing the first image of `fb` ("claim.fatbin") gives, after checking that
/// the attempt grew the process by less than 32 MiB: a size claim is not an allocation.
std::string claim_error(const Buf& fb) {
  auto r = Fatbin::parse_all(fb, "claim.fatbin");
  REQUIRE(r.ok());
  const long before = max_rss_kib();
  auto out = decompress(r->front().entries[0], "claim.fatbin");
  REQUIRE_FALSE(out.ok());
  CHECK(max_rss_kib() - before < 32 * 1024);
  return out.message();
}

}  // namespace

TEST_CASE("a size claim is not an allocation: lz4", "[fatbin][hostile]") {
  // 1 byte of payload claiming 200 MiB: refused from the payload's size, nothing allocated.
  const Buf fb = fatbin_with(1, 0x11 | kEntryFlagLz4, Buf(1, std::byte{0x10}), 1, std::uint64_t{200} << 20);
  CHECK(claim_error(fb).find("cannot decompress to the claimed 0xc800000 bytes") != std::string::npos);
}

TEST_CASE("a size claim is not an allocation: zstd without a content size", "[fatbin][hostile]") {
  // A real 100-byte zstd frame that does not record its size, behind a header claiming 200 MiB:
  // decoded streaming, memory follows the 100 bytes it yields.
  const std::string text(100, 'a');
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
  Buf z(ZSTD_compressBound(text.size()));
  const std::size_t n = ZSTD_compress2(c, z.data(), z.size(), text.data(), text.size());
  ZSTD_freeCCtx(c);
  REQUIRE(ZSTD_isError(n) == 0);
  z.resize(n);
  REQUIRE(ZSTD_getFrameContentSize(z.data(), z.size()) == ZSTD_CONTENTSIZE_UNKNOWN);
  const Buf fb = fatbin_with(1, 0x11 | kEntryFlagZstd, z, static_cast<std::uint32_t>(z.size()), std::uint64_t{200} << 20);
  CHECK(claim_error(fb).find("zstd payload decompresses to 0x64 bytes, the header claims 0xc800000") != std::string::npos);

  SECTION("a frame that yields more than its claim stops at the claim") {
    const Buf small = fatbin_with(1, 0x11 | kEntryFlagZstd, z, static_cast<std::uint32_t>(z.size()), 10);
    auto s = Fatbin::parse_all(small, "more.fatbin");
    REQUIRE(s.ok());
    auto o = decompress(s->front().entries[0], "more.fatbin");
    REQUIRE_FALSE(o.ok());
    CHECK(o.message().find("decompresses to more than the 0xa bytes the header claims") != std::string::npos);
  }
}

TEST_CASE(".nvFatBinSegment wrappers resolve in linear time", "[fatbin][hostile]") {
  // The same file shape at 1x and 16x: the time ratio of a linear pass is about 16, of the old
  // per-wrapper scan of every relocation about 256 (bound: 100). Measured against each other here.
  const Buf small = elf_with_wrappers(1000), large = elf_with_wrappers(16000);
  auto elf = ElfFile::parse(large, "w.so");
  REQUIRE(elf.ok());
  const PointerIndex index(*elf);
  for (std::size_t i = 0; i < 16000; ++i) REQUIRE(index.at(0x100000 + 24 * i + 8) == std::optional<std::uint64_t>(0x10000));
  CHECK(index.work() <= 4 * 16000 + 16);
  // Indexing only the addresses asked about resolves them alike, and none costs no relocation pass.
  const PointerIndex some(*elf, {0x100000 + 24 * 15999 + 8, 0x100000 + 8});
  CHECK(some.at(0x100000 + 8) == std::optional<std::uint64_t>(0x10000));
  CHECK(some.at(0x100000 + 24 * 15999 + 8) == std::optional<std::uint64_t>(0x10000));
  const PointerIndex none(*elf, {});
  CHECK(none.work() < 64);
  const double t_small = seconds_to_read(small), t_large = seconds_to_read(large);
  INFO("1000 wrappers: " << t_small << " s, 16000 wrappers: " << t_large << " s");
  CHECK(t_large < 100 * std::max(t_small, 1e-4));
}

TEST_CASE("a file truncated while mapped gives an error, not SIGBUS", "[fatbin][hostile]") {
  // A 1 MiB stored payload: its pages are not touched by the scan, then the file shrinks.
  const std::string path = temp_path("archguard-truncated") + ".fatbin";
  write_bytes(path, fatbin_with(1, 0x11, Buf(std::size_t{1} << 20, std::byte{'p'}), 0, 0));
  auto report = scan_path(path);
  REQUIRE(report.ok());
  REQUIRE(report->objects.size() == 1);
  const FatbinEntry& e = report->objects[0].fatbins.at(0).entries.at(0);
  std::filesystem::resize_file(path, 4096);
  auto out = decompress(e, path);
  std::filesystem::remove(path);
  REQUIRE_FALSE(out.ok());
  CHECK(out.message().find("the file shrank while it was being read") != std::string::npos);
}
