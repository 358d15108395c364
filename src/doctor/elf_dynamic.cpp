// SPDX-License-Identifier: Apache-2.0
#include "doctor/elf_dynamic.hpp"

#include <cstring>
#include <optional>
#include <string_view>

namespace archguard::doctor::detail {
namespace {

std::string hex(std::uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), digits[v & 0xf]);
    v >>= 4;
  } while (v != 0);
  return "0x" + s;
}

/// Bounds-checked little-endian reads over one span.
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& name) : b_(bytes), name_(name) {}
  bool contains(std::uint64_t off, std::uint64_t len) const {
    return off <= b_.size() && len <= b_.size() - off;
  }
  template <class T>
  Result<T> read(std::uint64_t off, std::string_view what) const {
    if (!contains(off, sizeof(T)))
      return make_error(name_ + ": " + std::string(what) + " at " + hex(off) + " runs past the end of the file " +
                        hex(b_.size()));
    T v{};
    std::memcpy(&v, b_.data() + off, sizeof(T));
    return v;
  }
  /// NUL-terminated string starting at `off` and ending before `limit`.
  Result<std::string> cstring(std::uint64_t off, std::uint64_t limit, std::string_view what) const {
    if (limit > b_.size() || off >= limit)
      return make_error(name_ + ": " + std::string(what) + " offset " + hex(off) + " lies outside its table (end " +
                        hex(limit) + ")");
    const auto* begin = reinterpret_cast<const char*>(b_.data() + off);  // bytes as chars: always valid
    const void* nul = std::memchr(begin, 0, static_cast<std::size_t>(limit - off));
    if (nul == nullptr)
      return make_error(name_ + ": " + std::string(what) + " at " + hex(off) + " is not terminated before " + hex(limit));
    return std::string(begin, static_cast<const char*>(nul));
  }

 private:
  std::span<const std::byte> b_;
  const std::string& name_;
};

constexpr std::uint32_t kShtDynamic = 6;
constexpr std::uint64_t kDtNull = 0, kDtNeeded = 1;

}  // namespace

