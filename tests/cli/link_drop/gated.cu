// SPDX-License-Identifier: Apache-2.0
// A translation unit whose source leaves a kernel out of the images of older architectures (the
// `#if __CUDA_ARCH__` pattern of ctranslate2's gemv_gpu.cu): built for sm_80 and sm_90, the
// sm_80 image defines plain_kernel only. On CC 8.x the driver takes the sm_80 image and
// gated_kernel has no code there; on CC 9.0 both run. GATE moves the threshold (the GPU test
// builds with -DGATE=1000 for sm_90 + sm_100, so that a CC 9.0 GPU takes the image without it).
#include <cstdio>
#ifndef GATE
#define GATE 900
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= GATE
__global__ void gated_kernel(float* x) { x[threadIdx.x] += 1.0f; }
#endif
__global__ void plain_kernel(float* x) { x[threadIdx.x] -= 1.0f; }
static int finish() {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return static_cast<int>(e);
}
int main() {
  float* x = nullptr;
  if (cudaMalloc(&x, 32 * sizeof(float)) != cudaSuccess) {
    std::printf("no device\n");
    return 77;
  }
  plain_kernel<<<1, 32>>>(x);
  std::printf("plain_kernel(float*) %d\n", finish());
#if !defined(__CUDA_ARCH__)  // the device passes compile host code too; sm_80's has no gated_kernel
  gated_kernel<<<1, 32>>>(x);
#endif
  std::printf("gated_kernel(float*) %d\n", finish());
  return 0;
}
