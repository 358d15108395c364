// SPDX-License-Identifier: Apache-2.0
// Kernels compiled both ways by the jit GPU test: ahead of time by nvcc into fatbins, and at run
// time by NVRTC. extern "C" keeps the names identical in both.
extern "C" __global__ void mix(unsigned* out, unsigned seed, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = static_cast<unsigned>(i) * 2654435761u ^ seed;
  v ^= v >> 13;
  v *= 0x5bd1e995u;
  v ^= v >> 15;
  out[i] = v;
}

extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
