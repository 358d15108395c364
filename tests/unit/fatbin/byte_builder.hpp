// SPDX-License-Identifier: Apache-2.0
// The byte builders of the fatbin reader's tests on synthetic input (test_reader.cpp,
// test_hostile.cpp, test_hostile3.cpp): files are put together field by field, little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

namespace fatbin_test {

using Buf = std::vector<std::byte>;

/// Appends the `n` low bytes of `v`, least significant first.
inline void put(Buf& b, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}
/// Writes the `n` low bytes of `v` at `at`, least significant first.
inline void put_at(Buf& b, std::size_t at, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
/// `b` with the `n` low bytes of `v` written at `at` (put_at on a copy).
inline Buf patched(Buf b, std::size_t at, std::uint64_t v, int n) {
  put_at(b, at, v, n);
  return b;
}
/// Appends zeros up to a multiple of `align`.
inline void pad_to(Buf& b, std::size_t align) {
  while (b.size() % align != 0) b.push_back(std::byte{0});
}
/// The 0x40-byte header of a fatbin entry (the fields in file order).
struct EntryHeader {
  std::uint16_t kind = 2;
  std::uint32_t header_size = 0x40;
  std::uint64_t payload_size = 0;
  std::uint32_t compressed = 0;
  std::uint32_t options_at = 0;
  std::uint16_t minor = 8, major = 1;
  std::uint32_t arch = 80;
  std::uint32_t identifier_at = 0, identifier_size = 0;
  std::uint64_t flags = 0x11;
  std::uint64_t uncompressed = 0;
};
/// Appends `h` (version 0x0101, the reserved word zero).
inline void put_entry_header(Buf& b, const EntryHeader& h) {
  put(b, h.kind, 2);
  put(b, 0x0101, 2);
  put(b, h.header_size, 4);
  put(b, h.payload_size, 8);
  put(b, h.compressed, 4);
  put(b, h.options_at, 4);
  put(b, h.minor, 2);
  put(b, h.major, 2);
  put(b, h.arch, 4);
  put(b, h.identifier_at, 4);
  put(b, h.identifier_size, 4);
  put(b, h.flags, 8);
  put(b, 0, 8);
  put(b, h.uncompressed, 8);
}
/// A fatbin: its 16-byte header (magic, version 1, header size 16, the size of `entries`), then
/// `entries`.
inline Buf fatbin_around(const Buf& entries, std::uint32_t magic) {
  Buf f;
  put(f, magic, 4);
  put(f, 1, 2);
  put(f, 16, 2);
  put(f, entries.size(), 8);
  f.insert(f.end(), entries.begin(), entries.end());
  return f;
}
/// The bytes of `s`.
inline Buf bytes_of(std::string_view s) {
  Buf b;
  for (char c : s) b.push_back(static_cast<std::byte>(c));
  return b;
}

/// Appends `name` and its terminating zero to a string table; returns where the name starts
/// (the offset a section header or symbol names it by).
inline std::uint32_t add_name(Buf& strtab, std::string_view name) {
  const auto at = static_cast<std::uint32_t>(strtab.size());
  for (char c : name) strtab.push_back(static_cast<std::byte>(c));
  strtab.push_back(std::byte{0});
  return at;
}
/// Writes `b` to the file `path` (created or replaced).
inline void write_bytes(const std::filesystem::path& path, const Buf& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));  // bytes as chars
}
/// A section of the ELF file make_elf builds; `name` is an offset in .shstrtab.
struct Sec {
  std::uint32_t name = 0, type = 0;
  std::uint64_t flags = 0, addr = 0;
  Buf body;
  std::uint32_t link = 0;
  std::uint64_t entsize = 0;
};

/// An ELF64 file of `machine` and `type` whose section 1 is the .shstrtab `shstr` (named by
/// `shstr_name`, by default unnamed), then `secs`; `extra_headers` more section headers copy
/// header `copy_of` (name bombs).
inline Buf make_elf(const Buf& shstr, const std::vector<Sec>& secs, std::uint16_t machine = 62, std::uint16_t type = 3,
                    std::size_t extra_headers = 0, std::size_t copy_of = 0, std::uint32_t shstr_name = 0) {
  Buf out(64, std::byte{0});
  struct Placed {
    const Sec* s;
    std::uint64_t offset;
  };
  std::vector<Sec> all{Sec{}, Sec{shstr_name, 3, 0, 0, shstr}};
  all.insert(all.end(), secs.begin(), secs.end());
  std::vector<std::uint64_t> offsets;
  for (const Sec& s : all) {
    pad_to(out, 8);
    offsets.push_back(out.size());
    out.insert(out.end(), s.body.begin(), s.body.end());
  }
  pad_to(out, 8);
  const std::uint64_t shoff = out.size();
  auto header = [&out](const Sec& s, std::uint64_t offset) {
    put(out, s.name, 4);
    put(out, s.type, 4);
    put(out, s.flags, 8);
    put(out, s.addr, 8);
    put(out, offset, 8);
    put(out, s.body.size(), 8);
    put(out, s.link, 4);
    put(out, 0, 4);
    put(out, 8, 8);
    put(out, s.entsize, 8);
  };
  for (std::size_t i = 0; i < all.size(); ++i) header(all[i], i == 0 ? 0 : offsets[i]);
  for (std::size_t i = 0; i < extra_headers; ++i) header(all[copy_of], offsets[copy_of]);
  const unsigned char ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  for (int i = 0; i < 16; ++i) out[static_cast<std::size_t>(i)] = std::byte{ident[i]};
  put_at(out, 16, type, 2);
  put_at(out, 18, machine, 2);
  put_at(out, 20, 1, 4);
  put_at(out, 40, shoff, 8);
  put_at(out, 52, 64, 2);
  put_at(out, 58, 64, 2);
  put_at(out, 60, all.size() + extra_headers, 2);
  put_at(out, 62, 1, 2);
  return out;
}

}  // namespace fatbin_test
