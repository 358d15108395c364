// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// Run-time compilation with NVRTC, a disk cache, loading through the driver, and a fallback
/// from prebuilt kernels to JIT-compiled ones.
///
/// NVRTC is opened with dlopen (ARCHGUARD_NVRTC, else libnvrtc.so.13, libnvrtc.so.12,
/// libnvrtc.so), so programs using this layer start where no toolkit is installed.
///
/// Target choice (the clamp rule, docs/jit.md): the largest architecture NVRTC supports that is
/// not above the device; SASS when it has the device's major (and no arch-specific 'a' suffix
/// that the device would not match); otherwise PTX of the highest supported compute_XY, used
/// only when the driver accepts that PTX ISA.

#include <archguard/cache.hpp>
#include <archguard/compat.hpp>
#include <archguard/device.hpp>
#include <archguard/result.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace archguard::jit {

/// What the loaded NVRTC reports about itself.
struct NvrtcInfo {
  std::string library;              ///< the path dlopen found
  Version2 version;                 ///< nvrtcVersion, e.g. {13, 0}
  std::vector<unsigned> supported;  ///< nvrtcGetSupportedArchs, ascending, e.g. 75 80 ... 121
  std::string build_id;             ///< GNU build id of the library (hex), "" when absent
  Version2 ptx_isa;                 ///< PTX ISA it emits (release table), empty when unknown
};

/// The NVRTC library, loaded once per process and shared.
class Nvrtc;
using NvrtcPtr = std::shared_ptr<const Nvrtc>;

/// Loads NVRTC: `library` when given, else $ARCHGUARD_NVRTC, else the sonames above in order.
/// "no nvrtc: tried libnvrtc.so.13 (<dlerror>), libnvrtc.so.12 (...), libnvrtc.so (...)".
Result<NvrtcPtr> load_nvrtc(const std::string& library = {});
/// The process-wide NVRTC (loaded on first use with the default search).
Result<NvrtcPtr> shared_nvrtc();
const NvrtcInfo& nvrtc_info(const Nvrtc& nvrtc);
/// What load_nvrtc(library) reads of NVRTC, with the library unloaded again (dlclose) unless
/// something else in the process holds it: for a caller that only reports the version (doctor),
/// whose 25 MB of NVRTC's pages would otherwise stay for the process's life. NVRTC leaves about
/// 71 KB behind each time it is unloaded (its C++ runtime's exception pool): once per process,
/// not in a loop.
Result<NvrtcInfo> read_nvrtc_info(const std::string& library = {});

/// A header given as a string (nvrtcCreateProgram's headers): `#include "name"` finds it.
struct Header {
  std::string name;
  std::string content;
};

/// One compilation.
struct CompileRequest {
  std::string name = "kernel.cu";  ///< appears in diagnostics; its directory is searched for "..." includes
  std::string source;
  std::vector<Header> headers;
  std::vector<std::string> options;           ///< passed to NVRTC (not -arch: see target)
  std::vector<std::string> name_expressions;  ///< e.g. "scale<float>": lowered names come back
  Target target{{90, Suffix::none}, CodeKind::sass};
  /// PTX only: the driver's CUDA version (cuDriverGetVersion as {13, 0}); recorded in the key.
  std::optional<Version2> driver_cuda;
};

/// A compiled program.
struct Compiled {
  Target target;
  std::vector<std::byte> image;                                    ///< cubin, PTX text (not NUL-terminated) or LTO-IR
  std::vector<std::pair<std::string, std::string>> lowered_names;  ///< (expression, mangled)
  std::string log;                                                 ///< NVRTC's log (warnings), "" on a cache hit
  double compile_ms = 0;                                           ///< time in NVRTC (0 on a hit)
  bool from_cache = false;
  std::string key;         ///< cache key (hex), "" when the cache was not used
  std::string cache_note;  ///< why the cache was bypassed, "" otherwise

  /// The lowered (mangled) name of a name expression, or nullptr.
  const std::string* lowered(const std::string& expression) const;
};

/// The clamp rule. `supported` ascending (nvrtcGetSupportedArchs); `nvrtc_ptx_isa` the PTX ISA
/// NVRTC emits; `driver_ptx_isa` the highest the driver accepts (empty: unknown, not limited).
/// Errors say which architectures were available and why none fits.
Result<Target> choose_target(const Device& device, std::span<const unsigned> supported,
                             Version2 nvrtc_ptx_isa, Version2 driver_ptx_isa);

