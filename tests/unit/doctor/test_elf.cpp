// SPDX-License-Identifier: Apache-2.0
#include <archguard/doctor.hpp>

#include "doctor/elf_dynamic.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <vector>

using namespace archguard::doctor;

namespace {
// A real ELF file to corrupt: a small one (an nvcc fixture) when built, else this test program
// (large under the sanitizers, so read in one go).
std::vector<std::byte> self_bytes() {
#ifdef ARCHGUARD_DOCTOR_FIXTURE_DIR
  std::ifstream f(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_sm75.so", std::ios::binary | std::ios::ate);
#else
  std::ifstream f("/proc/self/exe", std::ios::binary | std::ios::ate);
#endif
  const auto size = static_cast<std::size_t>(f.tellg());
  std::vector<std::byte> b(size);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(size));
  return b;
}
}  // namespace

TEST_CASE("runtime_need reads DT_NEEDED of an ordinary executable", "[doctor][elf]") {
  auto need = runtime_need("/proc/self/exe");
  REQUIRE(need.ok());
  CHECK(need->elf);
  bool has_libc = false;
  for (const auto& n : need->needed) has_libc = has_libc || n.rfind("libc.so", 0) == 0;
  CHECK(has_libc);
  CHECK_FALSE(need->cudart_major.has_value());
  CHECK_FALSE(need->has_device_code);
}

TEST_CASE("runtime_need: not an ELF file, missing file", "[doctor][elf]") {
  auto need = runtime_need(ARCHGUARD_SOURCE_DIR "/tests/unit/doctor/CMakeLists.txt");
  REQUIRE(need.ok());
  CHECK_FALSE(need->elf);
  auto missing = runtime_need("/nonexistent/libfoo.so");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message().find("/nonexistent/libfoo.so: cannot open") == 0);
}

#ifdef ARCHGUARD_DOCTOR_FIXTURE_DIR
TEST_CASE("runtime_need finds libcudart.so.N and device code in an nvcc-built library", "[doctor][elf]") {
  auto need = runtime_need(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_sm75.so");
  REQUIRE(need.ok());
  CHECK(need->elf);
  CHECK(need->has_device_code);
  REQUIRE(need->cudart_major.has_value());
  CHECK(*need->cudart_major >= 12);
}
#endif

TEST_CASE("malformed ELF headers give messages with file, offset and value", "[doctor][elf]") {
  using archguard::doctor::detail::parse_elf_headers;
  auto bytes = self_bytes();
  REQUIRE(bytes.size() > 0x40);

  SECTION("truncated header") {
    auto r = parse_elf_headers(std::span(bytes).first(0x30), "t.so");
    REQUIRE_FALSE(r.ok());
    CHECK(r.message() == "t.so: e_shentsize at 0x3a runs past the end of the file 0x30");
  }
  SECTION("section headers past the end") {
    auto copy = bytes;
    const std::uint64_t off = 0xfffffffffff0;
    std::memcpy(copy.data() + 0x28, &off, 8);
    auto r = parse_elf_headers(copy, "t.so");
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().find("t.so: section headers at 0xfffffffffff0") == 0);
    CHECK(r.message().find("run past the end of the file") != std::string::npos);
  }
  SECTION("section name index past the table") {
    auto copy = bytes;
    const std::uint16_t bad = 0xffff;
    std::memcpy(copy.data() + 0x3e, &bad, 2);
    auto r = parse_elf_headers(copy, "t.so");
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().find("t.so: e_shstrndx 0xffff at 0x3e is not below e_shnum") == 0);
  }
  SECTION("32-bit") {
    auto copy = bytes;
    copy[4] = std::byte{1};
    auto r = parse_elf_headers(copy, "t.so");
    REQUIRE_FALSE(r.ok());
    CHECK(r.message() == "t.so: ELF class 0x1 / encoding 0x1 at 0x4: only 64-bit little-endian files are supported");
  }
  SECTION("not ELF") {
    std::vector<std::byte> junk(64, std::byte{0x41});
    auto r = parse_elf_headers(junk, "junk");
    REQUIRE_FALSE(r.ok());
    CHECK(r.message() == "junk: not an ELF file");
  }
  SECTION("every truncation fails cleanly or parses") {
    for (std::size_t n = 0; n < 0x48; ++n) (void)parse_elf_headers(std::span(bytes).first(n), "t");
    SUCCEED();
  }
}
