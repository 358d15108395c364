// SPDX-License-Identifier: Apache-2.0
#pragma once
// The little the doctor needs from an ELF file's headers: its sections (name, address, file
// range) and the DT_NEEDED entries of its dynamic section. Every read is bounds-checked with
// overflow-checked arithmetic; messages name the file, the offset and the value in hex.
// Internal to src/doctor (the fatbin layer has the full reader; this one also serves the
// self-check, which must locate sections of objects that are already loaded).

#include <archguard/result.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace archguard::doctor::detail {

struct ElfSectionInfo {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t flags = 0;
  std::uint64_t addr = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

struct ElfHeaders {
  std::uint16_t type = 0;  ///< ET_EXEC 2, ET_DYN 3, ...
  std::vector<ElfSectionInfo> sections;
  std::vector<std::string> needed;  ///< DT_NEEDED, in order
  const ElfSectionInfo* find(std::string_view name) const;
};

/// Whether the bytes start with the ELF magic.
bool is_elf(std::span<const std::byte> bytes);
/// Parses a 64-bit little-endian ELF file's section headers and DT_NEEDED list.
Result<ElfHeaders> parse_elf_headers(std::span<const std::byte> bytes, const std::string& name);

}  // namespace archguard::doctor::detail
