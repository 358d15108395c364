// SPDX-License-Identifier: Apache-2.0
// The static library of the `rdc` case (librdc_sm80.a): relocatable device code for sm_80 only.
// Device-linked into a program for the GPU's architecture, it contributes no device code to the
// linked image, so the launch of rdc_lib_kernel in rdc_lib_run() fails at run time.
#include <cuda_runtime.h>

__device__ int rdc_lib_scale(int v) { return 5 * v; }

__global__ void rdc_lib_kernel(int* out) { out[threadIdx.x] = rdc_lib_scale(static_cast<int>(threadIdx.x)); }

// Returns the cudaError_t of the launch (or of the call before it that failed).
int rdc_lib_run(int* d_out) {
  rdc_lib_kernel<<<1, 32>>>(d_out);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return static_cast<int>(e);
}
