// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// The compatibility engine: given the images of one fatbin (or of one kernel), a device and
/// the driver settings, which image the CUDA driver will load, or the exact failure.
/// Pure logic over the architecture table: no I/O, no CUDA.

#include <archguard/arch.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace archguard {

/// One image as the driver sees it.
struct Image {
  CodeKind kind = CodeKind::sass;
  Arch arch;
  Version2 ptx_isa;          ///< PTX only: the .version of the PTX
  bool relocatable = false;  ///< came from __nv_relfatbin (-rdc): the driver JIT-links its PTX
  bool device_link = false;  ///< part of the device-link fatbin: decides nothing (rule 9)
};

/// The GPU a binary should run on.
struct Device {
  Version2 cc;         ///< compute capability, e.g. {9, 0}
  bool tegra = false;  ///< integrated part; defaults from the table when the CC is known
};

/// Driver state that changes the outcome.
struct DriverSettings {
  std::optional<DriverVersion> driver;  ///< unknown: PTX ISA is not limited
  bool force_ptx_jit = false;           ///< CUDA_FORCE_PTX_JIT=1
  bool disable_ptx_jit = false;         ///< CUDA_DISABLE_PTX_JIT=1
};

enum class Outcome {
  native,  ///< a SASS image loads as is
  jit,     ///< the driver JIT-compiles a PTX image (first-launch delay)
  fail,    ///< no usable image
};

/// CUDA error numbers the engine predicts.
inline constexpr int kErrNoKernelImage = 209;   ///< cudaErrorNoKernelImageForDevice
inline constexpr int kErrUnsupportedPtx = 222;  ///< cudaErrorUnsupportedPtxVersion
inline constexpr int kErrJitDisabled = 223;     ///< cudaErrorJitCompilationDisabled
inline constexpr int kErrSymbolNotFound = 500;  ///< cudaErrorSymbolNotFound (-rdc, rule 8)
inline constexpr int kErrInvalidImage = 200;    ///< cudaErrorInvalidKernelImage (an image that does not decode)

struct Verdict {
  Outcome outcome = Outcome::fail;
  int cuda_error = 0;                ///< 0 unless outcome == fail
  std::optional<std::size_t> image;  ///< index into the input of the image used
  std::string reason;                ///< one sentence, lower case, e.g. "jit of compute_80 (ptx isa 9.0)"
};

/// Whether SASS for `arch` runs on `device` (rules 1, 3, 4).
bool sass_runs_on(Arch arch, const Device& device);
/// Whether PTX for `arch` can be JIT-compiled for `device`, ignoring the driver (rules 2-4).
bool ptx_targets(Arch arch, const Device& device);
/// The driver's choice among `images` (rule 5 preference order), or the failure.
Verdict select_image(std::span<const Image> images, const Device& device,
                     const DriverSettings& settings = {});
/// A device for a capability, Tegra flag taken from the table.
Device device_for_cc(Version2 cc);

/// The capabilities in the table on which `target` loads: SASS natively (rules 1, 3, 4), PTX by
/// JIT (rules 2-4); empty for LTO-IR, which never loads directly.
std::vector<Version2> loads_on(Target target);
/// One plain-words sentence about a target, generated from the table, e.g. for sm_100a:
/// "sass for cc 10.0 only (B200, GB200); does not run on cc 10.3 (B300, GB300); use 100f to
/// cover the family".
std::string explain_target(Target target);

}  // namespace archguard
