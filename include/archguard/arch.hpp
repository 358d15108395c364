// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// Architectures: the table queries, and the tokens users write in every dialect
/// (CMake, nvcc, PyTorch, TensorFlow, bare capabilities). No I/O, no CUDA.

#include <archguard/result.hpp>
#include <archguard/table_types.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace archguard {

/// Suffix variant of a target: plain, arch-specific 'a' or family-specific 'f'.
enum class Suffix : std::uint8_t { none,
                                   a,
                                   f };

/// An architecture with its suffix, e.g. {90, a} for sm_90a / compute_90a.
struct Arch {
  unsigned sm = 0;
  Suffix suffix = Suffix::none;
  friend constexpr bool operator==(const Arch&, const Arch&) = default;
  friend constexpr auto operator<=>(const Arch&, const Arch&) = default;
};

/// What an image or a build target holds.
enum class CodeKind : std::uint8_t { sass,
                                     ptx,
                                     ltoir };

/// One build target: SASS, PTX or LTO-IR for one architecture.
struct Target {
  Arch arch;
  CodeKind kind = CodeKind::sass;
  friend constexpr bool operator==(const Target&, const Target&) = default;
  friend constexpr auto operator<=>(const Target&, const Target&) = default;
};

/// A driver version such as 580.65.06 (patch 0 when absent). `components` says how many
/// numbers were given (580.65: 2); ordering and equality look at the three numbers only, use
/// driver_at_least() to compare a version a user typed with a requirement.
struct DriverVersion {
  unsigned major = 0, minor = 0, patch = 0;
  unsigned components = 3;
  friend constexpr bool operator==(const DriverVersion& a, const DriverVersion& b) {
    return a.major == b.major && a.minor == b.minor && a.patch == b.patch;
  }
  friend constexpr auto operator<=>(const DriverVersion& a, const DriverVersion& b) {
    if (auto c = a.major <=> b.major; c != 0) return c;
    if (auto c = a.minor <=> b.minor; c != 0) return c;
    return a.patch <=> b.patch;
  }
};

/// Whether `given` meets `required`, comparing on the components `given` has: a driver given as
/// 580.65 meets 580.65.06 (the user did not say which patch), 580 meets 580.95.05, 575 does not.
constexpr bool driver_at_least(DriverVersion given, DriverVersion required) {
  if (given.major != required.major || given.components < 2) return given.major >= required.major;
  if (given.minor != required.minor || given.components < 3) return given.minor >= required.minor;
  return given.patch >= required.patch;
}

/// The dialects users write targets in.
enum class Dialect : std::uint8_t {
  cmake,  ///< 90, 90-real, 90-virtual, 90a-real, 100f
  nvcc,   ///< sm_90a, compute_120f, -gencode arch=compute_80,code=[sm_80,compute_80], -arch=sm_86
  torch,  ///< 8.6, 9.0a, 12.0+PTX, Hopper
  tf,     ///< compute_86, 8.6
  codes,  ///< sm_80;compute_80;lto_80: every code by its nvcc name, nothing lost (output only,
          ///< for tools: the CMake module reads nvcc flag syntax back this way)
};

// ---- table queries ---------------------------------------------------------------------

