// SPDX-License-Identifier: Apache-2.0
#include "common/text.hpp"

#include <ctime>

namespace archguard::common {
namespace {

void escape_byte(std::string& out, unsigned char b) {
  static const char digits[] = "0123456789abcdef";
  out += "\\x";
  out += digits[b >> 4];
  out += digits[b & 15];
}

bool continuation(unsigned char b) { return (b & 0xc0) == 0x80; }

/// Code points a terminal must not receive as they are: C0 and DEL, C1, and those that move
/// text around or start new lines without a newline.
bool unsafe_for_terminal(char32_t c) {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x2028 || c == 0x2029 || (c >= 0x202a && c <= 0x202e) ||
         (c >= 0x2066 && c <= 0x2069) || c == 0x200e || c == 0x200f || c == 0x061c;
}

}  // namespace

std::size_t utf8_sequence(std::string_view s, char32_t& code) {
  if (s.empty()) return 0;
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) {
    code = b0;
    return 1;
  }
  std::size_t n = 0;
  char32_t c = 0, min = 0;
  if ((b0 & 0xe0) == 0xc0) {
    n = 2;
    c = b0 & 0x1f;
    min = 0x80;
  } else if ((b0 & 0xf0) == 0xe0) {
    n = 3;
    c = b0 & 0x0f;
    min = 0x800;
  } else if ((b0 & 0xf8) == 0xf0) {
    n = 4;
    c = b0 & 0x07;
    min = 0x10000;
  } else return 0;
  if (s.size() < n) return 0;
  for (std::size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (!continuation(b)) return 0;
    c = (c << 6) | (b & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
  code = c;
  return n;
}

bool valid_utf8(std::string_view s) {
  char32_t c = 0;
  for (std::size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence(s.substr(i), c);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

namespace {

/// Appends s to out with every byte of an invalid UTF-8 sequence escaped, and every byte of a
/// valid one whose code point `escape` picks (never printable ASCII, 0x20-0x7e: it is not asked).
template <class Escape>
void append_escaped(std::string_view s, std::string& out, Escape escape) {
  char32_t c = 0;
  for (std::size_t i = 0; i < s.size();) {
    // A run of printable ASCII (what kernel names and paths are made of) is appended at once:
    // neither escape picks any of it.
    std::size_t run = i;
    while (run < s.size() && static_cast<unsigned char>(s[run]) >= 0x20 && static_cast<unsigned char>(s[run]) < 0x7f) ++run;
    if (run != i) {
      out.append(s.substr(i, run - i));
      i = run;
      continue;
    }
    const std::size_t n = utf8_sequence(s.substr(i), c);
    if (n == 0) {
      escape_byte(out, static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (escape(c)) {
      for (std::size_t k = 0; k < n; ++k) escape_byte(out, static_cast<unsigned char>(s[i + k]));
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
}

}  // namespace

std::string utf8_escaped(std::string_view s) {
  if (valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  append_escaped(s, out, [](char32_t) { return false; });
  return out;
}

std::string terminal_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  append_escaped(s, out, unsafe_for_terminal);
  return out;
}

void append_terminal_text(std::string_view s, std::string& out) { append_escaped(s, out, unsafe_for_terminal); }

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace archguard::common
