// SPDX-License-Identifier: Apache-2.0
#include <archguard/elf.hpp>

#include <elf.h>

#include <algorithm>
#include <cstring>

namespace archguard {
namespace {

constexpr std::uint64_t kMaxSections = 1u << 20;

/// The first of `sections` of `type` (SHT_SYMTAB, SHT_DYNAMIC, ...), or nullptr.
const ElfSection* first_of_type(const std::vector<ElfSection>& sections, std::uint32_t type) {
  for (const auto& s : sections)
    if (s.type == type) return &s;
  return nullptr;
}

}  // namespace

bool looks_like_elf(Bytes bytes) {
  return bytes.size() >= 4 && bytes[0] == std::byte{0x7f} && bytes[1] == std::byte{'E'} &&
         bytes[2] == std::byte{'L'} && bytes[3] == std::byte{'F'};
}

Result<ElfFile> ElfFile::parse(Bytes bytes, std::string name, std::uint64_t max_name_length) {
  ElfFile elf(bytes, std::move(name));
  elf.max_name_length_ = max_name_length;
  const ByteReader& r = elf.reader_;
  if (!looks_like_elf(bytes)) return r.error_at(0, "elf header", "not an elf file (bad magic)");
  AG_TRY(auto cls, r.u8(4, "elf header"));
  AG_TRY(auto data, r.u8(5, "elf header"));
  if (cls != 2) return r.error_at(4, "elf header", "class " + hex(cls) + " is not elf64 (only 64-bit files are read)");
  if (data != 1) return r.error_at(5, "elf header", "data encoding " + hex(data) + " is not little endian");
  AG_TRY(auto abi, r.u8(8, "elf header"));
  AG_TRY(auto type, r.u16(16, "elf header"));
  AG_TRY(auto machine, r.u16(18, "elf header"));
  AG_TRY(auto flags, r.u32(48, "elf header"));
  AG_TRY(auto shoff, r.u64(40, "elf header"));
  AG_TRY(auto shentsize, r.u16(58, "elf header"));
  AG_TRY(auto shnum16, r.u16(60, "elf header"));
  AG_TRY(auto shstrndx16, r.u16(62, "elf header"));
  elf.type_ = type;
  elf.machine_ = machine;
  elf.flags_ = flags;
  elf.abi_version_ = abi;
  if (shoff == 0) return elf;  // no section table: nothing to read, not an error
  if (shentsize < 64) return r.error_at(58, "elf header", "section header size " + hex(shentsize) + " is below 0x40");
  std::uint64_t shnum = shnum16;
  std::uint64_t shstrndx = shstrndx16;
  if (shnum == 0 || shstrndx == 0xffff) {  // extended numbering lives in section 0
    AG_TRY(auto size0, r.u64(shoff + 32, "section header 0"));
    AG_TRY(auto link0, r.u32(shoff + 40, "section header 0"));
    if (shnum == 0) shnum = size0;
    if (shstrndx == 0xffff) shstrndx = link0;
  }
  if (shnum > kMaxSections) return r.error_at(60, "elf header", "section count " + hex(shnum) + " is absurd");
  if (!r.contains(shoff, shnum * shentsize))
    return r.error_at(40, "section table", hex(shnum) + " headers of " + hex(shentsize) + " bytes at " + hex(shoff) + " run past the end " + hex(r.size()));
  elf.sections_.resize(static_cast<std::size_t>(shnum));
  std::vector<std::uint32_t> name_offsets(static_cast<std::size_t>(shnum));
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::uint64_t h = shoff + i * shentsize;
    ElfSection& s = elf.sections_[static_cast<std::size_t>(i)];
    AG_TRY(auto nm, r.u32(h, "section header"));
    AG_TRY(auto ty, r.u32(h + 4, "section header"));
    AG_TRY(auto fl, r.u64(h + 8, "section header"));
    AG_TRY(auto ad, r.u64(h + 16, "section header"));
    AG_TRY(auto of, r.u64(h + 24, "section header"));
    AG_TRY(auto sz, r.u64(h + 32, "section header"));
    AG_TRY(auto ln, r.u32(h + 40, "section header"));
    AG_TRY(auto inf, r.u32(h + 44, "section header"));
    AG_TRY(auto es, r.u64(h + 56, "section header"));
    name_offsets[static_cast<std::size_t>(i)] = nm;
    s.type = ty;
    s.flags = fl;
    s.addr = ad;
    s.offset = of;
    s.size = sz;
    s.link = ln;
    s.info = inf;
    s.entsize = es;
  }
  if (shstrndx != 0 && shstrndx < shnum) {
    const ElfSection& strtab = elf.sections_[static_cast<std::size_t>(shstrndx)];
    AG_TRY(auto strs, r.sub(strtab.offset, strtab.size, "section name table"));
    StringTable names(std::move(strs), elf.max_name_length_);  // views, each byte scanned once (a name bomb costs nothing)
    for (std::size_t i = 0; i < elf.sections_.size(); ++i) {
      if (name_offsets[i] == 0 && i == 0) continue;
      AG_TRY(elf.sections_[i].name, names.at(name_offsets[i], "section name"));
    }
  } else if (shstrndx >= shnum) {
    return r.error_at(62, "elf header", "section name table index " + hex(shstrndx) + " is past the count " + hex(shnum));
  }
  return elf;
}

