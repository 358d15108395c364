// SPDX-License-Identifier: Apache-2.0
// no-kernel-image: the real failure. The same source is built twice (see CMakeLists.txt):
//   no_kernel_image_broken  sm_80 SASS only, nothing else (a build for an A100, run elsewhere)
//   no_kernel_image_fixed   the project's policy (every major architecture + PTX)
// It launches saxpy and checks every element, reporting the exact CUDA error on failure.
//   --expect-failure  exit 0 only when the launch fails with 209 (used by the smoke test)
#include "../common/sample_util.cuh"
#include "saxpy.cuh"

#include <cmath>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const bool expect_failure = argc > 1 && std::strcmp(argv[1], "--expect-failure") == 0;
  const cudaDeviceProp prop = sample::require_gpu(argv[0]);
  if (expect_failure && prop.major == 8 && prop.minor != 7) {
    std::printf("this gpu (%d.%d) can run sm_80 sass: the failure cannot be shown here: skipped\n", prop.major,
                prop.minor);
    return sample::kSkip;
  }

  const unsigned long long n = 1 << 20;
  std::vector<float> x(n), y(n, 1.0f);
  for (unsigned long long i = 0; i < n; ++i) x[i] = static_cast<float>(i % 100);
  float *dx = nullptr, *dy = nullptr;
  // These succeed even when no kernel can run: memory work needs no kernel image.
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  std::printf("cudaMalloc and cudaMemcpy succeeded\n");

  ag_saxpy<<<256, 256>>>(n, 2.0f, dx, dy);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    sample::print_error("launching ag_saxpy", e);
    if (expect_failure && e == cudaErrorNoKernelImageForDevice) {
      std::printf("as expected: this binary has no image for compute capability %d.%d\n", prop.major, prop.minor);
      return 0;
    }
    return 1;
  }
  cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (unsigned long long i = 0; i < n; ++i) {
    if (std::fabs(y[i] - (1.0f + 2.0f * x[i])) > 1e-5f) {
      std::printf("wrong result at %llu: %f\n", i, y[i]);
      return 1;
    }
  }
  std::printf("saxpy ran and all %llu results are correct\n", n);
  if (expect_failure) {
    std::printf("expected error 209, but the kernel ran\n");
    return 1;
  }
  return 0;
}
