// SPDX-License-Identifier: Apache-2.0
#pragma once
// The lists that describe a test corpus (tests/data/malformed/MANIFEST.txt,
// tests/data/fleet/EXPECTED.txt): one record per line, fields separated by '|'.

#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

/// The lines of the list at `path` that are neither empty nor comments ('#'); the list must exist.
inline std::vector<std::string> corpus_lines(const std::string& path) {
  std::ifstream list(path);
  REQUIRE(list.good());
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(list, line))
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}
