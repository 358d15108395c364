// SPDX-License-Identifier: Apache-2.0
#pragma once
// Names of enumerators (or of numeric codes) from one table: a function that spells a value
// lists each value once beside its name instead of a switch of case/return pairs. Header-only:
// the dependency-free verifier (verifier-sources.txt) compiles the layers that use it.
#include <cstddef>
#include <string_view>

namespace archguard::common {

/// A value and the name it is written as.
template <class T>
struct Named {
  T value;
  std::string_view name;
};

/// The name of `value` in `table`, or `otherwise` when the table does not list it.
template <class T, std::size_t N>
constexpr std::string_view name_in(const Named<T> (&table)[N], T value, std::string_view otherwise = "?") {
  for (const Named<T>& n : table)
    if (n.value == value) return n.name;
  return otherwise;
}

}  // namespace archguard::common