const ElfSection* ElfFile::find(std::string_view name) const {
  for (const auto& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

Result<Bytes> ElfFile::section_bytes(const ElfSection& section) const {
  if (section.type == SHT_NOBITS) return Bytes{};
  return reader_.span(section.offset, section.size, "section " + std::string(section.name));
}

Result<std::vector<ElfSymbol>> ElfFile::symbols() const { return symbols_of(SHT_SYMTAB, "symbol table", "symbol string table"); }

Result<ElfFile::SymbolTable> ElfFile::symbol_table() const { return table_of(SHT_SYMTAB, "symbol table", "symbol string table"); }

Result<std::vector<ElfSymbol>> ElfFile::dynamic_symbols() const {
  return symbols_of(SHT_DYNSYM, "dynamic symbol table", "dynamic symbol string table");
}

Result<ElfFile::SymbolTable> ElfFile::table_of(std::uint32_t type, std::string_view what, std::string_view strings) const {
  const ElfSection* symtab = first_of_type(sections_, type);
  if (symtab == nullptr) return SymbolTable(Bytes{}, StringTable(ByteReader(Bytes{}, name_), max_name_length_));
  if (symtab->link >= sections_.size())
    return reader_.error_at(symtab->offset, what, "string table index " + hex(symtab->link) + " is out of range");
  const ElfSection& strtab = sections_[symtab->link];
  AG_TRY(auto syms, reader_.span(symtab->offset, symtab->size, what));
  AG_TRY(auto strs, reader_.sub(strtab.offset, strtab.size, strings));
  return SymbolTable(syms, StringTable(std::move(strs), max_name_length_));
}

Result<ElfSymbol> ElfFile::SymbolTable::symbol(std::uint64_t i) {
  ElfSymbol sym = fields(i);
  if (const auto nm = field<std::uint32_t>(i, 0); nm != 0) {
    AG_TRY(sym.name, names_.at(nm, "symbol name"));
  }
  return sym;
}

Result<std::vector<ElfSymbol>> ElfFile::symbols_of(std::uint32_t type, std::string_view what, std::string_view strings) const {
  AG_TRY(auto table, table_of(type, what, strings));
  std::vector<ElfSymbol> out;
  out.reserve(static_cast<std::size_t>(table.size()));
  for (std::uint64_t i = 0; i < table.size(); ++i) {
    AG_TRY(auto sym, table.symbol(i));
    out.push_back(sym);
  }
  return out;
}

Result<std::vector<std::string>> ElfFile::needed() const {
  std::vector<std::string> out;
  const ElfSection* dynamic = first_of_type(sections_, SHT_DYNAMIC);
  if (dynamic == nullptr) return out;
  if (dynamic->link >= sections_.size())
    return reader_.error_at(dynamic->offset, "dynamic section", "string table index " + hex(dynamic->link) + " is out of range");
  const ElfSection& strtab = sections_[dynamic->link];
  AG_TRY(auto entries, reader_.sub(dynamic->offset, dynamic->size, "dynamic section"));
  AG_TRY(auto strs, reader_.sub(strtab.offset, strtab.size, "dynamic string table"));
  StringTable names(std::move(strs), max_name_length_);
  for (std::uint64_t o = 0; dynamic->size - o >= 16; o += 16) {
    AG_TRY(auto tag, entries.u64(o, "dynamic entry"));
    if (tag == DT_NULL) break;
    if (tag != DT_NEEDED) continue;
    AG_TRY(auto value, entries.u64(o + 8, "dynamic entry"));
    AG_TRY(auto name, names.at(value, "DT_NEEDED name"));
    out.emplace_back(name);
  }
  return out;
}

std::optional<std::uint64_t> ElfFile::pointer_at(std::uint64_t addr) const {
  for (const auto& s : sections_) {
    if ((s.flags & SHF_ALLOC) == 0 || s.type == SHT_NOBITS || addr < s.addr) continue;
    const std::uint64_t rel = addr - s.addr;
    if (rel >= s.size || s.size - rel < 8) continue;
    auto v = reader_.u64(s.offset + rel, "pointer");
    if (!v) return std::nullopt;
    if (*v != 0) return *v;
    break;
  }
  const std::uint32_t relative = machine_ == kElfMachineAarch64 ? R_AARCH64_RELATIVE : R_X86_64_RELATIVE;
  for (const auto& s : sections_) {
    if (s.type != SHT_RELA || s.entsize != 24) continue;
    auto rela = reader_.sub(s.offset, s.size, "relocations");
    if (!rela) continue;
    for (std::uint64_t o = 0; o + 24 <= rela->size(); o += 24) {
      auto off = rela->u64(o, "relocation");
      auto info = rela->u64(o + 8, "relocation");
      auto addend = rela->u64(o + 16, "relocation");
      if (off && info && addend && *off == addr && (*info & 0xffffffffu) == relative) return *addend;
    }
  }
  return std::nullopt;
}

PointerIndex::PointerIndex(const ElfFile& elf, std::vector<std::uint64_t> addresses) : elf_(elf) {
  std::sort(addresses.begin(), addresses.end());
  wanted_ = std::move(addresses);
  build();
}

PointerIndex::PointerIndex(const ElfFile& elf) : elf_(elf) { build(); }

void PointerIndex::build() {
  const ElfFile& elf = elf_;
  for (const auto& s : elf.sections()) {
    ++work_;
    if ((s.flags & SHF_ALLOC) != 0 && s.type != SHT_NOBITS && s.size >= 8) sections_.push_back(&s);
  }
  std::stable_sort(sections_.begin(), sections_.end(),
                   [](const ElfSection* a, const ElfSection* b) { return a->addr < b->addr; });
  // No address to resolve: most libraries have no version-2 wrapper (cuBLASLt's 2,782 are all
  // of version 1), and its 9 MB of relocations need not be read.
  if (wanted_ && wanted_->empty()) return;
  const std::uint32_t relative = elf.machine() == kElfMachineAarch64 ? R_AARCH64_RELATIVE : R_X86_64_RELATIVE;
  ByteReader reader(elf.bytes(), elf.name());
  for (const auto& s : elf.sections()) {
    if (s.type != SHT_RELA || s.entsize != 24) continue;
    auto rela = reader.sub(s.offset, s.size, "relocations");
    if (!rela) continue;
    for (std::uint64_t o = 0; o + 24 <= rela->size(); o += 24) {
      ++work_;
      auto off = rela->u64(o, "relocation");
      auto info = rela->u64(o + 8, "relocation");
      auto addend = rela->u64(o + 16, "relocation");
      if (!off || !info || !addend || (*info & 0xffffffffu) != relative) continue;
      if (wanted_ && !std::binary_search(wanted_->begin(), wanted_->end(), *off)) continue;
      relative_.emplace_back(*off, *addend);
    }
  }
  // The first relocation for an offset wins, as in pointer_at: stable sort, then lower_bound.
  std::stable_sort(relative_.begin(), relative_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
}

std::optional<std::uint64_t> PointerIndex::at(std::uint64_t addr) const {
  ++work_;
  // The section starting last at or below addr (sections do not overlap in a valid file).
  auto it = std::upper_bound(sections_.begin(), sections_.end(), addr,
                             [](std::uint64_t a, const ElfSection* s) { return a < s->addr; });
  const ElfSection* hit = nullptr;
  if (it != sections_.begin()) {
    const ElfSection& s = **std::prev(it);
    const std::uint64_t rel = addr - s.addr;
    if (rel < s.size && s.size - rel >= 8) hit = &s;
  }
  if (hit != nullptr) {
    ByteReader reader(elf_.bytes(), elf_.name());
    auto v = reader.u64(hit->offset + (addr - hit->addr), "pointer");
    if (!v) return std::nullopt;
    if (*v != 0) return *v;
  }
  auto r = std::lower_bound(relative_.begin(), relative_.end(), addr,
                            [](const auto& p, std::uint64_t a) { return p.first < a; });
  if (r != relative_.end() && r->first == addr) return r->second;
  return std::nullopt;
}

}  // namespace archguard
