// SPDX-License-Identifier: Apache-2.0
// The `ptxonly` case: built with PTX of the GPU's architecture only (code=compute_XX, no SASS)
// and run with CUDA_DISABLE_PTX_JIT=1, so the driver may not compile the PTX and the launch of
// ptxonly_kernel fails although the code is "for" this GPU.
// Prints code=<n> of the call that failed and exits 1.
#include <cuda_runtime.h>
#include <cstdio>

#include "check.cuh"

__global__ void ptxonly_kernel(float* out) { out[threadIdx.x] = 0.5f * static_cast<float>(threadIdx.x); }

int main() {
  float* d = nullptr;
  CHECK(cudaMalloc(&d, 64 * sizeof(float)));
  ptxonly_kernel<<<1, 64>>>(d);
  CHECK_LAUNCHED();
  CHECK(cudaFree(d));
  std::printf("ptxonly_kernel: ok\n");
  return 0;
}
