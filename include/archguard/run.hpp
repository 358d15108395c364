// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// `archguard run`: what a real process did with its device code, observed through CUDA's
/// injection mechanism and CUPTI's callbacks, and each failure explained by the same engine as
/// `archguard check` (coverage.hpp, compat.hpp) with the fixes of the doctor.
///
///   recorder (in the watched process)  ->  event files (one per process, JSON lines)
///   read_recording()                   ->  Recording (what happened, no judgement)
///   analyze()                          ->  Report (which kernel failed, from which file and
///                                          translation unit, why, and what to change)
///
/// The recorder runs inside somebody else's program: it never throws, prints or changes what
/// the program does (docs/run.md). The analysis runs afterwards, in `archguard run` or in the
/// application that installed the recorder with start_recording().

#include <archguard/arch.hpp>
#include <archguard/compat.hpp>
#include <archguard/doctor.hpp>
#include <archguard/result.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace archguard::run {

// ---- the recording ------------------------------------------------------------------------

/// Where some bytes the driver was handed came from.
struct Origin {
  /// "mapped": inside a file mapping of the process (path, offset in the file);
  /// "file": a path given to cuModuleLoad / cuLibraryLoadFromFile;
  /// "memory": process memory that belongs to no file (copy names the copy, when made);
  /// "" when nothing is known.
  std::string kind;
  std::string path;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;  ///< the image's size as its header gives it; 0 unknown
  std::string image_kind;  ///< "fatbin", "wrapper", "elf", "text", "ltoir", "unknown", "unreadable"
  std::string copy;        ///< file (in the recording's directory) holding the bytes; "" none
  std::string copy_note;   ///< why no copy was made
  std::string address;     ///< "0x..." in the process
};

struct DeviceSeen {
  int ordinal = -1;
  Version2 cc;
  bool integrated = false;
  std::string name;
  int driver_cuda = 0;  ///< cuDriverGetVersion, e.g. 13000
};

/// A driver call that loads code (cuModuleLoad*, cuLibraryLoad*).
struct LoadEvent {
  std::string api;
  int result = 0;
  double ms = 0;         ///< wall time of the call (a PTX JIT happens inside it)
  std::string inside;    ///< the runtime call it was made from, "" for the program's own
  std::string handle;    ///< the CUmodule / CUlibrary made, "0x0" on failure
  unsigned modules = 0;  ///< modules the driver reported loaded inside the call
  Origin origin;
  int device = -1;
};

/// A failed call that makes a kernel unusable (a launch, a lookup by name).
struct FailEvent {
  std::string api;
  bool runtime = false;  ///< runtime API (cuda*), else driver API (cu*)
  int result = 0;
  std::uint64_t key = 0;
  std::uint64_t count = 1;  ///< identical failures (same call, error and kernel)
  std::string inside;       ///< driver call made by this runtime call
  std::string kernel;       ///< the name the call gave or the driver knew ("" when unknown)
  std::string owner;        ///< the module / library of a lookup
  std::string function;     ///< CUfunction of a driver launch
  std::string module;       ///< its module, from the driver
  Origin func;              ///< a runtime launch: where the host function lies
  int device = -1;
};

/// A module the driver loaded (CUPTI's resource callback), eagerly or lazily.
struct ModuleEvent {
  unsigned id = 0;
  std::uint64_t size = 0;
  std::optional<std::uint32_t> elf_flags;
  std::optional<unsigned> elf_abi;
  std::string during;  ///< the call that caused it
  Origin func;         ///< that call's host function, when a runtime launch
  std::string function;
  std::string copy;  ///< with --predict: a copy of the cubin
};

/// A launch that loaded modules first (lazy loading, or a JIT on first use).
struct LazyEvent {
  std::string api;
  double ms = 0;
  unsigned modules = 0;
  Origin func;
  std::string kernel;
  int device = -1;
};

/// With --predict: one distinct kernel the process launched successfully.
struct LaunchedEvent {
  Origin func;         ///< runtime: the host function
  std::string kernel;  ///< driver: the name
  std::string module;
};

struct ProcessRecording {
  std::string file;  ///< the event file
  long pid = 0, ppid = 0;
  std::string origin;  ///< "injection", "api", "fork"
  std::string exe;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  ///< the CUDA_* variables that were set
  std::string driver_version_line;         ///< /proc/driver/nvidia/version, first line
  std::string recorder_status;             ///< "ok", "unavailable", "" (no line: the recorder died early)
  std::string recorder_detail;
  std::string cupti;
  bool predict = false;
  std::vector<DeviceSeen> devices;
  std::vector<LoadEvent> loads;
  std::vector<FailEvent> failures;
  std::vector<ModuleEvent> modules;
  std::vector<LazyEvent> lazy;
  std::vector<LaunchedEvent> launched;
  bool complete = false;  ///< the closing line was written (the process exited normally)
  std::uint64_t launches = 0, failed_launches = 0, module_loads = 0, modules_loaded = 0, lines_dropped = 0,
                launched_overflow = 0;
  std::vector<std::string> problems;  ///< lines that could not be read (file, line, why)
};

