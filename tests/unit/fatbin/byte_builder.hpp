// SPDX-License-Identifier: Apache-2.0
// The byte builders of the fatbin reader's tests on synthetic input (test_reader.cpp,
// test_hostile.cpp, test_hostile3.cpp): files are put together field by field, little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
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
/// Appends zeros up to a multiple of `align`.
inline void pad_to(Buf& b, std::size_t align) {
  while (b.size() % align != 0) b.push_back(std::byte{0});
}
/// The bytes of `s`.
inline Buf bytes_of(std::string_view s) {
  Buf b;
  for (char c : s) b.push_back(static_cast<std::byte>(c));
  return b;
}

}  // namespace fatbin_test
