// SPDX-License-Identifier: Apache-2.0
// The `good` case: a program built for the GPU's own architecture. Its launches run, so
// `archguard run` must report no architecture failure and, with --predict, no disagreement.
// Prints code=<n> of a call that failed and exits 1; exits 0 when the results are right.
#include <cuda_runtime.h>
#include <cstdio>

#include "check.cuh"

__global__ void good_kernel(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 7 * i;
}

int main() {
  const int n = 1024;
  int* d = nullptr;
  static int h[n];
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  for (int round = 0; round < 3; ++round) {
    good_kernel<<<(n + 127) / 128, 128>>>(d, n);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d));
  for (int i = 0; i < n; ++i) {
    if (h[i] != 7 * i) {
      std::printf("wrong result at %d: %d\n", i, h[i]);
      return 1;
    }
  }
  std::printf("good_kernel: ok\n");
  return 0;
}