const ElfSectionInfo* ElfHeaders::find(std::string_view name) const {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

bool is_elf(std::span<const std::byte> bytes) {
  return bytes.size() >= 4 && bytes[0] == std::byte{0x7f} && bytes[1] == std::byte{'E'} &&
         bytes[2] == std::byte{'L'} && bytes[3] == std::byte{'F'};
}

Result<ElfHeaders> parse_elf_headers(std::span<const std::byte> bytes, const std::string& name) {
  if (!is_elf(bytes)) return make_error(name + ": not an ELF file");
  const Reader r(bytes, name);
  auto cls = r.read<std::uint8_t>(4, "ELF class");
  auto data = r.read<std::uint8_t>(5, "ELF data encoding");
  if (!cls) return cls.error();
  if (!data) return data.error();
  if (*cls != 2 || *data != 1)
    return make_error(name + ": ELF class " + hex(*cls) + " / encoding " + hex(*data) +
                      " at 0x4: only 64-bit little-endian files are supported");
  ElfHeaders h;
  auto type = r.read<std::uint16_t>(0x10, "e_type");
  auto shoff = r.read<std::uint64_t>(0x28, "e_shoff");
  auto shentsize = r.read<std::uint16_t>(0x3a, "e_shentsize");
  auto shnum = r.read<std::uint16_t>(0x3c, "e_shnum");
  auto shstrndx = r.read<std::uint16_t>(0x3e, "e_shstrndx");
  if (!type) return type.error();
  if (!shoff) return shoff.error();
  if (!shentsize) return shentsize.error();
  if (!shnum) return shnum.error();
  if (!shstrndx) return shstrndx.error();
  h.type = *type;
  if (*shoff == 0 || *shnum == 0) return h;  // stripped of section headers: nothing to see
  if (*shentsize < 0x40) return make_error(name + ": e_shentsize " + hex(*shentsize) + " at 0x3a is below 0x40");
  if (*shstrndx >= *shnum)
    return make_error(name + ": e_shstrndx " + hex(*shstrndx) + " at 0x3e is not below e_shnum " + hex(*shnum));
  if (!r.contains(*shoff, std::uint64_t{*shnum} * *shentsize))
    return make_error(name + ": section headers at " + hex(*shoff) + " (" + hex(*shnum) + " of " + hex(*shentsize) +
                      " bytes) run past the end of the file " + hex(bytes.size()));

  struct Raw {
    std::uint32_t name, type, link;
    std::uint64_t flags, addr, offset, size, entsize;
  };
  std::vector<Raw> raw(*shnum);
  for (std::uint16_t i = 0; i < *shnum; ++i) {
    const std::uint64_t at = *shoff + std::uint64_t{i} * *shentsize;
    auto n = r.read<std::uint32_t>(at, "sh_name");
    auto t = r.read<std::uint32_t>(at + 4, "sh_type");
    auto f = r.read<std::uint64_t>(at + 8, "sh_flags");
    auto a = r.read<std::uint64_t>(at + 0x10, "sh_addr");
    auto o = r.read<std::uint64_t>(at + 0x18, "sh_offset");
    auto s = r.read<std::uint64_t>(at + 0x20, "sh_size");
    auto l = r.read<std::uint32_t>(at + 0x28, "sh_link");
    auto e = r.read<std::uint64_t>(at + 0x38, "sh_entsize");
    if (!n || !t || !f || !a || !o || !s || !l || !e) return make_error(name + ": truncated section header " + std::to_string(i));
    raw[i] = Raw{*n, *t, *l, *f, *a, *o, *s, *e};
  }
  const Raw& strtab = raw[*shstrndx];
  if (!r.contains(strtab.offset, strtab.size))
    return make_error(name + ": section name table at " + hex(strtab.offset) + " (size " + hex(strtab.size) +
                      ") runs past the end of the file " + hex(bytes.size()));
  for (std::uint16_t i = 0; i < *shnum; ++i) {
    ElfSectionInfo s;
    if (i != 0) {
      auto nm = r.cstring(strtab.offset + raw[i].name, strtab.offset + strtab.size, "section name");
      if (!nm) return nm.error();
      s.name = std::move(*nm);
    }
    s.type = raw[i].type;
    s.flags = raw[i].flags;
    s.addr = raw[i].addr;
    s.offset = raw[i].offset;
    s.size = raw[i].size;
    h.sections.push_back(std::move(s));
  }

  for (std::uint16_t i = 0; i < *shnum; ++i) {
    if (raw[i].type != kShtDynamic) continue;
    const Raw& dyn = raw[i];
    if (dyn.link >= *shnum)
      return make_error(name + ": dynamic section " + std::to_string(i) + " links to section " + hex(dyn.link) +
                        ", past e_shnum " + hex(*shnum));
    const Raw& str = raw[dyn.link];
    if (!r.contains(dyn.offset, dyn.size))
      return make_error(name + ": dynamic section at " + hex(dyn.offset) + " (size " + hex(dyn.size) +
                        ") runs past the end of the file " + hex(bytes.size()));
    if (!r.contains(str.offset, str.size))
      return make_error(name + ": dynamic string table at " + hex(str.offset) + " (size " + hex(str.size) +
                        ") runs past the end of the file " + hex(bytes.size()));
    for (std::uint64_t at = dyn.offset; at + 16 <= dyn.offset + dyn.size; at += 16) {
      auto tag = r.read<std::uint64_t>(at, "d_tag");
      auto val = r.read<std::uint64_t>(at + 8, "d_val");
      if (!tag) return tag.error();
      if (!val) return val.error();
      if (*tag == kDtNull) break;
      if (*tag != kDtNeeded) continue;
      if (*val >= str.size)
        return make_error(name + ": DT_NEEDED at " + hex(at) + " names string offset " + hex(*val) +
                          ", past the dynamic string table size " + hex(str.size));
      auto lib = r.cstring(str.offset + *val, str.offset + str.size, "DT_NEEDED string");
      if (!lib) return lib.error();
      h.needed.push_back(std::move(*lib));
    }
    break;
  }
  return h;
}

}  // namespace archguard::doctor::detail
