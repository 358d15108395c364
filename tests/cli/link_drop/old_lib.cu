// SPDX-License-Identifier: Apache-2.0
// A static library member built with -rdc for sm_80 only (a hard-coded -gencode in its build).
// Device-linked into a program for sm_90, its kernel is missing from the linked sm_90 image and
// nvlink says nothing: the launch fails with cudaErrorSymbolNotFound (500) on a CC 9.0 GPU.
namespace legacy {
__global__ void old_scale(float* x, float s) { x[threadIdx.x] *= s; }
}  // namespace legacy
int launch_old(float* x) {
  legacy::old_scale<<<1, 32>>>(x, 2.0f);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return static_cast<int>(e);
}
