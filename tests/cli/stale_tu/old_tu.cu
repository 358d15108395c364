// SPDX-License-Identifier: Apache-2.0
// Scenario of issue 9: this translation unit is built for sm_80/86 only (a hard-coded -gencode).
namespace legacy {
__global__ void stale_scale(float* x, float s) { x[threadIdx.x] *= s; }
}  // namespace legacy
int launch_old(float* x) {
  legacy::stale_scale<<<1, 32>>>(x, 3.0f);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return static_cast<int>(e);
}
