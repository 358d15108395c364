// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// `archguard doctor`: the five-step diagnosis of "no kernel image is available for execution
/// on the device", as a library. Each step returns findings (pass / warn / fail / skip) with a
/// concrete fix; the report ends with the fixes that apply. The library never prints: the
/// `doctor` verb renders a Report as a table or as JSON.
///
///   1. devices      driver (dlopen libcuda.so.1), devices, capability, Tegra flag, cross-checked
///                   against nvidia-smi and NVML; CUDA_VISIBLE_DEVICES hiding every GPU
///   2. versions     driver version and the CUDA version it supports, the newest PTX ISA it
///                   accepts, nvcc and NVRTC versions, the CUDA runtime each FILE needs
///   3. binaries     for each FILE, the verdict on every visible device and the fatbins/kernels
///                   with no usable image; a note (pass) on each FILE that loads code at run
///                   time (dlopen, cuModuleLoad*, NVRTC, Python), which only `archguard run` sees
///   4. environment  CUDA_DISABLE_PTX_JIT, CUDA_FORCE_PTX_JIT, CUDA_CACHE_*, CUDA_MODULE_LOADING,
///                   CUDA_LAUNCH_BLOCKING, CUDA_VISIBLE_DEVICES
///   5. smoke test   kernels from an embedded fatbin (every supported arch + PTX) really run,
///                   synchronise and match a CPU reference; first-launch times
///
/// Steps 2 to 4 need no driver; without one, run() still performs them and says so.

#include <archguard/fatbin.hpp>
#include <archguard/arch.hpp>
#include <archguard/compat.hpp>
#include <archguard/result.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace archguard::doctor {

enum class Level : std::uint8_t { pass,
                                  warn,
                                  fail,
                                  skip };
/// "pass", "warn", "fail", "skip".
std::string_view to_string(Level level);
/// The worse of two statuses (fail > warn > pass > skip).
Level worst(Level a, Level b);

/// A kind of fix, so that tools can act on it. Set where the fix is written; the verdict orders
/// and groups the fixes by it, never by their words.
enum class FixKind : std::uint8_t { rebuild,
                                    driver,
                                    environment,
                                    other };
std::string_view to_string(FixKind kind);

/// One observation of a step.
struct Finding {
  Level status = Level::pass;
  std::string subject;                ///< what was looked at: "device 0", "CUDA_CACHE_PATH", "libfoo.so"
  std::string message;                ///< what was found, one line, lower case
  std::string fix;                    ///< the concrete remedy; empty when nothing needs fixing
  FixKind fix_kind = FixKind::other;  ///< what kind of remedy `fix` is, set where the fix is written
  Version2 cc{};                      ///< step 3: the compute capability the finding judges (empty elsewhere)
};

struct Step {
  int number = 0;    ///< 1..5
  std::string name;  ///< "devices", "versions", "binaries", "environment", "smoke test"
  std::vector<Finding> findings;
  double elapsed_ms = 0;  ///< time this step took
  /// The worst status among the findings (skip when there are none).
  Level status() const;
};

/// A device as the doctor saw it, with the cross-checks.
struct DeviceFacts {
  int ordinal = 0;
  std::string name;
  Version2 cc;
  bool tegra = false;  ///< integrated part (driver's INTEGRATED attribute or the table)
  std::string pci_bus_id;
  std::optional<Version2> smi_cc;   ///< nvidia-smi --query-gpu=compute_cap, when it answered
  std::optional<Version2> nvml_cc;  ///< NVML, when libnvidia-ml.so.1 loaded
  std::string uuid;                 ///< "GPU-5a1c..." (the driver's cuDeviceGetUuid), "" unknown
  std::string mig_mode;             ///< NVML's current MIG mode: "enabled", "disabled", "" unknown
};

/// A CUDA compiler or runtime found on the machine (step 2).
struct RuntimeFound {
  std::string name;  ///< "nvcc", "nvrtc", "cudart"
  Version2 version;
  std::string where;
};

