// SPDX-License-Identifier: Apache-2.0
// The plugin of the `plugin`, `children` and `stop` cases: a shared library built with sm_80
// SASS only (no PTX), loaded at run time by plugin_host. On a GPU that is not 8.x its kernel has
// no image, so plugin_run() gets cudaErrorNoKernelImageForDevice (209) from the launch.
#include <cuda_runtime.h>
#include <cstdio>

__global__ void plugin_kernel(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * static_cast<float>(i);
}

// Returns the cudaError_t of the first call that failed (0 when the launch ran).
extern "C" __attribute__((visibility("default"))) int plugin_run(void) {
  const int n = 256;
  float* d = nullptr;
  cudaError_t e = cudaMalloc(&d, n * sizeof(float));
  if (e != cudaSuccess) {
    std::fprintf(stderr, "plugin: cudaMalloc failed: code=%d (%s)\n", static_cast<int>(e), cudaGetErrorName(e));
    return static_cast<int>(e);
  }
  plugin_kernel<<<1, n>>>(d, n);
  e = cudaGetLastError();
  const char* what = "launch of plugin_kernel";
  if (e == cudaSuccess) {
    e = cudaDeviceSynchronize();
    what = "cudaDeviceSynchronize";
  }
  if (e != cudaSuccess)
    std::fprintf(stderr, "plugin: %s failed: code=%d (%s)\n", what, static_cast<int>(e), cudaGetErrorName(e));
  cudaFree(d);
  return static_cast<int>(e);
}
