// SPDX-License-Identifier: Apache-2.0
// A shared library built for sm_80 only (SASS, no PTX): on any GPU that is not CC 8.x its kernel
// fails with 209 at launch, however well the program that loads it is built.
#include <cuda_runtime.h>

__global__ void old_library_kernel(int* out) { *out = 80; }

extern "C" int old_library_launch() {
  int* d = nullptr;
  if (cudaError_t e = cudaMalloc(&d, sizeof(int)); e != cudaSuccess) return static_cast<int>(e);
  old_library_kernel<<<1, 1>>>(d);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  cudaFree(d);
  return static_cast<int>(e);
}
