// SPDX-License-Identifier: Apache-2.0
#include <archguard/doctor.hpp>

#include <archguard/elf.hpp>

#include <catch2/catch.hpp>

#include "skip.hpp"

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
#else
// Built without nvcc: the same test cases, reported as skipped rather than left out.
TEST_CASE("runtime_need finds libcudart.so.N and device code in an nvcc-built library", "[doctor][elf]") {
  ARCHGUARD_SKIP("built without nvcc: no fixture library");
}
#endif

// runtime_need reads DT_NEEDED through the fatbin layer's ELF reader (archguard::ElfFile): the
// one bounds-checked reader of the project. Malformed headers and dynamic sections give messages
// naming the file, the offset and the value.
TEST_CASE("malformed ELF headers and dynamic sections give messages with file, offset and value", "[doctor][elf]") {
  using archguard::ElfFile;
  auto bytes = self_bytes();
  REQUIRE(bytes.size() > 0x40);
  auto needed_of = [](std::span<const std::byte> b, const char* name) -> archguard::Result<std::vector<std::string>> {
    auto elf = ElfFile::parse(b, name);
    if (!elf) return elf.error();
    return elf->needed();
  };

  SECTION("the unmodified file lists its DT_NEEDED entries") {
    auto r = needed_of(bytes, "t.so");
    REQUIRE(r.ok());
    CHECK_FALSE(r->empty());
  }
  SECTION("truncated header") {
    auto r = needed_of(std::span(bytes).first(0x30), "t.so");
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().rfind("t.so: ", 0) == 0);
    CHECK(r.message().find("0x30") != std::string::npos);
  }
  SECTION("section headers past the end") {
    auto copy = bytes;
    const std::uint64_t off = 0xfffffffffff0;
    std::memcpy(copy.data() + 0x28, &off, 8);
    auto r = needed_of(copy, "t.so");
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().rfind("t.so: ", 0) == 0);
    CHECK(r.message().find("0xfffffffffff0") != std::string::npos);
  }
  SECTION("DT_NEEDED name offset past the dynamic string table") {
    auto elf = ElfFile::parse(bytes, "t.so");
    REQUIRE(elf.ok());
    const archguard::ElfSection* dyn = nullptr;
    for (const auto& sec : elf->sections())
      if (sec.type == 6) dyn = &sec;
    REQUIRE(dyn != nullptr);
    auto copy = bytes;
    bool patched = false;
    for (std::uint64_t o = 0; o + 16 <= dyn->size; o += 16) {
      std::uint64_t tag = 0;
      std::memcpy(&tag, copy.data() + dyn->offset + o, 8);
      if (tag == 1) {
        const std::uint64_t bad = 0x7fffffff;
        std::memcpy(copy.data() + dyn->offset + o + 8, &bad, 8);
        patched = true;
        break;
      }
    }
    REQUIRE(patched);
    auto r = needed_of(copy, "t.so");
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().rfind("t.so: ", 0) == 0);
    CHECK(r.message().find("DT_NEEDED name") != std::string::npos);
  }
  SECTION("32-bit") {
    auto copy = bytes;
    copy[4] = std::byte{1};
    auto r = needed_of(copy, "t.so");
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().rfind("t.so: ", 0) == 0);
  }
  SECTION("not ELF") {
    std::vector<std::byte> junk(64, std::byte{0x41});
    CHECK_FALSE(archguard::looks_like_elf(junk));
    auto r = needed_of(junk, "junk");
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().rfind("junk: ", 0) == 0);
  }
  SECTION("every truncation fails cleanly or parses") {
    for (std::size_t n = 0; n < 0x48; ++n) (void)needed_of(std::span(bytes).first(n), "t");
    SUCCEED();
  }
}
