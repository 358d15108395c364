// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the architecture token parser: a list in any dialect (CMake lists, nvcc
// flags, torch and TensorFlow spellings) parses or is refused with a message; what parses
// canonicalizes and formats in every dialect, and the CMake spelling parses back to the same
// targets.
#include <archguard/arch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);  // the fuzzer's bytes as text
  (void)archguard::parse_token(text);
  (void)archguard::parse_dialect(text);
  auto targets = archguard::parse_list(text);
  if (!targets) {
    if (targets.message().empty()) std::abort();
    return 0;
  }
  archguard::canonicalize(*targets);
  for (auto d : {archguard::Dialect::cmake, archguard::Dialect::nvcc, archguard::Dialect::torch, archguard::Dialect::tf,
                 archguard::Dialect::codes}) {
    if (!archguard::check_expressible(*targets, d)) continue;
    const std::string spelled = archguard::format_targets(*targets, d);
    if (d != archguard::Dialect::cmake || targets->empty()) continue;
    auto again = archguard::parse_list(spelled);
    if (!again) std::abort();  // our own CMake spelling must parse
    archguard::canonicalize(*again);
    if (archguard::format_targets(*again, d) != spelled) std::abort();
  }
  return 0;
}
