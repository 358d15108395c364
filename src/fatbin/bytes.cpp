// SPDX-License-Identifier: Apache-2.0
#include <archguard/bytes.hpp>

#include <cstdio>

namespace archguard {

std::string hex(std::uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

Result<std::string_view> ByteReader::cstring(std::uint64_t offset, std::string_view what,
                                             std::uint64_t limit) const {
  const std::uint64_t end = limit < bytes_.size() ? limit : bytes_.size();
  if (offset >= end) return error_past(offset, 1, what);
  const auto* begin = reinterpret_cast<const char*>(bytes_.data());  // char view of bytes: always valid
  for (std::uint64_t i = offset; i < end; ++i) {
    if (begin[i] == '\0') return std::string_view(begin + offset, static_cast<std::size_t>(i - offset));
  }
  return error_at(offset, what, "string is not terminated before " + hex(base_ + end));
}

Error ByteReader::error_at(std::uint64_t offset, std::string_view what, std::string_view detail) const {
  std::string msg = name_;
  msg += ": ";
  msg += what;
  msg += " at ";
  msg += hex(base_ + offset);
  msg += ": ";
  msg += detail;
  return Error{std::move(msg)};
}

Error ByteReader::error_past(std::uint64_t offset, std::uint64_t length, std::string_view what) const {
  return error_at(offset, what,
                  hex(length) + " bytes run past the end " + hex(base_ + bytes_.size()));
}

}  // namespace archguard
