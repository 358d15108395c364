// SPDX-License-Identifier: Apache-2.0
#pragma once
// What steps 2 and 3 read of a binary: the file mapped and, when it is ELF, parsed. Internal to
// src/doctor.

#include <archguard/container.hpp>
#include <archguard/elf.hpp>

#include <string>
#include <utility>

namespace archguard::doctor::detail {

/// Maps `path` and, when it is an ELF file, returns `read(elf, out)` (a Result<Out>) over its
/// parse, `out` an Out whose path is `path`; a file of another kind gives that Out as it is.
template <class Out, class Read>
Result<Out> read_if_elf(const std::string& path, Read read) {
  Out out;
  out.path = path;
  AG_TRY(auto file, map_file(path));
  const Bytes bytes = file->bytes();
  if (!looks_like_elf(bytes)) return out;
  AG_TRY(auto elf, ElfFile::parse(bytes, path));
  return read(elf, std::move(out));
}

}  // namespace archguard::doctor::detail
