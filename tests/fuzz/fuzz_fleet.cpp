// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the fleet-file reader (parse_fleet_csv, the grammar the CMake module shares):
// any bytes either parse into GPU models or give an error naming a line; a parsed model always
// has a name and a capability that came from the text.
#include <archguard/coverage.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);  // the fuzzer's bytes as text
  auto models = archguard::parse_fleet_csv(text, "fuzz.csv");
  if (models) {
    std::size_t rows = 0;
    for (const auto& m : *models) {
      if (m.name.empty() || m.count == 0) std::abort();
      rows += m.count;
    }
    if (rows == 0) std::abort();
  } else if (models.message().rfind("fuzz.csv", 0) != 0) {
    std::abort();  // every error names the file
  }
  return 0;
}
