// SPDX-License-Identifier: Apache-2.0
// The Catch2 main of every unit test executable. Exit status: Catch2's (0, or the number of
// failed assertions), except 77 when nothing failed and a test case was skipped through
// ARCHGUARD_SKIP (tests/unit/skip.hpp): CTest reports that case as "Skipped", not "Passed".
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "skip.hpp"

namespace {
std::vector<std::pair<std::string, std::string>>& skipped() {
  static std::vector<std::pair<std::string, std::string>> list;
  return list;
}
}  // namespace

void archguard::test::note_skip(const std::string& test_case, const std::string& reason) {
  std::cout << "SKIPPED: " << test_case << ": " << reason << std::endl;
  skipped().emplace_back(test_case, reason);
}

void archguard::test::skip_now(const std::string& reason) {
  std::cout << "SKIPPED: " << reason << std::endl;
  std::exit(77);
}

int main(int argc, char* argv[]) {
  const int rc = Catch::Session().run(argc, argv);
  if (rc != 0 || skipped().empty()) return rc;
  std::cout << skipped().size() << " test case(s) skipped (exit 77):\n";
  for (const auto& [name, reason] : skipped()) std::cout << "  " << name << ": " << reason << '\n';
  return 77;
}
