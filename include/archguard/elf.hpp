// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// A minimal, validating ELF64 little-endian reader: sections and symbols. It reads host
/// objects (x86-64, aarch64: executables, shared libraries, relocatable objects) and cubins
/// (EM_CUDA). Every read goes through ByteReader; an ElfFile that exists has a valid header
/// and a section table that lies inside the bytes.

#include <archguard/bytes.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace archguard {

inline constexpr std::uint16_t kElfTypeRel = 1;
inline constexpr std::uint16_t kElfTypeExec = 2;
inline constexpr std::uint16_t kElfTypeDyn = 3;
inline constexpr std::uint16_t kElfMachineX86_64 = 62;
inline constexpr std::uint16_t kElfMachineAarch64 = 183;
inline constexpr std::uint16_t kElfMachineCuda = 190;

struct ElfSection {
  std::string_view name;  ///< points into the file's bytes (at most kMaxNameLength bytes)
  std::uint32_t type = 0;
  std::uint64_t flags = 0;
  std::uint64_t addr = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t link = 0;
  std::uint32_t info = 0;
  std::uint64_t entsize = 0;
};

struct ElfSymbol {
  std::string_view name;  ///< points into the file's bytes
  std::uint8_t info = 0;  ///< binding << 4 | type
  std::uint8_t other = 0;
  std::uint16_t shndx = 0;
  std::uint64_t value = 0;
  std::uint64_t size = 0;
  std::uint8_t type() const { return info & 0xf; }
  /// Defined in this file (section index other than SHN_UNDEF); an undefined entry of the
  /// dynamic symbol table is one the file imports.
  bool defined() const { return shndx != 0; }
};

/// Whether the bytes start with the ELF magic.
bool looks_like_elf(Bytes bytes);

class ElfFile {
 public:
  /// Validates the header and the section table. `name` names the file in messages. Names read
  /// from its string tables (sections, symbols, DT_NEEDED) longer than `max_name_length` are errors.
  static Result<ElfFile> parse(Bytes bytes, std::string name, std::uint64_t max_name_length = kMaxNameLength);

  std::uint16_t type() const { return type_; }
  std::uint16_t machine() const { return machine_; }
  std::uint32_t flags() const { return flags_; }
  std::uint8_t abi_version() const { return abi_version_; }  ///< e_ident[EI_ABIVERSION]
  const std::vector<ElfSection>& sections() const { return sections_; }
  const std::string& name() const { return name_; }
  Bytes bytes() const { return reader_.bytes(); }

  /// The first section called `name`, or nullptr.
  const ElfSection* find(std::string_view name) const;
  /// The bytes of a section (empty for SHT_NOBITS), checked against the file size.
  Result<Bytes> section_bytes(const ElfSection& section) const;
  /// The symbols of the first SHT_SYMTAB section (empty when there is none).
  Result<std::vector<ElfSymbol>> symbols() const;
  /// A symbol table read in place: its entries' fields without their names, and each name on
  /// request. For callers that pick a few of many entries by their fields: libtorch_cuda's table
  /// has 236,000 entries and 73 MB of names, of which its fatbins' translation units need about
  /// a thousand, and a pass that reads only the fields touches no page of the names.
  class SymbolTable {
   public:
    static constexpr std::uint64_t kEntrySize = 24;  ///< sizeof(Elf64_Sym)
    SymbolTable(Bytes entries, StringTable names) : entries_(entries), names_(std::move(names)) {}
    /// Whole entries in the table (a trailing partial entry is not one).
    std::uint64_t size() const { return entries_.size() / kEntrySize; }
    /// st_info (binding << 4 | type) of entry i < size().
    std::uint8_t info(std::uint64_t i) const { return field<std::uint8_t>(i, 4); }
    /// st_shndx of entry i < size().
    std::uint16_t shndx(std::uint64_t i) const { return field<std::uint16_t>(i, 6); }
    /// st_value of entry i < size().
    std::uint64_t value(std::uint64_t i) const { return field<std::uint64_t>(i, 8); }
    /// Entry i < size() with every field, its name not read (empty).
    ElfSymbol fields(std::uint64_t i) const {
      return ElfSymbol{{}, info(i), field<std::uint8_t>(i, 5), shndx(i), value(i), field<std::uint64_t>(i, 16)};
    }
    /// Entry i < size() with its name read and checked (a name offset of 0 is the empty name).
    Result<ElfSymbol> symbol(std::uint64_t i);

