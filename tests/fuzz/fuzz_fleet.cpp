// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the fleet readers. parse_fleet_csv (the grammar the CMake module shares): any
// bytes either parse into GPU models or give an error naming a line; a parsed model always has a
// name and a capability that came from the text. The node-report, Slurm and Kubernetes readers
// (archguard/fleet.hpp): any bytes give nodes and problems, every problem says where, and the
// fleet report of what was read reads back as the same report.
#include <archguard/coverage.hpp>
#include <archguard/fleet.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
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
  namespace fl = archguard::fleet;
  fl::Fleet f;
  fl::read_reports(text, "fuzz.json", f);
  fl::read_slurm(text, "fuzz.txt", f);
  fl::read_kubernetes(text, "fuzz-k8s.json", f);
  fl::finish(f);
  for (const auto& p : f.problems)
    if (p.where.empty() || p.message.empty()) std::abort();
  for (const auto& n : f.nodes)
    if (n.name.empty()) std::abort();
  const std::string once = fl::to_json(f);
  fl::Fleet again;
  fl::read_reports(once, "again.json", again);
  fl::finish(again);
  if (again.nodes.size() != f.nodes.size()) std::abort();  // the report holds every node it lists
  (void)fl::to_csv(f);
  (void)fl::groups(f);
  return 0;
}