/// The cache key fields and their digest, before the include tree is added (exposed for tests
/// and `archguard cache`).
struct KeyInfo {
  Digest digest{};
  std::string hex;
  std::string fields_json;  ///< readable key fields (source digest, options, target, nvrtc, headers)
  bool cacheable = true;
  std::string note;  ///< why not cacheable
};

struct CompilerOptions {
  std::string nvrtc_library;          ///< empty: the default search
  bool use_cache = true;              ///< false: always compile
  std::optional<CacheOptions> cache;  ///< nullopt: CacheOptions::from_environment()
  /// Adds NVRTC's automatic precompiled headers (-pch) to every compile: later compiles in
  /// this process that share a prefix of heavy includes reuse the parsed headers. Not part of
  /// the cache key (it does not change the output).
  bool pch = false;
};

/// Which path a fallback launch took.
enum class LaunchPath { prebuilt,
                        jit };

/// A kernel ready to launch: the module it lives in and the function.
struct LoadedKernel {
  device::Module module;
  device::Function function;
  Compiled compiled;  ///< empty image when the prebuilt image ran
  LaunchPath path = LaunchPath::jit;
  std::string reason;  ///< one sentence: why this path
  int reloads = 0;     ///< 1 when a cached image was refused, evicted and recompiled
};

/// A kernel's prebuilt form: the image bytes (fatbin or cubin) the driver loads, and the images
/// it holds as the compatibility engine sees them.
struct Prebuilt {
  std::span<const std::byte> image;
  std::vector<Image> images;

  /// A fatbin (as written by `nvcc -fatbin`, or the bytes of an .nv_fatbin section) with its
  /// images read by the fatbin reader; device-link fatbins are ignored (rule 9). The bytes must
  /// outlive the result. `name` names them in errors.
  static Result<Prebuilt> from_fatbin(std::span<const std::byte> bytes, const std::string& name);
};

class Compiler {
 public:
  /// Loads NVRTC and opens the cache. A cache directory that cannot be used (refused as
  /// insecure, read-only, full) is not an error: the compiler works without it and says why in
  /// cache_problem() and each result's cache_note. Safe to use from several threads.
  static Result<std::unique_ptr<Compiler>> create(const CompilerOptions& options = {});
  ~Compiler();
  Compiler(const Compiler&) = delete;
  Compiler& operator=(const Compiler&) = delete;

  const NvrtcInfo& nvrtc() const;
  /// nullptr when the cache is disabled.
  Cache* cache() const;
  /// Why the cache could not be opened (a read-only or full file system, permissions), or "":
  /// the compiler then compiles without it. The cache is an optimisation; its failure never
  /// fails a compile.
  const std::string& cache_problem() const;

  /// The cache key of a request: digest over the source, provided headers, every header the
  /// include tree reaches (by content), options, target, NVRTC version and build, and the
  /// driver for PTX.
  Result<KeyInfo> key(const CompileRequest& request) const;
  /// Compiles, or returns the cached result. Errors carry NVRTC's full log, the options and
  /// the numbered source lines the log points at.
  Result<Compiled> compile(const CompileRequest& request);
  /// The target for a device under the clamp rule with this NVRTC and the driver's CUDA version.
  Result<Target> target_for(const Device& device, std::optional<Version2> driver_cuda) const;

  /// Chooses the target for the context's device, compiles (or hits the cache) and loads the
  /// module. An image the driver refuses (bad image, no binary for the GPU, PTX too new) is
  /// evicted and compiled once more; a second refusal is the error.
  /// `request.target` is ignored.
  Result<LoadedKernel> load(const device::Context& ctx, CompileRequest request, const std::string& kernel);

  /// Launch-path choice: the prebuilt image when the compatibility engine says the context's
  /// device can run it (and the driver then loads it), else the JIT-compiled source.
  Result<LoadedKernel> load_with_fallback(const device::Context& ctx, const Prebuilt& prebuilt,
                                          CompileRequest source, const std::string& kernel);

 private:
  Compiler() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Reads a file's bytes (for sources, prebuilt images). Errors name the file and errno text.
Result<std::string> read_text_file(const std::string& path);

}  // namespace archguard::jit