struct Recording {
  std::string dir;
  std::vector<ProcessRecording> processes;  ///< by pid
};

/// Reads one event file's text. `name` names it in messages; bad lines become problems.
ProcessRecording parse_events(std::string_view text, const std::string& name);
/// Reads every p<pid>.events file of a recording directory.
Result<Recording> read_recording(const std::string& dir);

// ---- the explanation -------------------------------------------------------------------------

/// The CUDA error name of a result: "cudaErrorNoKernelImageForDevice" for the runtime,
/// "CUDA_ERROR_NO_BINARY_FOR_GPU" for the driver; "" when unknown.
std::string error_name(int result, bool runtime);
/// Whether an error can mean that no usable image exists (209, 222, 223, 218, 98, 500, 200, 300).
bool may_be_architecture(int result, bool runtime);

/// One failure, explained.
struct Explained {
  std::string api;
  int error = 0;
  std::string error_name;
  std::uint64_t count = 1;
  std::string kernel;  ///< mangled ("" when unknown)
  std::string kernel_demangled;
  int device = -1;
  std::optional<Version2> cc;  ///< of that device
  std::string file;            ///< the file that holds the code ("" for memory)
  Origin origin;               ///< where the image came from (loads, driver-API lookups)
  std::string translation_unit;
  std::optional<std::size_t> fatbin;
  std::vector<std::string> images;  ///< "sm_80", "compute_80", ... of the fatbin or image
  bool architecture = false;        ///< the failure is explained by what the binary carries
  std::string cause;                ///< one line
  std::string predicted;            ///< what `check` says of the same code: "native", "jit", "fail 209", ""
  std::vector<doctor::Fix> fixes;
};

/// A static verdict that disagrees with what the driver did (--predict).
struct Disagreement {
  std::string what;  ///< the kernel or image
  std::string file;
  std::string predicted;  ///< "fail 209", "native (sm_90)", "jit (compute_90)"
  std::string observed;   ///< "loaded", "209 at cudaLaunchKernel"
  std::string note;
};

/// A module or load that needed a PTX JIT, and what it cost.
struct JitEvent {
  std::string what;  ///< kernel, or image
  std::string file;
  std::string image;  ///< the PTX used, "compute_90"
  double ms = 0;
};

struct ProcessReport {
  long pid = 0, ppid = 0;
  std::vector<std::string> argv;
  std::string recorder_status, recorder_detail;
  std::vector<DeviceSeen> devices;
  std::map<std::string, std::string> env;
  std::uint64_t launches = 0, failed_launches = 0, module_loads = 0, modules = 0;
  bool complete = false;
  std::vector<Explained> loads;     ///< every driver-API load, judged
  std::vector<Explained> failures;  ///< every failed launch or lookup, explained
  std::vector<JitEvent> jit;
  std::vector<Disagreement> disagreements;
  std::size_t predicted_objects = 0;  ///< --predict: files judged
  std::vector<std::string> problems;
};

struct Report {
  std::vector<ProcessReport> processes;
  std::size_t architecture_failures = 0;
  std::size_t other_failures = 0;
  std::size_t disagreements = 0;
  bool recorded = false;              ///< some process had a working recorder
  std::vector<std::string> problems;  ///< why nothing (or not everything) was recorded
};

struct AnalyzeOptions {
  bool predict = false;  ///< compare every loaded module and launched kernel with `check`
  /// Where relative names of copies are found (the recording's directory).
  std::string dir;
};

/// Explains a recording. Never fails as a whole: what cannot be read becomes a problem.
Report analyze(const Recording& recording, const AnalyzeOptions& options = {});

// ---- the recorder in-process (for test harnesses and applications) ------------------------

struct RecordOptions {
  std::string dir;       ///< where the event file goes; empty: a new directory under $TMPDIR
  std::string cupti;     ///< libcupti to load; empty: libcupti.so.13, .12, then libcupti.so
  bool predict = false;  ///< record launched kernels and copy images from memory
  std::uint64_t max_copy_bytes = std::uint64_t{256} << 20;
};

/// Installs the recorder in this process (CUPTI must be loadable; works before or after CUDA is
/// initialised: what happened before is not seen). Once per process. The error says why
/// nothing is recorded; the program is unaffected either way.
Status start_recording(const RecordOptions& options = {});
/// The directory of the recording started by start_recording ("" when none).
std::string recording_dir();
/// Reads what this process has recorded so far (closing lines included once stopped).
Result<Recording> current_recording();
/// Writes the closing lines (counts, launched kernels); recording stops.
void stop_recording();

}  // namespace archguard::run
