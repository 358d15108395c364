// SPDX-License-Identifier: Apache-2.0
// Launches one kernel and checks its result: exit 0 only when the build's image ran here.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void fill(int* out) { out[threadIdx.x] = static_cast<int>(threadIdx.x) * 3; }

int main() {
  int* d = nullptr;
  if (cudaMalloc(&d, 32 * sizeof(int)) != cudaSuccess) return 1;
  fill<<<1, 32>>>(d);
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) {
    std::printf("launch failed: %s\n", cudaGetErrorString(launch));
    return 1;
  }
  int h[32] = {};
  if (cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  cudaFree(d);
  for (int i = 0; i < 32; ++i) {
    if (h[i] != i * 3) return 1;
  }
  std::printf("kernel ran\n");
  return 0;
}
