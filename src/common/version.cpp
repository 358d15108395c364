// SPDX-License-Identifier: Apache-2.0
#include "common/version.hpp"

#include <charconv>

namespace archguard::common {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::optional<unsigned> parse_unsigned(std::string_view s) {
  unsigned v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string version_text(Version2 v) { return std::to_string(v.major) + "." + std::to_string(v.minor); }

std::optional<Version2> parse_cc(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  const auto dot = text.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  auto major = parse_unsigned(text.substr(0, dot));
  auto minor = parse_unsigned(text.substr(dot + 1));
  if (!major || !minor || *major == 0 || *major > 99 || *minor > 9) return std::nullopt;
  return Version2{*major, *minor};
}

}  // namespace archguard::common
