// SPDX-License-Identifier: Apache-2.0
#pragma once
// The records archguard keeps in its results cache (a file's facts, an object's judgement):
// unsigned LEB128 numbers and length-prefixed strings, written in field order and read back
// with every read bounded by the record. Internal to the library (src/common).
#include <archguard/bytes.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace archguard::common {

/// Writes a record; read it back with Reader, field by field in the same order.
struct Writer {
  std::vector<std::byte> out;
  void num(std::uint64_t v) {
    do {
      const auto low = static_cast<unsigned>(v & 0x7f);
      v >>= 7;
      out.push_back(static_cast<std::byte>(low | (v != 0 ? 0x80u : 0u)));
    } while (v != 0);
  }
  /// Numbers, enumerations and flags, in order.
  template <typename... T>
  void nums(T... v) {
    (num(static_cast<std::uint64_t>(v)), ...);
  }
  void str(std::string_view s) {
    num(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());  // text viewed as bytes
    out.insert(out.end(), p, p + s.size());
  }
  void bytes(const std::vector<std::byte>& b) {
    num(b.size());
    out.insert(out.end(), b.begin(), b.end());
  }
};

/// Reads what Writer wrote; once anything is out of bounds `ok` is false and every read gives 0.
struct Reader {
  Bytes in;
  std::size_t at = 0;
  bool ok = true;
  std::uint64_t num() {
    std::uint64_t v = 0;
    for (unsigned shift = 0; ok; shift += 7) {
      if (at >= in.size() || shift > 63) break;
      const auto b = std::to_integer<unsigned>(in[at++]);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    ok = false;
    return 0;
  }
  /// A number no larger than `max`.
  std::uint64_t upto(std::uint64_t max) {
    const std::uint64_t v = num();
    if (v > max) ok = false;
    return ok ? v : 0;
  }
  /// A count of things each taking at least one byte: no more than the bytes left.
  std::uint64_t count() { return upto(in.size() - at); }
  Bytes span() {
    const std::uint64_t n = count();
    if (!ok) return {};
    const Bytes b = in.subspan(at, n);
    at += n;
    return b;
  }
  std::string str() {
    const Bytes b = span();
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());  // bytes viewed as text
  }
};

}  // namespace archguard::common
