// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// The CUDA driver, opened at run time with dlopen("libcuda.so.1"): no link-time dependency, so
/// every archguard binary starts on machines without a driver and reports that cleanly.
///
/// Errors carry the driver's name and text for the failing CUresult in the message
/// ("cuModuleLoadDataEx: CUDA_ERROR_NO_BINARY_FOR_GPU (209): no kernel image is available for
/// execution on the device") and the number itself in Error::code.
///
/// Threading: a Driver is safe to share between threads (it is immutable after open()). A Context
/// makes itself current on the thread that calls make_current(); the objects made from it
/// (Module, Buffer, Event) expect their context to be current on the calling thread.

#include <archguard/result.hpp>
#include <archguard/table_types.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace archguard::device {

/// CUresult values the library names (the driver defines many more; any int may appear).
inline constexpr int kCuSuccess = 0;
inline constexpr int kCuErrorInvalidValue = 1;
inline constexpr int kCuErrorNotInitialized = 3;
inline constexpr int kCuErrorNoDevice = 100;
inline constexpr int kCuErrorInvalidDevice = 101;
inline constexpr int kCuErrorInvalidImage = 200;
inline constexpr int kCuErrorNoBinaryForGpu = 209;
inline constexpr int kCuErrorInvalidPtx = 218;
inline constexpr int kCuErrorUnsupportedPtxVersion = 222;
inline constexpr int kCuErrorJitCompilationDisabled = 223;
inline constexpr int kCuErrorNotFound = 500;
/// Error::code used when the failure is not a CUresult (no library, missing entry point).
inline constexpr int kNoDriverCode = -1;

/// Opaque driver handles (same representation as the driver's CUcontext, CUmodule, ...).
using ContextHandle = void*;
using ModuleHandle = void*;
using FunctionHandle = void*;
using StreamHandle = void*;
using EventHandle = void*;
using DevicePtr = std::uint64_t;

/// What the driver reports about one device.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;              ///< "NVIDIA H200"
  Version2 cc;                   ///< compute capability, e.g. {9, 0}
  bool integrated = false;       ///< CU_DEVICE_ATTRIBUTE_INTEGRATED (Tegra / iGPU)
  std::size_t total_memory = 0;  ///< bytes
  std::string pci_bus_id;        ///< "0000:1B:00.0"
  std::string uuid;              ///< "GPU-5a1c...", as nvidia-smi prints it; "" when the driver lacks cuDeviceGetUuid
  int multiprocessors = 0;
};

/// The driver library Driver::open loads by default: $ARCHGUARD_LIBCUDA when set and not
/// empty, else "libcuda.so.1".
std::string default_driver_library();

struct OpenOptions {
  /// Library to dlopen. Empty: default_driver_library().
  std::string library;
  /// Call cuInit(0) after loading (its failure is kept, see Driver::init_status()).
  bool init = true;
};

struct DriverApi;  // the resolved entry points (src/device/driver_api.hpp)

/// The loaded driver library and its entry points.
class Driver {
 public:
  /// Loads the driver. Fails only when the library or its core entry points are missing:
  /// "no cuda driver: dlopen libcuda.so.1 failed: <dlerror>". A failing cuInit (no device,
  /// CUDA_VISIBLE_DEVICES="") does not fail open(): version() still works, and the calls that
  /// need an initialised driver return init_status()'s error.
  static Result<std::shared_ptr<const Driver>> open(const OpenOptions& options = {});
  /// The process-wide driver, opened with default options on first use (thread-safe). The
  /// outcome, failure included, is kept for the life of the process.
  static Result<std::shared_ptr<const Driver>> shared();

  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  /// The library that was loaded (as given to dlopen) and where it lives when known.
  const std::string& library() const { return library_; }
  std::string library_path() const;
  /// cuInit(0)'s outcome: Ok, the driver's error (CUDA_ERROR_NO_DEVICE when no GPU is visible),
  /// or an error saying cuInit was not called (OpenOptions::init false).
  const Status& init_status() const { return init_status_; }
  /// cuDriverGetVersion: the CUDA version the driver supports, e.g. 13000 for 13.0.
  Result<int> version() const;
  /// The same as {13, 0}.
  Result<Version2> cuda_version() const;
  Result<int> device_count() const;
  Result<DeviceInfo> device(int ordinal) const;
  Result<std::vector<DeviceInfo>> devices() const;

  /// Any driver entry point by its exported name ("cuFuncGetAttribute", "cuMemAlloc_v2"), or
  /// nullptr. Lets upper layers use an extra call without changing this layer.
  void* symbol(const char* name) const;

  /// "CUDA_ERROR_NO_BINARY_FOR_GPU (209): no kernel image is available for execution on the device".
  std::string describe(int cu_result) const;
  /// An Error "<what>: <describe(code)>" with Error::code = code.
  Error error(std::string_view what, int cu_result) const;
  /// Ok for CUDA_SUCCESS, else error(what, r).
  Status check(std::string_view what, int cu_result) const;

  /// The resolved entry points (internal; used by the device and jit layers).
  const DriverApi& api() const { return *api_; }

 private:
  Driver() = default;
  void* handle_ = nullptr;
  std::string library_;
  std::unique_ptr<DriverApi> api_;
  Status init_status_ = Ok{};
};

using DriverPtr = std::shared_ptr<const Driver>;

class Context;

