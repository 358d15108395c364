// SPDX-License-Identifier: Apache-2.0
#pragma once
// Little-endian integers written into byte buffers (the formats archguard writes itself; reads
// of untrusted bytes go through archguard::ByteReader). Internal to the library (src/common).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace archguard::common {

/// Writes the low `n` bytes of `v` (n <= 8) at `p`, least significant first.
inline void store_le(std::byte* p, std::uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffu);
}

/// Appends the low `n` bytes of `v` (n <= 8), least significant first.
inline void append_le(std::vector<std::byte>& out, std::uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
}

}  // namespace archguard::common
