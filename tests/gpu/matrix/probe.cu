// SPDX-License-Identifier: Apache-2.0
// The matrix probe: kernels/cluster_sum.cuh through the CUDA runtime, built once per fatbin
// composition by matrix.sh. Prints one line the script parses:
//   ok tag=<image tag> first_launch_ms=<ms>      (exit 0)
//   error code=<n> name=<cudaError name>         (exit 10)
// and exits 77 when there is no GPU.
#include "cluster_sum.cuh"
#include "cluster_sum_host.cuh"

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("skip no device\n");
    return 77;
  }
  const unsigned long long n = 1 << 20;
  const AgClusterSum in = AgClusterSum::prepare(n, [](unsigned long long i) { return static_cast<float>(i % 64); });
  const auto t0 = std::chrono::steady_clock::now();
  ag_cluster_sum<<<128, 256>>>(n, in.x, in.sum, in.tag);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (e != cudaSuccess) {
    std::printf("error code=%d name=%s\n", static_cast<int>(e), cudaGetErrorName(e));
    return 10;
  }
  double got = 0;
  unsigned tag = 0;
  in.result(got, tag);
  if (std::fabs(got - in.want) > 1e-6 * in.want) {
    std::printf("wrong sum=%f want=%f\n", got, in.want);
    return 1;
  }
  std::printf("ok tag=%u first_launch_ms=%.3f\n", tag, ms);
  return 0;
}
