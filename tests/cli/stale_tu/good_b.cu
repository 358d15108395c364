// SPDX-License-Identifier: Apache-2.0
__global__ void good_b_kernel(float* x, int n) {
  if (threadIdx.x < n) x[threadIdx.x] += 1.0f;
}
int launch_b(float* x) {
  good_b_kernel<<<1, 32>>>(x, 32);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return static_cast<int>(e);
}
