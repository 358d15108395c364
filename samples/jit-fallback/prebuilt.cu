// SPDX-License-Identifier: Apache-2.0
// The prebuilt path of jit-fallback: saxpy from kernels/saxpy.cuh, compiled (on purpose) for
// sm_75 SASS only, so that no GPU newer than Turing can run it. Called only when the
// self-check says it can run (or with --prebuilt-only, to show the failure).
#include "saxpy.cuh"

#include <cuda_runtime.h>

#include <cstdio>

extern "C" int jf_prebuilt_saxpy(unsigned long long n, float a, const float* x, float* y, char* error,
                                 unsigned error_size) {
  float *dx = nullptr, *dy = nullptr;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
  ag_saxpy<<<256, 256>>>(n, a, dx, dy);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  if (e != cudaSuccess)
    std::snprintf(error, error_size, "%s (%d): %s", cudaGetErrorName(e), static_cast<int>(e), cudaGetErrorString(e));
  return static_cast<int>(e);
}
