// SPDX-License-Identifier: Apache-2.0
// The CUDA driver through dlopen: loading, entry points, device queries, error text.
#include "device/driver_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <cstdio>
#include <string>

namespace archguard::device {
namespace {

std::string dl_error_text() {
  const char* e = ::dlerror();
  return e != nullptr ? std::string(e) : std::string("unknown error");
}

// dlsym returns void*; converting it to a function pointer is conditionally supported and
// what POSIX requires to work.
template <class Fn>
void assign(Fn& slot, void* p) {
  static_assert(sizeof(Fn) == sizeof(void*));
  std::memcpy(&slot, &p, sizeof slot);
}

// Resolves the first name the library exports (versioned names first: cuda.h maps the plain
// names to the _v2 entry points).
template <class Fn>
void* resolve(void* handle, Fn& slot, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (void* p = ::dlsym(handle, n)) {
      assign(slot, p);
      return p;
    }
  }
  return nullptr;
}

}  // namespace

std::string default_driver_library() {
  const char* env = std::getenv("ARCHGUARD_LIBCUDA");
  return env != nullptr && *env != '\0' ? env : "libcuda.so.1";
}

Driver::~Driver() = default;  // the library stays loaded: unloading libcuda is not safe

Result<std::shared_ptr<const Driver>> Driver::open(const OpenOptions& options) {
  const std::string lib = options.library.empty() ? default_driver_library() : options.library;
  ::dlerror();
  void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    return make_error(ErrorKind::driver, "no cuda driver: dlopen " + lib + " failed: " + dl_error_text(), kNoDriverCode);
  }
  std::shared_ptr<Driver> d(new Driver());
  d->handle_ = h;
  d->library_ = lib;
  d->api_ = std::make_unique<DriverApi>();
  DriverApi& a = *d->api_;
  std::string missing;
  auto need = [&](auto& slot, std::initializer_list<const char*> names) {
    if (resolve(h, slot, names) == nullptr) {
      if (!missing.empty()) missing += ", ";
      missing += *names.begin();
    }
  };
  need(a.cuInit, {"cuInit"});
  need(a.cuDriverGetVersion, {"cuDriverGetVersion"});
  need(a.cuGetErrorName, {"cuGetErrorName"});
  need(a.cuGetErrorString, {"cuGetErrorString"});
  need(a.cuDeviceGetCount, {"cuDeviceGetCount"});
  need(a.cuDeviceGet, {"cuDeviceGet"});
  need(a.cuDeviceGetName, {"cuDeviceGetName"});
  need(a.cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
  need(a.cuDeviceTotalMem, {"cuDeviceTotalMem_v2", "cuDeviceTotalMem"});
  need(a.cuDeviceGetPCIBusId, {"cuDeviceGetPCIBusId"});
  resolve(h, a.cuDeviceGetUuid, {"cuDeviceGetUuid_v2", "cuDeviceGetUuid"});  // optional: the UUID is a fact, not a need
  need(a.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
  need(a.cuDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
  need(a.cuCtxSetCurrent, {"cuCtxSetCurrent"});
  need(a.cuCtxSynchronize, {"cuCtxSynchronize"});
  need(a.cuModuleLoadDataEx, {"cuModuleLoadDataEx"});
  need(a.cuModuleUnload, {"cuModuleUnload"});
  need(a.cuModuleGetFunction, {"cuModuleGetFunction"});
  need(a.cuFuncGetAttribute, {"cuFuncGetAttribute"});
  need(a.cuLaunchKernel, {"cuLaunchKernel"});
  need(a.cuMemAlloc, {"cuMemAlloc_v2", "cuMemAlloc"});
  need(a.cuMemFree, {"cuMemFree_v2", "cuMemFree"});
  need(a.cuMemcpyHtoD, {"cuMemcpyHtoD_v2", "cuMemcpyHtoD"});
  need(a.cuMemcpyDtoH, {"cuMemcpyDtoH_v2", "cuMemcpyDtoH"});
  need(a.cuMemsetD8, {"cuMemsetD8_v2", "cuMemsetD8"});
  need(a.cuEventCreate, {"cuEventCreate"});
  need(a.cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"});
  need(a.cuEventRecord, {"cuEventRecord"});
  need(a.cuEventSynchronize, {"cuEventSynchronize"});
  need(a.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
  if (!missing.empty()) {
    return make_error(ErrorKind::driver, "no usable cuda driver: " + lib + " lacks " + missing, kNoDriverCode);
  }
  if (options.init) {
    d->init_status_ = d->check("cuInit", a.cuInit(0));
  } else {
    d->init_status_ = make_error(ErrorKind::driver, "cuInit: not called (OpenOptions::init is false)", kCuErrorNotInitialized);
  }
  return std::shared_ptr<const Driver>(std::move(d));
}

Result<std::shared_ptr<const Driver>> Driver::shared() {
  static std::once_flag once;
  static Result<std::shared_ptr<const Driver>>* cached = nullptr;
  std::call_once(once, [] {
    // Intentionally leaked: the driver must outlive every static that may use it at exit.
    cached = new Result<std::shared_ptr<const Driver>>(open());
  });
  return *cached;
}

std::string Driver::library_path() const {
  Dl_info info{};
  if (api_ && api_->cuInit != nullptr) {
    void* p = nullptr;
    std::memcpy(&p, &api_->cuInit, sizeof p);
    if (::dladdr(p, &info) != 0 && info.dli_fname != nullptr) return info.dli_fname;
  }
  return library_;
}

void* Driver::symbol(const char* name) const {
  if (handle_ == nullptr || name == nullptr) return nullptr;
  return ::dlsym(handle_, name);
}

std::string Driver::describe(int cu_result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_->cuGetErrorName(cu_result, &name) != kCuSuccess || name == nullptr) name = "CUDA_ERROR_UNKNOWN_CODE";
  if (api_->cuGetErrorString(cu_result, &text) != kCuSuccess || text == nullptr) text = "unrecognised error code";
  return std::string(name) + " (" + std::to_string(cu_result) + "): " + text;
}

Error Driver::error(std::string_view what, int cu_result) const {
  return make_error(ErrorKind::driver, std::string(what) + ": " + describe(cu_result), cu_result);
}

Status Driver::check(std::string_view what, int cu_result) const {
  if (cu_result == kCuSuccess) return Ok{};
  return error(what, cu_result);
}

Result<int> Driver::version() const {
  int v = 0;
  AG_TRY_STATUS(check("cuDriverGetVersion", api_->cuDriverGetVersion(&v)));
  return v;
}

Result<Version2> Driver::cuda_version() const {
  AG_TRY(auto v, version());
  return Version2{static_cast<unsigned>(v / 1000), static_cast<unsigned>((v % 1000) / 10)};
}

Result<int> Driver::device_count() const {
  if (!init_status_) return init_status_.error();
  int n = 0;
  AG_TRY_STATUS(check("cuDeviceGetCount", api_->cuDeviceGetCount(&n)));
  return n;
}

Result<DeviceInfo> Driver::device(int ordinal) const {
  if (!init_status_) return init_status_.error();
  const std::string where = "device " + std::to_string(ordinal) + ": ";
  CUdevice dev = 0;
  AG_TRY_STATUS(check(where + "cuDeviceGet", api_->cuDeviceGet(&dev, ordinal)));
  DeviceInfo info;
  info.ordinal = ordinal;
  char buf[256] = {};
  AG_TRY_STATUS(check(where + "cuDeviceGetName", api_->cuDeviceGetName(buf, sizeof buf - 1, dev)));
  info.name = buf;
  int major = 0, minor = 0, integrated = 0, sms = 0;
  if (auto s = check(where + "cuDeviceGetAttribute(compute capability major)",
                     api_->cuDeviceGetAttribute(&major, kAttrCcMajor, dev));
      !s) return s.error();
  if (auto s = check(where + "cuDeviceGetAttribute(compute capability minor)",
                     api_->cuDeviceGetAttribute(&minor, kAttrCcMinor, dev));
      !s) return s.error();
  if (auto s = check(where + "cuDeviceGetAttribute(integrated)",
                     api_->cuDeviceGetAttribute(&integrated, kAttrIntegrated, dev));
      !s) return s.error();
  if (auto s = check(where + "cuDeviceGetAttribute(multiprocessor count)",
                     api_->cuDeviceGetAttribute(&sms, kAttrMultiprocessorCount, dev));
      !s) return s.error();
  info.cc = Version2{static_cast<unsigned>(major), static_cast<unsigned>(minor)};
  info.integrated = integrated != 0;
  info.multiprocessors = sms;
  AG_TRY_STATUS(check(where + "cuDeviceTotalMem", api_->cuDeviceTotalMem(&info.total_memory, dev)));
  char bus[64] = {};
  AG_TRY_STATUS(check(where + "cuDeviceGetPCIBusId", api_->cuDeviceGetPCIBusId(bus, sizeof bus - 1, dev)));
  info.pci_bus_id = bus;
  if (api_->cuDeviceGetUuid != nullptr) {
    unsigned char u[16] = {};
    if (api_->cuDeviceGetUuid(u, dev) == 0) {
      // nvidia-smi's spelling: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
      char text[48];
      std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4],
                    u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
      info.uuid = text;
    }
  }
  return info;
}

Result<std::vector<DeviceInfo>> Driver::devices() const {
  AG_TRY(auto n, device_count());
  std::vector<DeviceInfo> out;
  for (int i = 0; i < n; ++i) {
    AG_TRY(auto d, device(i));
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace archguard::device
