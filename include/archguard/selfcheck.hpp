// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// Self-check: before its first launch, an application asks whether its own device code can
/// run on device N, and which kernels cannot, so that it can take a JIT or CPU path instead of
/// dying with error 209 ("no kernel image is available for execution on the device").
///
/// It walks the objects loaded in the process (dl_iterate_phdr: the executable and every
/// shared library), reads their .nv_fatbin and __nv_relfatbin fatbins from their files (the
/// same bytes the driver was handed) and runs the compatibility engine on each for the device.
///
/// \code
///   auto r = archguard::selfcheck::check_current_process(0);
///   if (r && !r->can_run()) use_jit_path(r->kernels_without_image());
/// \endcode

#include <archguard/compat.hpp>
#include <archguard/result.hpp>

#include <string>
#include <vector>

namespace archguard::selfcheck {

/// One loaded object that carries device code.
struct ObjectResult {
  std::string path;  ///< file of the loaded object
  Outcome outcome = Outcome::native;
  int cuda_error = 0;                              ///< predicted error when outcome == fail (209, 222, 223, 500)
  std::string reason;                              ///< the first failing fatbin's reason, "" when it runs
  std::vector<std::string> kernels_without_image;  ///< demangled names
};

struct Report {
  int device = -1;  ///< ordinal, -1 when judged for a given Device
  Device target;
  DriverSettings settings;
  std::vector<ObjectResult> objects;  ///< loaded objects with device code only
  std::vector<std::string> errors;    ///< objects whose files could not be read
  /// True when no object is predicted to fail.
  bool can_run() const;
  /// True when some object runs only through the driver's PTX JIT (first-launch delay).
  bool needs_jit() const;
  /// Every kernel predicted to fail, "object: kernel".
  std::vector<std::string> kernels_without_image() const;
};

/// Judges the current process's device code for `device` and `settings` (no driver needed).
/// `include` filters objects by path substring (empty: all).
Result<Report> check_current_process(const Device& device, const DriverSettings& settings,
                                     const std::string& include = {});

/// Judges the current process's device code for device `ordinal` of the CUDA driver: its
/// capability and Tegra flag come from the driver, the driver version from NVML or
/// /proc/driver/nvidia/version, CUDA_FORCE_PTX_JIT / CUDA_DISABLE_PTX_JIT from the environment.
/// Fails when the driver or the device is unavailable.
Result<Report> check_current_process(int ordinal = 0);

}  // namespace archguard::selfcheck
