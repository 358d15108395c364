// SPDX-License-Identifier: Apache-2.0
// An executable whose own kernel covers CC 9.0 and which loads libold.so (DT_NEEDED, found
// through its DT_RUNPATH $ORIGIN/lib). Prints the CUDA error of each launch:
//   own=<n> lib=<n>
// and exits 0 only when both ran.
#include <cstdio>
#include <cuda_runtime.h>

extern "C" int old_library_launch();

__global__ void app_kernel(int* out) { *out = 90; }

int main() {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    std::printf("no gpu: %d\n", static_cast<int>(e));
    return 77;
  }
  int* d = nullptr;
  int own = static_cast<int>(cudaMalloc(&d, sizeof(int)));
  if (own == 0) {
    app_kernel<<<1, 1>>>(d);
    own = static_cast<int>(cudaGetLastError());
    if (own == 0) own = static_cast<int>(cudaDeviceSynchronize());
    cudaFree(d);
  }
  const int lib = old_library_launch();
  std::printf("own=%d lib=%d\n", own, lib);
  return own == 0 && lib == 0 ? 0 : 1;
}