/// One remedy of the final verdict.
struct Fix {
  FixKind kind = FixKind::other;
  std::string text;                  ///< what to do, one line
  std::vector<std::string> details;  ///< e.g. the same targets in CMake, nvcc and PyTorch form
};

/// Measured by the smoke test (step 5), per device.
struct SmokeTiming {
  int ordinal = 0;
  double module_load_ms = 0;    ///< cuModuleLoadDataEx of the embedded fatbin
  double first_launch_ms = 0;   ///< first launch + synchronise (includes any lazy load / JIT)
  double second_launch_ms = 0;  ///< the same launch again (warm)
  std::string image;            ///< which image ran: "sm_90", "compute_120 (jit)"
  double matmul_gflops = 0;     ///< tensor-core path when CC >= 8.0, else plain
};

/// What an ELF executable or shared library loads at run time, which no look at its bytes can
/// judge: device code from dlopen()ed libraries, cuModuleLoad* / cuLibraryLoad* images, NVRTC
/// output, a Python interpreter's extension modules. `archguard run` watches such a program.
struct RuntimeLoading {
  std::string path;
  bool elf = false;  ///< an ELF executable or shared library (else nothing to say)
  /// The loaders it imports (undefined dynamic symbols), in the order of kRuntimeLoaders:
  /// "cuModuleLoadData", "nvrtcCompileProgram", "dlopen"...
  std::vector<std::string> imports;
  std::vector<std::string> nvrtc;  ///< its DT_NEEDED libnvrtc.so.* entries
  /// It carries the static CUDA runtime (nvcc's fatbin sections or cudart's symbols, and no
  /// libcudart.so in DT_NEEDED) or is libcudart.so: that runtime dlopen()s libcuda.so.1, so
  /// importing dlopen or dlmopen is then no reason by itself (every nvcc-built program does).
  bool cuda_runtime = false;
  /// Why it is a Python interpreter ("named python3.11", "needs libpython3.11.so.1.0",
  /// "exports Py_BytesMain"); empty when it is not one.
  std::string python;
  /// One phrase per cause, in the finding's words ("is a python interpreter (exports
  /// Py_BytesMain)", "imports cuModuleLoadData and dlopen", "needs libnvrtc.so.12"); empty when
  /// it loads nothing at run time that its dynamic section shows.
  std::vector<std::string> reasons;
  bool loads_at_run_time() const { return !reasons.empty(); }
};

/// The imported functions that load code at run time, device-code loaders first.
inline constexpr std::string_view kRuntimeLoaders[] = {
    "cuModuleLoad", "cuModuleLoadData", "cuModuleLoadDataEx", "cuModuleLoadFatBinary",
    "cuLibraryLoadData", "cuLibraryLoadFromFile", "cudaLibraryLoadData", "cudaLibraryLoadFromFile",
    "nvrtcCompileProgram", "dlopen", "dlmopen"};

struct Report {
  std::string node;                    ///< the node's name: Options::node, else $SLURMD_NODENAME, else the host name
  std::string time;                    ///< when the report was made, UTC, ISO 8601 ("2026-12-02T04:30:00Z")
  std::vector<RuntimeFound> runtimes;  ///< nvcc, nvrtc and libcudart found (step 2)
  bool driver_found = false;
  std::string driver_problem;                   ///< why not, when !driver_found
  std::optional<DriverVersion> driver_version;  ///< 580.159.04 (NVML, /proc or nvidia-smi)
  std::optional<Version2> driver_cuda;          ///< cuDriverGetVersion, e.g. 13.0
  std::vector<DeviceFacts> devices;
  std::vector<Version2> assumed_cc;  ///< Options::assume_cc, judged in step 3 as well
  std::vector<Step> steps;
  std::vector<SmokeTiming> timings;
  std::vector<Fix> fixes;  ///< the final verdict, most important first
  /// Step 3: the FILEs that load code at run time (reasons not empty), in FILE order. They
  /// change no status: what they load is simply not judged, and `archguard run` can watch it.
  std::vector<RuntimeLoading> runtime_loading;
  double elapsed_ms = 0;
  /// The worst status over every step.
  Level overall() const;
};