   private:
    template <class T>
    T field(std::uint64_t i, std::uint64_t at) const {
      T v;
      std::memcpy(&v, entries_.data() + i * kEntrySize + at, sizeof v);  // the host is little endian
      return v;
    }
    Bytes entries_;
    StringTable names_;
  };
  /// The first SHT_SYMTAB section and its string table, both checked to lie inside the file (an
  /// empty table when there is none).
  Result<SymbolTable> symbol_table() const;
  /// The symbols of the first SHT_DYNSYM section (empty when there is none): what the file
  /// imports and exports. Stripped files keep it.
  Result<std::vector<ElfSymbol>> dynamic_symbols() const;
  /// The DT_NEEDED entries of the SHT_DYNAMIC section, in order (empty for a static or
  /// relocatable file).
  Result<std::vector<std::string>> needed() const;
  /// Reads the 64-bit word at virtual address `addr` from the section containing it, or the
  /// addend of a RELATIVE relocation at that address when the stored word is zero (position
  /// independent files keep pointers in relocations). Nothing when the address maps nowhere.
  /// Costs a pass over every relocation; to resolve many addresses use PointerIndex.
  std::optional<std::uint64_t> pointer_at(std::uint64_t addr) const;

 private:
  ElfFile(Bytes bytes, std::string name) : reader_(bytes, name), name_(std::move(name)) {}
  /// The symbols of the first section of type `type` (SHT_SYMTAB or SHT_DYNSYM); `what` and
  /// `strings` name the table and its string table in messages.
  Result<std::vector<ElfSymbol>> symbols_of(std::uint32_t type, std::string_view what, std::string_view strings) const;
  /// The table of the first section of type `type`, as symbol_table().
  Result<SymbolTable> table_of(std::uint32_t type, std::string_view what, std::string_view strings) const;

  ByteReader reader_;
  std::string name_;
  std::uint16_t type_ = 0, machine_ = 0;
  std::uint32_t flags_ = 0;
  std::uint8_t abi_version_ = 0;
  std::uint64_t max_name_length_ = kMaxNameLength;
  std::vector<ElfSection> sections_;
};

/// pointer_at for many addresses: the allocated sections and the RELATIVE relocations of a
/// file indexed once (sorted), so that resolving n pointers costs O((n + r) log r) rather than
/// n passes over r relocations. Holds a reference to the file, which must outlive it.
class PointerIndex {
 public:
  explicit PointerIndex(const ElfFile& elf);
  /// Indexes only the relocations at `addresses`: at() must then be asked about those alone.
  /// Cheaper when they are few: a large library has hundreds of thousands of relocations, of
  /// which the fatbin reader needs one or two.
  PointerIndex(const ElfFile& elf, std::vector<std::uint64_t> addresses);
  /// As ElfFile::pointer_at.
  std::optional<std::uint64_t> at(std::uint64_t addr) const;
  /// Relocation entries and section headers visited so far: a measure of the work done, for
  /// tests that the resolution stays linear.
  std::uint64_t work() const { return work_; }

 private:
  void build();

  const ElfFile& elf_;
  std::vector<const ElfSection*> sections_;                        ///< allocated, with file bytes, by address
  std::vector<std::pair<std::uint64_t, std::uint64_t>> relative_;  ///< (offset, addend) by offset
  std::optional<std::vector<std::uint64_t>> wanted_;               ///< sorted; when set, the only offsets kept
  mutable std::uint64_t work_ = 0;
};

}  // namespace archguard
