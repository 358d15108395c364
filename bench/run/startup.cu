// SPDX-License-Identifier: Apache-2.0
// Benchmark program of bench_run.sh: CUDA start-up only (cudaFree(0) creates the context),
// then exit; the wall time of the process, plain and under `archguard run`, gives the start-up
// cost `archguard run` adds. Prints "startup_ms=<ms>" (measured inside the program); on a CUDA
// error prints code=<n> and exits 1.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>

int main() {
  const auto t0 = std::chrono::steady_clock::now();
  cudaError_t e = cudaFree(0);
  if (e != cudaSuccess) {
    std::printf("cudaFree(0) failed: code=%d (%s)\n", static_cast<int>(e), cudaGetErrorName(e));
    return 1;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("startup_ms=%.3f\n", ms);
  return 0;
}
