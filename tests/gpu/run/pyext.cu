// SPDX-License-Identifier: Apache-2.0
// The library of the `pyext` case, standing for a Python extension: built with sm_80 SASS only
// and loaded by pyext.py with ctypes.CDLL. pyext_run() launches pyext_kernel and returns the
// cudaError_t (209, no kernel image, on a GPU that is not 8.x).
#include <cuda_runtime.h>
#include <cstdio>

__global__ void pyext_kernel(int* out) { out[threadIdx.x] = static_cast<int>(threadIdx.x) * 3; }

extern "C" __attribute__((visibility("default"))) int pyext_run(void) {
  int* d = nullptr;
  cudaError_t e = cudaMalloc(&d, 32 * sizeof(int));
  if (e != cudaSuccess) {
    std::fprintf(stderr, "pyext: cudaMalloc failed: code=%d (%s)\n", static_cast<int>(e), cudaGetErrorName(e));
    return static_cast<int>(e);
  }
  pyext_kernel<<<1, 32>>>(d);
  e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess)
    std::fprintf(stderr, "pyext: pyext_kernel failed: code=%d (%s)\n", static_cast<int>(e), cudaGetErrorName(e));
  cudaFree(d);
  return static_cast<int>(e);
}
