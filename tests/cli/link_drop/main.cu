// SPDX-License-Identifier: Apache-2.0
// Launches each kernel on its own and prints "<kernel> <cuda error>" (compared with archguard
// check's per-kernel verdicts on a GPU: tests/gpu/link_drop).
#include <cstdio>
int launch_old(float*);
int launch_new(float*);
int main() {
  float* x = nullptr;
  if (cudaMalloc(&x, 32 * sizeof(float)) != cudaSuccess) {
    std::printf("no device\n");
    return 77;
  }
  std::printf("new_scale(float*) %d\n", launch_new(x));
  std::printf("legacy::old_scale(float*, float) %d\n", launch_old(x));
  return 0;
}