/// All rows of the architecture table, in ascending SM order.
std::span<const ArchRow> arch_rows();
/// All CUDA releases, ascending.
std::span<const ReleaseRow> release_rows();
/// Renames (sm_101 -> sm_110 in CUDA 13.0).
std::span<const RenameRow> rename_rows();
/// The row for an SM number, or nullptr.
const ArchRow* find_arch(unsigned sm);
/// The row for a CUDA release, or nullptr.
const ReleaseRow* find_release(Version2 cuda);
/// Whether a CUDA release's nvcc accepts a target per the table (suffix included).
bool supported_by_release(Arch arch, Version2 cuda);
/// Like supported_by_release, with the reason when not: unknown architecture, not yet (the
/// release that added it or its suffix), removed (and in which release), or renamed (sm_101 ->
/// sm_110 in CUDA 13.0). A CUDA release missing from the table is judged by the arch columns.
Status check_release_support(Target target, Version2 cuda);
/// Highest PTX ISA a driver accepts (the ISA of the newest release whose minimum driver it
/// meets); empty when older than every recorded release.
Version2 ptx_isa_for_driver(DriverVersion driver);
/// The minimum Linux driver for a PTX ISA version (that of the oldest release whose ISA is at
/// least `ptx_isa`), or "" when unknown: that release's driver is not recorded, or the ISA is
/// newer than every release in the table (newest_known_ptx_isa()).
std::string min_driver_for_ptx_isa(Version2 ptx_isa);
/// Whether `arch` is missing from the table (no row for its SM). nvcc is the authority on what
/// it can build, so such an arch (one a newer nvcc lists) is accepted everywhere and inferred
/// conservatively: sm_XY is CC X.Y; its SASS runs on exactly that CC (whether it is a Tegra part
/// is unknown); its PTX is JIT-compiled on CC >= X.Y; an 'a' or 'f' variant runs on exactly that
/// CC (the family is unknown). Callers warn once per arch with inferred_arch_note().
bool arch_inferred(Arch arch);
/// The warning for an inferred arch: what is assumed, the nearest rows, and how to add the row,
/// e.g. "sm_107 is not in the architecture table: assuming CC 10.7 ...".
std::string inferred_arch_note(Arch arch);
/// The newest PTX ISA of any release in the table. A PTX ISA newer than this one belongs to a
/// release the table does not know: its minimum driver is unknown (min_driver_for_ptx_isa
/// gives ""), and no recorded driver can be shown to accept it.
Version2 newest_known_ptx_isa();
/// The compute capability of a GPU named as a scheduler or a node label names it ("a100",
/// "tesla_t4", "NVIDIA-H100-80GB-HBM3", "rtx5090", "nvidia_a100-sxm4-80gb"), by the product names
/// of the architecture table: the name's words (letters and digits; "nvidia", "tesla", "geforce"
/// and "quadro" are ignored) must hold a product's words in a row, or run them together. The
/// longest product wins; no product, or two of different capabilities as long, gives nullopt.
/// `product` receives the product matched.
std::optional<Version2> cc_for_gpu_name(std::string_view name, std::string* product = nullptr);
/// The rename row whose old SM is `sm` (101 -> 110 in CUDA 13.0), or nullptr.
const RenameRow* find_rename(unsigned old_sm);
/// The compute capability an SM number denotes: 90 -> 9.0, 121 -> 12.1.
constexpr Version2 cc_of_sm(unsigned sm) { return Version2{sm / 10, sm % 10}; }
/// Whether the table knows `arch` with its suffix (the 'a'/'f' variant exists at all).
bool arch_exists(Arch arch);
/// Every valid target number of one CC major, plain and suffixed, ascending:
/// 8 -> 80, 86, 87, 88, 89; 9 -> 90, 90a.
std::vector<Arch> arches_of_major(unsigned major);
/// The 'f' family of an arch (the table's family column, e.g. 103 -> 100), 0 when none.
unsigned family_of(unsigned sm);
/// A table codename for display: "" when the table has none.
std::string_view codename_of(const ArchRow& row);

// ---- tokens ----------------------------------------------------------------------------

/// Parses "580.65.06" / "580.65" / "580".
Result<DriverVersion> parse_driver_version(std::string_view text);
std::string format_driver_version(DriverVersion v);

/// Parses one token in any dialect (the dialect is recognised from the spelling) into the
/// targets it denotes: "90" is SASS + PTX in CMake, "8.6" is SASS in PyTorch, "12.0+PTX"
/// adds PTX, "Hopper" expands to the family's capabilities, a -gencode clause lists its codes.
/// Unknown or impossible tokens ("86a", "sm_86a", "91") give an error saying why and listing
/// the valid neighbours.
Result<std::vector<Target>> parse_token(std::string_view token);
/// Parses a list: separators ';', ',', whitespace; nvcc flags may span several words.
Result<std::vector<Target>> parse_list(std::string_view text);

/// Parses a dialect name: "cmake", "gencode" or "nvcc", "torch", "tf", "codes".
Result<Dialect> parse_dialect(std::string_view name);
/// Sorts and removes duplicates (the canonical order of a target set).
void canonicalize(std::vector<Target>& targets);

/// "sm_90a", "compute_120f", "lto_80".
std::string nvcc_name(Arch arch, CodeKind kind);
/// "90a" (no -real/-virtual).
std::string arch_number(Arch arch);
/// Formats a target set in a dialect: CMake list "80-real;90", gencode flags, a torch arch
/// list "8.0;9.0+PTX", TensorFlow "sm_80,compute_90". A set the dialect cannot spell exactly
/// (see check_expressible) is written as the nearest superset it can.
std::string format_targets(std::span<const Target> targets, Dialect dialect);
/// Whether a dialect can spell the set exactly: PyTorch has no PTX without SASS, neither
/// PyTorch nor TensorFlow nor CMake's architecture list has LTO-IR.
Status check_expressible(std::span<const Target> targets, Dialect dialect);
/// `arch normalize` of both tools (archguard, archguard-verify): `text` parsed as one list and
/// written in the dialect named `format`, or the error (unknown format, bad token, a set the
/// dialect cannot spell).
Result<std::string> normalize_list(std::string_view text, std::string_view format);

}  // namespace archguard
