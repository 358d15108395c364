// SPDX-License-Identifier: Apache-2.0
// Launches each translation unit's kernel on its own and prints "<kernel> <cuda error>", so that
// a GPU run can be compared with archguard check's per-kernel verdicts (tests/gpu/stale_tu.sh).
#include <cstdio>
int launch_a(float*);
int launch_b(float*);
int launch_old(float*);
int main() {
  float* x = nullptr;
  if (cudaMalloc(&x, 32 * sizeof(float)) != cudaSuccess) {
    std::printf("no device\n");
    return 77;
  }
  std::printf("good_a_kernel(float*) %d\n", launch_a(x));
  std::printf("good_b_kernel(float*, int) %d\n", launch_b(x));
  std::printf("legacy::stale_scale(float*, float) %d\n", launch_old(x));
  return 0;
}
