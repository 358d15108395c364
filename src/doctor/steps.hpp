// SPDX-License-Identifier: Apache-2.0
#pragma once
// The steps of run(), one per file. Internal to src/doctor.

#include <archguard/container.hpp>
#include <archguard/coverage.hpp>
#include <archguard/device.hpp>
#include <archguard/doctor.hpp>

#include "doctor/probes.hpp"

#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace archguard::doctor::detail {

/// What one FILE (or the ELF files under a directory, the first 4096) needs of the CUDA runtime,
/// from their dynamic sections.
struct RuntimeNeeds {
  std::string note;           ///< " (first 4096 files)" when a directory held more
  std::set<unsigned> majors;  ///< N of each libcudart.so.N needed
  std::size_t elf_files = 0, device_code = 0, statically = 0;
  std::string first_error;  ///< FILE itself could not be read
};
/// What `file` (or the ELF files under a directory) needs of the CUDA runtime; what was read of
/// each file of a directory is kept in `results` (when given) and taken from it while the file's
/// identity holds.
/// With `walk` (of `file`), the directory is listed by that shared walk.
RuntimeNeeds read_runtime_needs(const std::string& file, FactsStore* results = nullptr, SharedWalk* walk = nullptr);

/// Every object's verdict and judgement of a FILE, per target (step 3).
struct Judgements {
  std::vector<std::vector<ObjectVerdict>> verdicts;
  std::vector<std::vector<ObjectJudgement>> judgements;
};

/// The first FILE, read in the background while step 1 loads the driver (cuInit takes a
/// quarter of a second on an idle H100 host, seconds on some multi-GPU nodes). Where the last
/// run kept which GPUs and driver it judged for (the results cache), the FILE's objects are
/// judged for those too, meanwhile; step 3 takes these judgements only when step 1 finds the
/// same GPUs and driver, and judges again otherwise.
struct FirstFile {
  std::optional<Result<ScanReport>> read;
  std::vector<JudgedObject> judged;             ///< of the read, when judged in advance
  std::vector<const ObjectFatbins*> with_code;  ///< those of `judged` with units
  std::vector<PackageMember> members;           ///< of with_code, no judgement yet
  std::vector<Device> devices;                  ///< what they were judged for
  DriverSettings settings;
  std::optional<Judgements> judgements;
};
/// Reads `file` and, when the last run's GPUs are known, judges it for them (see FirstFile).
std::unique_ptr<FirstFile> read_first_file(const Options& options, const std::string& file, const EnvLookup& env,
                                           SharedWalk* walk = nullptr);

/// What the steps share: the driver (when it opened) and the second opinions.
struct Session {
  const Options* options = nullptr;
  EnvLookup env;
  device::DriverPtr driver;  ///< null without a driver
  /// The driver being opened (dlopen and cuInit) from the start of run(), alongside the probes
  /// of nvidia-smi and NVML; step 1 takes it. Not valid: step 1 opens the driver itself.
  std::future<Result<device::DriverPtr>> driver_opening;
  ProbeResult smi;
  ProbeResult nvml;
  ToolVersion nvcc;
  ToolVersion nvrtc;
  ToolVersion cudart;
  /// The walk of the first FILE (a directory) that both background readers share; declared
  /// before them, so that it outlives their tasks.
  std::shared_ptr<SharedWalk> walk;
  /// The first FILE, read in the background while step 1 loads the driver (cuInit takes
  /// seconds on some multi-GPU nodes); step 3 takes it instead of reading the file again.
  std::future<std::unique_ptr<FirstFile>> first_file;
  /// What each FILE needs of the CUDA runtime (read_runtime_needs), in the order of the FILEs,
  /// read in the background from the start of run() as well; step 2 takes them.
  std::future<std::vector<RuntimeNeeds>> runtime_needs;
};

/// How step 3 reads each FILE (the results cache of the options).
Result<ScanReport> read_file(const Options& options, const std::string& file, SharedWalk* walk = nullptr);

/// Whether what step 3 read is left to the process's exit: the caller exits after the report
/// and no smoke test follows (with one, it is freed first, to keep doctor's peak down).
inline bool left_to_exit(const Options& options) { return options.leave_to_exit && !options.smoke; }
/// Keeps `kept` until the process ends: it is never destroyed (Options::leave_to_exit).
void keep_until_exit(std::shared_ptr<void> kept);
template <class T>
void leave_to_exit(T&& value) {
  keep_until_exit(std::make_shared<std::decay_t<T>>(std::forward<T>(value)));
}

/// Loads the driver library (empty: $ARCHGUARD_LIBCUDA, else libcuda.so.1) and calls cuInit.
Result<device::DriverPtr> open_driver(const std::string& library);
/// Step 1. Fills report.devices, driver_found, driver_problem, driver_cuda.
Step step_devices(Session& session, Report& report);
/// Step 2. Fills report.driver_version.
Step step_versions(Session& session, Report& report);
/// Step 3.
Step step_binaries(Session& session, Report& report);
/// Step 5. Fills report.timings.
Step step_smoke(Session& session, Report& report);
/// The final verdict from the findings.
std::vector<Fix> collect_fixes(const Report& report);

/// The environment variables that change what the driver loads: a failure they cause is
/// theirs, not the driver's.
struct JitEnv {
  bool force = false;    ///< CUDA_FORCE_PTX_JIT set (not "0")
  bool disable = false;  ///< CUDA_DISABLE_PTX_JIT set (not "0")
};
/// The fix for a failed load or launch of the smoke fatbin (every SASS of the toolkit plus the
/// oldest and the newest PTX), attributed to what caused it (CUresult `code`).
std::string smoke_fix(int code, const JitEnv& env);
/// smoke_fix's text with its kind.
Fix smoke_remedy(int code, const JitEnv& env);

/// The embedded smoke-test fatbin (empty when built without nvcc) and the targets it holds.
std::span<const std::byte> smoke_fatbin();
std::string_view smoke_fatbin_targets();

}  // namespace archguard::doctor::detail
