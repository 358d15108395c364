// SPDX-License-Identifier: Apache-2.0
#pragma once
// Did-you-mean for misspelt keywords. Header-only: the dependency-free verifier
// (verifier-sources.txt) compiles the layers that use it without the rest of src/common.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace archguard::common {

/// The Levenshtein distance between `a` and `b` (case counts).
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// The candidate nearest to `word` by edit distance (case ignored), or "" when none is close
/// enough to be a typo (at most 2 edits, or a third of the word for long ones) or `word` is one
/// of them. "hihgest" -> "highest", "allmajor" -> "all-major".
inline std::string nearest_word(std::string_view word, const std::vector<std::string>& candidates) {
  const auto lower = [](std::string_view t) {
    std::string out(t);
    for (char& ch : out) ch = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
    return out;
  };
  const std::string w = lower(word);
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, w.size() / 3) + 1;
  for (const std::string& cand : candidates) {
    const std::string c = lower(cand);
    if (c == w) return "";
    if (const std::size_t d = edit_distance(w, c); d < best_d) {
      best_d = d;
      best = cand;
    }
  }
  return best;
}

}  // namespace archguard::common
