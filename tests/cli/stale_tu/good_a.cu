// SPDX-License-Identifier: Apache-2.0
__global__ void good_a_kernel(float* x) { x[threadIdx.x] *= 2.0f; }
int launch_a(float* x) {
  good_a_kernel<<<1, 32>>>(x);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return static_cast<int>(e);
}
