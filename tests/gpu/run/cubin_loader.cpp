// SPDX-License-Identifier: Apache-2.0
// The `cubin` case: a driver API program that loads a standalone cubin from disk with
// cuModuleLoad and launches cubin_kernel from it. The cubin is for another GPU, so the load
// itself fails (CUDA_ERROR_NO_BINARY_FOR_GPU, 209) and no kernel is involved.
// Usage: cubin_loader FILE.cubin. Prints code=<n> of the call that failed and exits 1.
#include <cuda.h>
#include <cstdio>

#define CHECK(call)                                                                         \
  do {                                                                                      \
    CUresult r_ = (call);                                                                   \
    if (r_ != CUDA_SUCCESS) {                                                               \
      const char* n_ = nullptr;                                                             \
      cuGetErrorName(r_, &n_);                                                              \
      std::printf("%s failed: code=%d (%s)\n", #call, static_cast<int>(r_), n_ ? n_ : "?"); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cubin_loader FILE.cubin\n");
    return 2;
  }
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CUdeviceptr d;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuModuleLoad(&mod, argv[1]));
  CHECK(cuModuleGetFunction(&fn, mod, "cubin_kernel"));
  CHECK(cuMemAlloc(&d, 32 * sizeof(int)));
  void* params[] = {&d};
  CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr));
  CHECK(cuCtxSynchronize());
  CHECK(cuMemFree(d));
  CHECK(cuModuleUnload(mod));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  std::printf("cubin_kernel: ok\n");
  return 0;
}