/// Reads one environment variable; nullopt when unset (an empty value is set).
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;
/// The process environment (getenv).
EnvLookup process_environment();

struct Options {
  std::vector<std::string> files;  ///< binaries, libraries, wheels, directories to examine
  /// Kernel lists decoded by earlier runs (archguard/results_cache.hpp); null: decode everything.
  FactsStore* results = nullptr;
  std::string node;                           ///< the node's name in the report; empty: $SLURMD_NODENAME, else the host name
  bool smoke = true;                          ///< run step 5 when a driver is present
  EnvLookup env;                              ///< empty: the process environment
  std::string libcuda;                        ///< empty: $ARCHGUARD_LIBCUDA, else libcuda.so.1
  std::string libnvml = "libnvidia-ml.so.1";  ///< empty: skip the NVML cross-check
  std::string nvidia_smi = "nvidia-smi";      ///< empty: skip the nvidia-smi cross-check
  std::string nvcc;                           ///< empty: nvcc on PATH, else /usr/local/cuda/bin/nvcc
  /// Step 3 also judges the FILEs for these capabilities (a GPU they must run on that this
  /// machine does not have; no driver needed).
  std::vector<Version2> assume_cc;
  /// Step 3 also judges the shared libraries an executable or library FILE loads, found as
  /// ld.so finds them (deps.hpp); directories and wheels are judged file by file.
  bool deps = true;
  /// The caller ends its process after the report (the CLI does). Then, when no smoke test
  /// follows step 3, what step 3 read (the objects, their judgements, the walk of a directory)
  /// is left to the process's exit instead of being freed block by block, which took tens of
  /// milliseconds after a cache hit on a site-packages. A caller that runs doctor again and
  /// again leaves it off: that memory is never given back.
  bool leave_to_exit = false;
};

/// Runs every step. Never fails as a whole: problems become findings.
Report run(const Options& options);

// ---- individual steps and helpers (exposed for tests and for other tools) ----------------

/// Step 4 over an environment.
Step check_environment(const EnvLookup& env);

/// What an ELF file needs of the CUDA runtime (step 2).
struct RuntimeNeed {
  std::string path;
  bool elf = false;                      ///< false: not an ELF file (nothing to say)
  std::vector<std::string> needed;       ///< every DT_NEEDED entry
  std::optional<unsigned> cudart_major;  ///< N of libcudart.so.N when needed
  bool has_device_code = false;          ///< has .nv_fatbin or __nv_relfatbin
  bool needs_libcuda = false;            ///< DT_NEEDED libcuda.so.1 (driver API directly)
};
/// Reads the dynamic section of an ELF file (bounds-checked). Not an ELF file: elf = false.
Result<RuntimeNeed> runtime_need(const std::string& path);

/// Reads the dynamic symbol table and DT_NEEDED of an ELF file (bounds-checked) for what it
/// loads at run time; `path`'s file name tells a Python interpreter too. Not an ELF executable
/// or shared library: elf = false. Unreadable or malformed: the error.
Result<RuntimeLoading> runtime_loading(const std::string& path);
/// The command that watches `file` as it runs: "archguard run -- FILE [its arguments]".
std::string run_command(std::string_view file);

/// The targets that make a binary run natively on `cc` and stay future proof: SASS for the
/// device's architecture plus PTX of it.
std::vector<Target> targets_for(Version2 cc);
/// The rebuild fix for `cc` in every form users type (CMake, nvcc -gencode, TORCH_CUDA_ARCH_LIST).
Fix rebuild_fix(Version2 cc, std::string_view why);

/// Parses "9.0" (nvidia-smi's compute_cap column).
std::optional<Version2> parse_cc(std::string_view text);
/// Parses the first "NVRM version: ... Kernel Module  580.159.04 ..." style line of
/// /proc/driver/nvidia/version.
std::optional<DriverVersion> parse_proc_driver_version(std::string_view text);

}  // namespace archguard::doctor
