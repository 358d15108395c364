// SPDX-License-Identifier: Apache-2.0
// A stand-in for libcuda.so.1 used by the unit tests on machines without a GPU: it exports the
// entry points the device layer resolves and behaves like one CC 9.0 device, so the success
// paths, error texts and JIT-log plumbing run everywhere. Controlled through the environment:
//   FAKE_CUDA_INIT_ERROR=<n>   cuInit returns n
//   FAKE_CUDA_INIT_DELAY_MS=<n>  cuInit takes n milliseconds (a node whose driver starts slowly)
//   FAKE_CUDA_INIT_MARK=<path>  cuInit creates this file when it starts (before the delay), so
//                              that a test's other programs can tell the driver has started
//   FAKE_CUDA_CC=<major>.<minor>  the device's compute capability (default 9.0)
//   FAKE_CUDA_INTEGRATED=1     the device is an integrated (Tegra) GPU
//   FAKE_CUDA_REJECT_LOADS=<n>  the next n module loads fail with 209 (counted per process)
//   FAKE_CUDA_NAME=<text>      the devices' name (default "Fake GPU")
//   FAKE_CUDA_COUNT=<n>        how many devices there are (default 1, at most 8; 0: none)
//   FAKE_CUDA_DRIVER=<n>       what cuDriverGetVersion says (default 13000: CUDA 13.0)
//   FAKE_CUDA_UUID_SEED=<n>    the first byte of every device's UUID (default 0xfa), so that
//                              fake nodes of one test report different GPUs
// cuCtxGetDevice, cuFuncGetName and cuFuncGetModule answer archguard run's recorder (device 0; a
// CUfunction handle of the run tests' fake program is a pointer to the kernel's name).
// Images whose first bytes are "REJECT" fail to load with 209 and a JIT error log; images whose
// first bytes are "BADPTX" fail with 222.
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

extern "C" {

using CUresult = int;

#define FAKE_EXPORT __attribute__((visibility("default")))

namespace {
const char* env(const char* n) {
  const char* v = std::getenv(n);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}
int g_ctx_marker = 0;
int g_mod_marker = 0;
int g_fn_marker = 0;
int g_ev_marker = 0;
int g_rejected = 0;
}  // namespace

// Lets a test reset the refusal counter.
FAKE_EXPORT void fake_cuda_reset() { g_rejected = 0; }

FAKE_EXPORT CUresult cuInit(unsigned) {
  if (const char* mark = env("FAKE_CUDA_INIT_MARK"))
    if (std::FILE* f = std::fopen(mark, "w")) std::fclose(f);
  if (const char* d = env("FAKE_CUDA_INIT_DELAY_MS")) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(d)));
  if (const char* e = env("FAKE_CUDA_INIT_ERROR")) return std::atoi(e);
  return 0;
}
int device_count() {
  const char* n = env("FAKE_CUDA_COUNT");
  const int c = n != nullptr ? std::atoi(n) : 1;
  return c < 0 ? 0 : c > 8 ? 8
                           : c;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int* v) {
  const char* d = env("FAKE_CUDA_DRIVER");
  *v = d != nullptr ? std::atoi(d) : 13000;
  return 0;
}
namespace {
// The error codes the fake answers for, with cuGetErrorName's and cuGetErrorString's texts.
struct FakeError {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr FakeError kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
};
const FakeError* find_error(CUresult r) {
  for (const FakeError& e : kErrors)
    if (e.code == r) return &e;
  return nullptr;
}
}  // namespace

