// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// Coverage: which architectures the device code of a file covers, whether it meets a
/// requirement (`archguard verify`), and what the driver will do with it on a given device
/// (`archguard check`, the doctor, the self-check). Logic over the fatbin reader and the
/// compatibility engine (select_image); no I/O beyond decoding payloads on demand.

#include <archguard/compat.hpp>
#include <archguard/fatbin.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace archguard {

/// One translation unit as the driver sees it: a fatbin that defines kernels plus the images
/// the driver may use for it. For the fatbin nvlink wrote in an -rdc link, the PTX of
/// __nv_relfatbin is added (the driver JIT-links it, rule 8).
struct Unit {
  const ObjectFatbins* object = nullptr;
  const Fatbin* fatbin = nullptr;
  std::vector<Image> images;
  std::vector<const FatbinEntry*> entries;  ///< parallel to images
};

/// The units that decide whether an object's kernels run: every fatbin of .nv_fatbin except
/// the device-link one (rule 9); when .nv_fatbin holds none, the fatbins of __nv_relfatbin
/// (an -rdc object or archive member).
std::vector<Unit> units_of(const ObjectFatbins& object);

/// What the images of an object cover (device-link fatbins excluded).
struct CoverageSummary {
  std::vector<Arch> sass;  ///< ascending, unique
  std::vector<Arch> ptx;   ///< ascending, unique
  std::vector<Arch> ltoir;
  Version2 highest_ptx_isa;
  std::size_t fatbins = 0;  ///< deciding fatbins
  std::size_t images = 0;
};
CoverageSummary summarize(const ObjectFatbins& object);

// ---- verify ------------------------------------------------------------------------------

/// What every unit must carry.
struct Requirement {
  std::vector<Arch> sass;         ///< SASS for each (exact unless allow_compatible)
  std::vector<Arch> ptx;          ///< PTX for each (exact architecture)
  bool ptx_highest = false;       ///< PTX at or above the highest required SASS architecture
  bool allow_compatible = false;  ///< a binary-compatible lower SASS satisfies a SASS requirement
  bool strict = false;            ///< judge fatbins holding only a/f images like any other
};

/// Builds a requirement from `--require` and `--ptx`. `require` is a list in any dialect the
/// arch parser accepts ("75,80,90,120", "sm_90a", a CMake list "80-real;90"). In a CMake list
/// (any token with -real or -virtual) a bare "90" means SASS and PTX as CMake does; elsewhere
/// a bare number means SASS only. nvcc flags ("-gencode arch=compute_80,code=[sm_80,compute_80]")
/// require exactly the codes they name. `ptx`: "" (only what the list says), "none", "highest", or
/// an architecture ("90", "compute_90").
Result<Requirement> parse_requirement(std::string_view require, std::string_view ptx = {});

enum class UnitStatus {
  ok,              ///< every requirement met exactly
  compatible,      ///< met, using binary-compatible lower SASS (allow_compatible)
  specific_extra,  ///< holds only a/f images: an architecture-specific extra, not judged
  missing,         ///< a requirement is not met
};
std::string_view to_string(UnitStatus s);

struct UnitFinding {
  std::string object;          ///< display path of the object
  std::size_t fatbin = 0;      ///< index among the object's fatbins
  FatbinSection section = FatbinSection::nv_fatbin;
  std::string identifier;      ///< "" when the fatbin has none
  UnitStatus status = UnitStatus::ok;
  std::vector<Arch> found_sass, found_ptx;
  std::vector<Arch> missing_sass;
  std::vector<std::pair<Arch, Arch>> compatible;  ///< {required, lower SASS accepted instead}
  std::vector<Arch> missing_ptx;                  ///< exact PTX requirements not met
  bool missing_ptx_highest = false;
  std::string message;  ///< one line naming the object, the fatbin and what it lacks; "" when ok
};

struct VerifyReport {
  std::vector<UnitFinding> units;
  std::size_t objects = 0;  ///< objects with at least one unit
  bool passed() const;
};

VerifyReport verify(std::span<const ObjectFatbins> objects, const Requirement& requirement);

// ---- check -------------------------------------------------------------------------------

struct UnitVerdict {
  std::string object;
  std::size_t fatbin = 0;
  FatbinSection section = FatbinSection::nv_fatbin;
  std::string identifier;
  std::vector<Image> images;
  Verdict verdict;
};

struct ObjectVerdict {
  std::string object;
  Outcome outcome = Outcome::native;  ///< the worst over the units (fail > jit > native)
  int cuda_error = 0;                 ///< of the first failing unit
  std::vector<UnitVerdict> units;
  bool has_device_code() const { return !units.empty(); }
};

/// The compatibility engine on every unit of an object.
ObjectVerdict check_object(const ObjectFatbins& object, const Device& device,
                           const DriverSettings& settings = {});

/// The kernels of a fatbin, from its first image that decodes (SASS preferred). `name`
/// names the file in messages.
Result<std::vector<Kernel>> kernels_of(const Fatbin& fatbin, std::string_view name);

struct KernelFinding {
  std::string object;
  std::size_t fatbin = 0;
  Kernel kernel;
  Verdict verdict;
};

/// For the doctor and the self-check: the kernels that have no usable image on the device
/// (the kernels of every failing unit). Decodes payloads of failing units only.
Result<std::vector<KernelFinding>> kernels_without_image(const ObjectFatbins& object,
                                                         const ObjectVerdict& verdict);

/// One GPU model of a fleet.
struct FleetModel {
  std::string name;  ///< "NVIDIA H100 80GB HBM3"
  Version2 cc;
  std::size_t count = 0;  ///< rows seen
};

/// Parses what `nvidia-smi --query-gpu=name,compute_cap --format=csv` prints, concatenated
/// from many nodes (headers repeated, blank lines, "noheader" output all accepted). Models
/// keep their first-seen order. `name` names the file in messages (line numbers are given).
Result<std::vector<FleetModel>> parse_fleet_csv(std::string_view text, std::string_view name);

}  // namespace archguard
