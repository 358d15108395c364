// SPDX-License-Identifier: Apache-2.0
// The `ptxonly` case: built with PTX of the GPU's architecture only (code=compute_XX, no SASS)
// and run with CUDA_DISABLE_PTX_JIT=1, so the driver may not compile the PTX and the launch of
// ptxonly_kernel fails although the code is "for" this GPU.
// Prints code=<n> of the call that failed and exits 1.
#include <cuda_runtime.h>
#include <cstdio>

__global__ void ptxonly_kernel(float* out) { out[threadIdx.x] = 0.5f * static_cast<float>(threadIdx.x); }

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::printf("%s failed: code=%d (%s)\n", #call, static_cast<int>(e_), cudaGetErrorName(e_)); \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main() {
  float* d = nullptr;
  CHECK(cudaMalloc(&d, 64 * sizeof(float)));
  ptxonly_kernel<<<1, 64>>>(d);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(d));
  std::printf("ptxonly_kernel: ok\n");
  return 0;
}
