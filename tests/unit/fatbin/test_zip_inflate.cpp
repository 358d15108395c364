// SPDX-License-Identifier: Apache-2.0
// Deflated zip members inflated in one pass by libdeflate (issue 25): the central directory
// reader (zip_directory.hpp) takes only members whose headers agree, and a zip read that way
// gives the report libarchive's path gives, in memory and spilled to a temporary file.
#include <archguard/container.hpp>

#include <catch2/catch.hpp>
#include <libdeflate.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fatbin/zip_directory.hpp"

using namespace archguard;

namespace {

using Buf = std::vector<std::byte>;

const std::string kDir = std::string(ARCHGUARD_SOURCE_DIR) + "/tests/data/malformed/";

Buf read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Buf out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

void put16(Buf& b, std::uint32_t v) {
  for (int i = 0; i < 2; ++i) b.push_back(std::byte(static_cast<unsigned char>(v >> (8 * i))));
}
void put32(Buf& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(std::byte(static_cast<unsigned char>(v >> (8 * i))));
}

struct Member {
  std::string name;
  Buf data;
  bool descriptor = false;        ///< sizes and CRC-32 after the data (libarchive reads it)
  std::uint32_t crc_xor = 0;      ///< a wrong CRC-32 in both headers
  std::uint32_t cd_size_add = 0;  ///< a size in the central directory alone that differs
};

/// A zip of deflated members, written here (libdeflate at level 6).
Buf zip_of(const std::vector<Member>& members) {
  libdeflate_compressor* c = libdeflate_alloc_compressor(6);
  Buf out, cd;
  for (const Member& m : members) {
    Buf comp(libdeflate_deflate_compress_bound(c, m.data.size()));
    comp.resize(libdeflate_deflate_compress(c, m.data.data(), m.data.size(), comp.data(), comp.size()));
    const std::uint32_t crc = libdeflate_crc32(0, m.data.data(), m.data.size()) ^ m.crc_xor;
    const auto size = static_cast<std::uint32_t>(m.data.size()), csize = static_cast<std::uint32_t>(comp.size());
    const auto local = static_cast<std::uint32_t>(out.size());
    const std::uint16_t flags = m.descriptor ? 8 : 0;
    put32(out, 0x04034b50), put16(out, 20), put16(out, flags), put16(out, 8), put16(out, 0), put16(out, 0x21);
    put32(out, m.descriptor ? 0 : crc), put32(out, m.descriptor ? 0 : csize), put32(out, m.descriptor ? 0 : size);
    put16(out, static_cast<std::uint32_t>(m.name.size())), put16(out, 0);
    for (char ch : m.name) out.push_back(std::byte(static_cast<unsigned char>(ch)));
    out.insert(out.end(), comp.begin(), comp.end());
    if (m.descriptor) put32(out, 0x08074b50), put32(out, crc), put32(out, csize), put32(out, size);
    put32(cd, 0x02014b50), put16(cd, 20), put16(cd, 20), put16(cd, flags), put16(cd, 8), put16(cd, 0), put16(cd, 0x21);
    put32(cd, crc), put32(cd, csize), put32(cd, size + m.cd_size_add);
    put16(cd, static_cast<std::uint32_t>(m.name.size())), put16(cd, 0), put16(cd, 0), put16(cd, 0), put16(cd, 0);
    put32(cd, 0), put32(cd, local);
    for (char ch : m.name) cd.push_back(std::byte(static_cast<unsigned char>(ch)));
  }
  libdeflate_free_compressor(c);
  const auto cd_offset = static_cast<std::uint32_t>(out.size());
  out.insert(out.end(), cd.begin(), cd.end());
  put32(out, 0x06054b50), put16(out, 0), put16(out, 0);
  put16(out, static_cast<std::uint32_t>(members.size())), put16(out, static_cast<std::uint32_t>(members.size()));
  put32(out, static_cast<std::uint32_t>(cd.size())), put32(out, cd_offset), put16(out, 0);
  return out;
}

/// valid.o and 1 MiB after it that does not compress (the ELF reader ignores it): larger than
/// the block libarchive inflates to classify a member.
Buf big_object() {
  Buf b = read_file(kDir + "valid.o");
  std::uint32_t x = 25;
  for (int i = 0; i < (1 << 20); ++i) {
    x = x * 1664525u + 1013904223u;
    b.push_back(std::byte(static_cast<unsigned char>(x >> 24)));
  }
  return b;
}

std::string write(const std::filesystem::path& dir, const std::string& name, const Buf& bytes) {
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

/// What a report says of its objects, the payload bytes included.
std::string summary(const ScanReport& r) {
  std::string s;
  for (const auto& o : r.objects) {
    s += o.member + " " + std::to_string(o.fatbins.size()) + "\n";
    for (const auto& f : o.fatbins)
      for (const auto& e : f.entries)
        s += std::to_string(e.stored_size) + " " +
             std::string(reinterpret_cast<const char*>(e.payload.data()), e.payload.size()) + "\n";  // bytes as text
  }
  for (const auto& e : r.errors) s += "error " + e + "\n";
  return s;
}

}  // namespace

TEST_CASE("the zip directory takes only deflated members whose headers agree", "[fatbin][zip]") {
  const Buf obj = read_file(kDir + "valid.o");
  const Buf zip = zip_of({{.name = "a.o", .data = obj},
                          {.name = "b.o", .data = obj, .descriptor = true},
                          {.name = "c.o", .data = obj, .cd_size_add = 16}});
  const auto dir = detail::ZipDirectory::read(zip);
  CHECK(dir.size() == 2);  // b.o: a data descriptor
  auto a = dir.at(30 + 3);
  REQUIRE(a);
  CHECK(a->name == "a.o");
  CHECK(a->header == 0);
  CHECK(a->size == obj.size());
  CHECK_FALSE(dir.at(30 + 2));  // not where a member's data starts
  CHECK_FALSE(dir.at(0));
  // c.o: the central directory says 16 bytes more than the local header
  const std::uint64_t c_header = zip.size() - 22 - 3 * (46 + 3) - (30 + 3 + a->compressed);
  CHECK_FALSE(dir.at(c_header + 30 + 3));
  // A zip cut short has no end record: nothing is taken.
  CHECK(detail::ZipDirectory::read(Bytes(zip).first(zip.size() - 1)).size() == 0);
  CHECK(detail::ZipDirectory::read(Bytes{}).size() == 0);
}

TEST_CASE("a wheel inflated in one pass reads as libarchive reads it", "[fatbin][zip]") {
  const auto tmp = std::filesystem::temp_directory_path() / ("archguard-zip-" + std::to_string(::getpid()));
  const Buf obj = read_file(kDir + "valid.o"), big = big_object();
  const std::vector<Member> members = {{.name = "pkg/lib/small.o", .data = obj}, {.name = "pkg/lib/big.o", .data = big}};
  std::vector<Member> described = members;
  for (auto& m : described) m.descriptor = true;
  // Same name, two directories: the report's paths agree.
  const std::string fast = write(tmp / "fast", "w.whl", zip_of(members));
  const std::string slow = write(tmp / "slow", "w.whl", zip_of(described));
  auto want = scan_path(slow);
  REQUIRE(want);
  REQUIRE(want->objects.size() == 2);
  auto got = scan_path(fast);
  REQUIRE(got);
  CHECK(summary(*got) == summary(*want));
  ScanOptions spilled;
  spilled.spill_threshold = 64 << 10;  // big.o inflated into a mapped temporary file
  auto got_spilled = scan_path(fast, spilled);
  REQUIRE(got_spilled);
  CHECK(summary(*got_spilled) == summary(*want));
  // In memory (scan_bytes), and nested in another zip.
  const Buf outer = zip_of({{.name = "inner.whl", .data = zip_of(members)}});
  auto nested = scan_bytes(outer, "outer.zip");
  REQUIRE(nested);
  REQUIRE(nested->objects.size() == 2);
  CHECK(nested->objects[1].member == "pkg/lib/big.o");
  CHECK(nested->errors.empty());
  std::filesystem::remove_all(tmp);
}

TEST_CASE("a zip member whose CRC-32 is wrong is a clear error", "[fatbin][zip]") {
  const Buf big = big_object();
  const Buf zip = zip_of({{.name = "lib/big.o", .data = big, .crc_xor = 1}, {.name = "lib/after.o", .data = big}});
  auto r = scan_bytes(zip, "bad.zip");
  REQUIRE(r);
  CHECK(r->objects.empty());  // the member after it is not read
  REQUIRE(r->errors.size() == 1);
  CHECK_THAT(r->errors[0], Catch::Matches("bad\\.zip:lib/big\\.o: the bytes inflated from the deflated data at 0x27 \\(0x[0-9a-f]+ "
                                          "bytes\\) have the crc-32 0x[0-9a-f]+, not the 0x[0-9a-f]+ the zip's headers say"));
}
