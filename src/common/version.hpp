// SPDX-License-Identifier: Apache-2.0
#pragma once
// Two-number versions (compute capabilities, CUDA releases, PTX ISA versions) as text, and
// compute capabilities read back from text. Internal to the library (src/common); the public
// archguard::parse_cc (archguard/doctor.hpp) is this function.
#include <archguard/table_types.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace archguard::common {

/// "9.0", "12.1", "13.0": major, a dot, minor, both in decimal.
std::string version_text(Version2 v);

/// A compute capability as nvidia-smi, NVML and users write it: "9.0", " 12.1 " (surrounding
/// white space ignored). Major 1..99, minor one digit 0..9 (a CC's minor never has two; "8.10"
/// is refused rather than read as 8.1). Nothing when the text is not exactly that.
std::optional<Version2> parse_cc(std::string_view text);

}  // namespace archguard::common