/// Three launch dimensions.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// A kernel in a loaded module. Valid while its Module lives.
class Function {
 public:
  Function() = default;
  /// cuLaunchKernel. `args` points at one pointer per kernel parameter (as the driver expects).
  Status launch(Dim3 grid, Dim3 block, void** args, unsigned shared_bytes = 0,
                StreamHandle stream = nullptr) const;
  /// cuFuncGetAttribute (CUfunction_attribute numbering), e.g. 4 = NUM_REGS.
  Result<int> attribute(int attribute) const;
  FunctionHandle handle() const { return fn_; }
  const std::string& name() const { return name_; }

 private:
  friend class Module;
  Function(const Driver* driver, FunctionHandle fn, std::string name)
      : driver_(driver), fn_(fn), name_(std::move(name)) {}
  const Driver* driver_ = nullptr;
  FunctionHandle fn_ = nullptr;
  std::string name_;
};

/// A loaded module (unloaded on destruction). Move-only.
class Module {
 public:
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  /// cuModuleGetFunction; a missing name gives CUDA_ERROR_NOT_FOUND (500) naming the kernel.
  Result<Function> function(const std::string& name) const;
  ModuleHandle handle() const { return mod_; }
  /// The driver's info log of the load (JIT messages for PTX), possibly empty.
  const std::string& info_log() const { return info_log_; }

 private:
  friend class Context;
  Module(DriverPtr driver, ModuleHandle mod, std::string info_log)
      : driver_(std::move(driver)), mod_(mod), info_log_(std::move(info_log)) {}
  DriverPtr driver_;
  ModuleHandle mod_ = nullptr;
  std::string info_log_;
};

/// Device memory (freed on destruction). Move-only.
class Buffer {
 public:
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  DevicePtr ptr() const { return ptr_; }
  std::size_t size() const { return size_; }
  /// Synchronous copies; the span must not exceed size().
  Status copy_from_host(std::span<const std::byte> src) const;
  Status copy_to_host(std::span<std::byte> dst) const;
  /// cuMemsetD8 over the whole buffer.
  Status fill(std::uint8_t value) const;

 private:
  friend class Context;
  Buffer(DriverPtr driver, DevicePtr ptr, std::size_t size)
      : driver_(std::move(driver)), ptr_(ptr), size_(size) {}
  DriverPtr driver_;
  DevicePtr ptr_ = 0;
  std::size_t size_ = 0;
};

/// A timing event (destroyed on destruction). Move-only.
class Event {
 public:
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  Status record(StreamHandle stream = nullptr) const;
  Status synchronize() const;
  /// Milliseconds from `start` to this event; both recorded and this one completed.
  Result<float> elapsed_since(const Event& start) const;

 private:
  friend class Context;
  Event(DriverPtr driver, EventHandle ev) : driver_(std::move(driver)), ev_(ev) {}
  DriverPtr driver_;
  EventHandle ev_ = nullptr;
};

/// A device's primary context, retained for the life of this object (released on destruction).
/// Move-only.
class Context {
 public:
  /// Retains device `ordinal`'s primary context and makes it current on this thread.
  static Result<Context> primary(DriverPtr driver, int ordinal = 0);

  Context(Context&& other) noexcept;
  Context& operator=(Context&& other) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  /// Makes the context current on the calling thread.
  Status make_current() const;
  /// cuCtxSynchronize: waits for all work; returns the first asynchronous error (e.g. 209).
  Status synchronize() const;

  const DeviceInfo& device() const { return info_; }
  const DriverPtr& driver() const { return driver_; }
  ContextHandle handle() const { return ctx_; }

  struct LoadOptions {
    bool verbose_log = false;       ///< CU_JIT_LOG_VERBOSE
    std::size_t log_bytes = 16384;  ///< size of each JIT log buffer
  };
  /// cuModuleLoadDataEx over a cubin, PTX (NUL-terminated or not: a terminator is added when
  /// missing) or fatbin. A refusal carries the driver's JIT error log in the message.
  Result<Module> load_module(std::span<const std::byte> image, const LoadOptions& options) const;
  Result<Module> load_module(std::span<const std::byte> image) const { return load_module(image, LoadOptions{}); }
  /// cuMemAlloc.
  Result<Buffer> allocate(std::size_t bytes) const;
  /// cuEventCreate (default flags: timing enabled).
  Result<Event> create_event() const;

 private:
  Context(DriverPtr driver, DeviceInfo info, int device, ContextHandle ctx)
      : driver_(std::move(driver)), info_(std::move(info)), device_(device), ctx_(ctx) {}
  DriverPtr driver_;
  DeviceInfo info_;
  int device_ = 0;  ///< CUdevice
  ContextHandle ctx_ = nullptr;
};

/// What decides the GPUs and driver this machine's driver would report, read without starting
/// the driver (cuInit takes 0.2-0.3 s on a data-centre node): the NVIDIA kernel module's version,
/// the NVIDIA PCI functions (address, device, subsystem, revision), the /dev/nvidia* nodes with
/// their numbers, owners, modes and whether this process may open them, the MIG capability tree,
/// and the file the loader picks for the user-space driver (libcuda.so.1, or $ARCHGUARD_LIBCUDA)
/// with its identity. Two equal identities mean the same GPUs as far as the driver can tell; none
/// when any part cannot be read (no NVIDIA kernel module, no PCI function, no driver library):
/// then only the driver can say. `root` prefixes /proc, /sys and /dev (tests); empty:
/// $ARCHGUARD_SYS_ROOT, else none.
std::optional<std::string> machine_identity(const std::string& root = {});

}  // namespace archguard::device