FAKE_EXPORT CUresult cuGetErrorName(CUresult r, const char** s) {
  const FakeError* e = find_error(r);
  *s = e != nullptr ? e->name : nullptr;
  return e != nullptr ? 0 : 1;
}
FAKE_EXPORT CUresult cuGetErrorString(CUresult r, const char** s) {
  const FakeError* e = find_error(r);
  *s = e != nullptr ? e->text : nullptr;
  return e != nullptr ? 0 : 1;
}
FAKE_EXPORT CUresult cuDeviceGetCount(int* n) {
  *n = device_count();
  return 0;
}
FAKE_EXPORT CUresult cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return 101;
  *d = ordinal;
  return 0;
}
FAKE_EXPORT CUresult cuDeviceGetName(char* buf, int len, int) {
  const char* name = env("FAKE_CUDA_NAME");
  std::strncpy(buf, name != nullptr ? name : "Fake GPU", static_cast<std::size_t>(len));
  return 0;
}
FAKE_EXPORT CUresult cuDeviceGetUuid_v2(unsigned char* uuid, int dev) {
  const char* seed = env("FAKE_CUDA_UUID_SEED");
  for (int i = 0; i < 16; ++i) uuid[i] = static_cast<unsigned char>(0x10 + i);
  uuid[0] = static_cast<unsigned char>(seed != nullptr ? std::atoi(seed) : 0xfa);
  uuid[15] = static_cast<unsigned char>(dev);
  return 0;
}
FAKE_EXPORT CUresult cuDeviceGetAttribute(int* v, int attr, int) {
  int major = 9, minor = 0;
  if (const char* cc = env("FAKE_CUDA_CC")) {
    major = std::atoi(cc);
    if (const char* dot = std::strchr(cc, '.')) minor = std::atoi(dot + 1);
  }
  switch (attr) {
    case 16:
      *v = 132;
      return 0;
    case 18:
      *v = env("FAKE_CUDA_INTEGRATED") != nullptr ? 1 : 0;
      return 0;
    case 75:
      *v = major;
      return 0;
    case 76:
      *v = minor;
      return 0;
    default:
      return 1;
  }
}
FAKE_EXPORT CUresult cuDeviceTotalMem_v2(std::size_t* b, int) {
  *b = std::size_t{1} << 30;
  return 0;
}
FAKE_EXPORT CUresult cuDeviceGetPCIBusId(char* buf, int len, int dev) {
  char bus[16];
  std::snprintf(bus, sizeof bus, "0000:%02x:00.0", 1 + dev);
  std::strncpy(buf, bus, static_cast<std::size_t>(len));
  return 0;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(void** ctx, int) {
  *ctx = &g_ctx_marker;
  return 0;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int) { return 0; }
FAKE_EXPORT CUresult cuCtxSetCurrent(void*) { return 0; }
FAKE_EXPORT CUresult cuCtxSynchronize() { return 0; }
// Asked by archguard run's recorder to describe devices and kernels.
FAKE_EXPORT CUresult cuCtxGetDevice(int* d) {
  *d = 0;
  return 0;
}
FAKE_EXPORT CUresult cuCtxGetDevice_v2(int* d, void*) {
  *d = 0;
  return 0;
}
FAKE_EXPORT CUresult cuFuncGetName(const char** name, void* fn) {
  if (fn == nullptr) return 1;
  *name = static_cast<const char*>(fn);  // the fake's CUfunction handles are their names
  return 0;
}
FAKE_EXPORT CUresult cuFuncGetModule(void** mod, void* fn) {
  if (fn == nullptr) return 1;
  *mod = &g_mod_marker;
  return 0;
}
FAKE_EXPORT CUresult cuModuleLoadDataEx(void** mod, const void* image, unsigned n, int* keys, void** values) {
  const char* img = static_cast<const char*>(image);
  int result = 0;
  const char* log = nullptr;
  const char* reject = env("FAKE_CUDA_REJECT_LOADS");
  if (reject != nullptr && g_rejected < std::atoi(reject)) {
    ++g_rejected;
    result = 209;
    log = "fake jit: load refused on purpose";
  } else if (std::strncmp(img, "REJECT", 6) == 0) {
    result = 209;
    log = "fake jit: no image for sm_90 in this module";
  } else if (std::strncmp(img, "BADPTX", 6) == 0) {
    result = 222;
    log = "ptxas application ptx input, line 1; fatal   : Unsupported .version 9.9";
  }
  if (log != nullptr) {
    char* buf = nullptr;
    std::size_t size = 0;
    for (unsigned i = 0; i < n; ++i) {
      if (keys[i] == 5) buf = static_cast<char*>(values[i]);
      if (keys[i] == 6) size = reinterpret_cast<std::size_t>(values[i]);  // NOLINT
    }
    if (buf != nullptr && size > 0) {
      std::strncpy(buf, log, size - 1);
      buf[size - 1] = '\0';
    }
    return result;
  }
  *mod = &g_mod_marker;
  return 0;
}
FAKE_EXPORT CUresult cuModuleUnload(void*) { return 0; }
FAKE_EXPORT CUresult cuModuleGetFunction(void** fn, void*, const char* name) {
  if (std::strcmp(name, "missing") == 0) return 500;
  *fn = &g_fn_marker;
  return 0;
}
FAKE_EXPORT CUresult cuFuncGetAttribute(int* v, int, void*) {
  *v = 16;
  return 0;
}
FAKE_EXPORT CUresult cuLaunchKernel(void*, unsigned gx, unsigned, unsigned, unsigned bx, unsigned, unsigned,
                                    unsigned, void*, void**, void**) {
  return (gx == 0 || bx == 0) ? 1 : 0;
}
FAKE_EXPORT CUresult cuMemAlloc_v2(unsigned long long* p, std::size_t n) {  // NOLINT
  void* m = std::malloc(n == 0 ? 1 : n);
  *p = reinterpret_cast<unsigned long long>(m);  // NOLINT
  return m != nullptr ? 0 : 2;
}
FAKE_EXPORT CUresult cuMemFree_v2(unsigned long long p) {  // NOLINT
  std::free(reinterpret_cast<void*>(p));                   // NOLINT
  return 0;
}
FAKE_EXPORT CUresult cuMemcpyHtoD_v2(unsigned long long d, const void* s, std::size_t n) {  // NOLINT
  std::memcpy(reinterpret_cast<void*>(d), s, n);                                            // NOLINT
  return 0;
}
FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void* d, unsigned long long s, std::size_t n) {  // NOLINT
  std::memcpy(d, reinterpret_cast<const void*>(s), n);                                // NOLINT
  return 0;
}
FAKE_EXPORT CUresult cuMemsetD8_v2(unsigned long long d, unsigned char v, std::size_t n) {  // NOLINT
  std::memset(reinterpret_cast<void*>(d), v, n);                                            // NOLINT
  return 0;
}
FAKE_EXPORT CUresult cuEventCreate(void** ev, unsigned) {
  *ev = &g_ev_marker;
  return 0;
}
FAKE_EXPORT CUresult cuEventDestroy_v2(void*) { return 0; }
FAKE_EXPORT CUresult cuEventRecord(void*, void*) { return 0; }
FAKE_EXPORT CUresult cuEventSynchronize(void*) { return 0; }
FAKE_EXPORT CUresult cuEventElapsedTime(float* ms, void*, void*) {
  *ms = 1.5f;
  return 0;
}

}  // extern "C"
