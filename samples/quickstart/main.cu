// SPDX-License-Identifier: Apache-2.0
// quickstart: saxpy on device 0, every result checked. Exit 77 when there is no GPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

__global__ void saxpy(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("quickstart: no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const int n = 1 << 20;
  std::vector<float> x(n), y(n, 2.0f);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 256);
  float *dx = nullptr, *dy = nullptr;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  saxpy<<<(n + 255) / 256, 256>>>(n, 0.5f, dx, dy);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("quickstart: %s (%d): %s\n", cudaGetErrorName(e), static_cast<int>(e), cudaGetErrorString(e));
    return 1;
  }
  cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i)
    if (std::fabs(y[i] - (0.5f * x[i] + 2.0f)) > 1e-5f) {
      std::printf("quickstart: wrong result at %d\n", i);
      return 1;
    }
  std::printf("quickstart: saxpy on %s (compute capability %d.%d): all %d results correct\n", prop.name,
              prop.major, prop.minor, n);
  return 0;
}
