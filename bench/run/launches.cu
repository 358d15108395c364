// SPDX-License-Identifier: Apache-2.0
// Benchmark program of bench_run.sh: 10^5 launches of a tiny kernel (1 block of 32 threads)
// and one cudaDeviceSynchronize, timed inside the program with std::chrono::steady_clock, so
// that the cost `archguard run` adds to each launch shows apart from start-up.
// Prints "launch_loop_ms=<ms> total_ms=<ms>"; on a CUDA error prints code=<n> and exits 1.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>

#include "../../tests/gpu/run/check.cuh"

__global__ void tiny_kernel(int* out) {
  if (out != nullptr && threadIdx.x == 0 && blockIdx.x == 0) out[0] += 1;
}

static double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int main() {
  const auto start = std::chrono::steady_clock::now();
  const int launches = 100000;
  int* d = nullptr;
  CHECK(cudaMalloc(&d, sizeof(int)));
  CHECK(cudaMemset(d, 0, sizeof(int)));
  // One launch before the clock starts: the module load (lazy loading) is not in the loop.
  tiny_kernel<<<1, 32>>>(d);
  CHECK_LAUNCHED();
  const auto loop = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i) {
    tiny_kernel<<<1, 32>>>(d);
  }
  CHECK_LAUNCHED();
  const double loop_ms = ms_since(loop);
  int h = 0;
  CHECK(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d));
  if (h != launches + 1) {
    std::printf("counter is %d, %d launches were made\n", h, launches + 1);
    return 1;
  }
  std::printf("launch_loop_ms=%.3f total_ms=%.3f\n", loop_ms, ms_since(start));
  return 0;
}
