// SPDX-License-Identifier: Apache-2.0
// The `rdc` case: a program built and device-linked with -rdc=true for the GPU's architecture
// that calls into librdc_sm80.a, whose relocatable device code is for sm_80 only. Its own kernel
// runs; the library's rdc_lib_kernel is not in the linked image and its launch fails.
// Prints code=<n> of the call that failed and exits 1.
#include <cuda_runtime.h>
#include <cstdio>

#include "check.cuh"

int rdc_lib_run(int* d_out);

__global__ void rdc_main_kernel(int* out) { out[threadIdx.x] = static_cast<int>(threadIdx.x); }

int main() {
  int* d = nullptr;
  CHECK(cudaMalloc(&d, 32 * sizeof(int)));
  rdc_main_kernel<<<1, 32>>>(d);
  CHECK_LAUNCHED();
  std::printf("rdc_main_kernel: ok\n");
  const int code = rdc_lib_run(d);
  if (code != 0) {
    std::printf("rdc_lib_run failed: code=%d (%s)\n", code, cudaGetErrorName(static_cast<cudaError_t>(code)));
    return 1;
  }
  CHECK(cudaFree(d));
  std::printf("rdc_lib_kernel: ok\n");
  return 0;
}
