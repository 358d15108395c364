// SPDX-License-Identifier: Apache-2.0
#pragma once
// The driver entry points the device layer resolves with dlsym. The types are declared here
// (they match cuda.h's ABI: handles are pointers, CUdevice is int, CUdeviceptr is 64-bit) so the
// layer builds without the CUDA headers.

#include <archguard/device.hpp>

#include <cstddef>

namespace archguard::device {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // NOLINT(runtime/int): the driver's own type

// CUjit_option values used for module loading (cuda.h, CUjit_option_enum).
inline constexpr int kJitInfoLogBuffer = 3;
inline constexpr int kJitInfoLogBufferSizeBytes = 4;
inline constexpr int kJitErrorLogBuffer = 5;
inline constexpr int kJitErrorLogBufferSizeBytes = 6;
inline constexpr int kJitLogVerbose = 12;

// CUdevice_attribute values.
inline constexpr int kAttrMultiprocessorCount = 16;
inline constexpr int kAttrIntegrated = 18;
inline constexpr int kAttrCcMajor = 75;
inline constexpr int kAttrCcMinor = 76;

struct DriverApi {
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(std::size_t*, CUdevice) = nullptr;
  CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetUuid)(unsigned char*, CUdevice) = nullptr;  ///< optional: CUuuid is 16 bytes
  CUresult (*cuDevicePrimaryCtxRetain)(ContextHandle*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(ContextHandle) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuModuleLoadDataEx)(ModuleHandle*, const void*, unsigned, int*, void**) = nullptr;
  CUresult (*cuModuleUnload)(ModuleHandle) = nullptr;
  CUresult (*cuModuleGetFunction)(FunctionHandle*, ModuleHandle, const char*) = nullptr;
  CUresult (*cuFuncGetAttribute)(int*, int, FunctionHandle) = nullptr;
  CUresult (*cuLaunchKernel)(FunctionHandle, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, StreamHandle, void**, void**) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, std::size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, std::size_t) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, std::size_t) = nullptr;
  CUresult (*cuEventCreate)(EventHandle*, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(EventHandle) = nullptr;
  CUresult (*cuEventRecord)(EventHandle, StreamHandle) = nullptr;
  CUresult (*cuEventSynchronize)(EventHandle) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, EventHandle, EventHandle) = nullptr;
};

}  // namespace archguard::device
