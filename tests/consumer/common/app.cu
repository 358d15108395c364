// SPDX-License-Identifier: Apache-2.0
// A tiny kernel the consumer projects build under their policy.
__global__ void scale(float* x, float a, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] *= a;
}

int main() { return 0; }
