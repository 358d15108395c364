// SPDX-License-Identifier: Apache-2.0
// The matrix kernel: kernels/saxpy.cuh, launched once so that the executable needs its image.
#include <cstdio>

#include "saxpy.cuh"

int main() {
  const cudaError_t err = cudaLaunchKernel(reinterpret_cast<const void*>(&ag_saxpy), dim3(1), dim3(1), nullptr, 0, nullptr);
  std::printf("%s\n", cudaGetErrorString(err));
  return 0;
}
