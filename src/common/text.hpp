// SPDX-License-Identifier: Apache-2.0
#pragma once
// Text that came from input (file names, archive members, section and kernel names, compiler
// options) is bytes: it need not be UTF-8 and may hold control characters. These turn it into
// text that is safe where it goes: valid UTF-8 for JSON (nlohmann-json refuses anything else),
// and text that cannot drive a terminal for human output. Both write what they change as \xNN,
// one escape per byte, so the original bytes can be read back from the output.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace archguard::common {

/// The pieces of `text` between the characters of `separators`, empty ones included: "a::b"
/// split at ":" is {"a", "", "b"}, "" is {""}. The views point into `text`.
inline std::vector<std::string_view> split(std::string_view text, std::string_view separators) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || separators.find(text[i]) != std::string_view::npos) {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

/// The length of the well-formed UTF-8 sequence at the start of `s` (1 to 4 bytes), or 0 when
/// it is not one (a stray continuation byte, an overlong form, a surrogate, a code point past
/// U+10FFFF, a sequence cut short). `code` receives the code point.
std::size_t utf8_sequence(std::string_view s, char32_t& code);

/// Whether `s` is entirely well-formed UTF-8.
bool valid_utf8(std::string_view s);

/// `s` with every byte that is not part of a well-formed UTF-8 sequence written as \xNN:
/// always valid UTF-8, and equal to `s` when `s` already was.
std::string utf8_escaped(std::string_view s);

/// `s` for a terminal or a log: control characters (C0, DEL and the C1 range U+0080-U+009F,
/// which some terminals obey as escape sequences), bytes that are not UTF-8, and the code
/// points that reorder or break lines (U+2028, U+2029, the bidirectional embeddings, overrides
/// and isolates) are written as \xNN per byte; the rest, non-ASCII letters included, passes.
std::string terminal_text(std::string_view s);
/// terminal_text(s), appended to `out` (no string of its own: a table of 72,000 lines).
void append_terminal_text(std::string_view s, std::string& out);

/// The current time in UTC as ISO 8601 text to the second: "2025-06-01T12:00:00Z" (the time
/// reports and cache metadata are stamped with).
std::string utc_now();

}  // namespace archguard::common
