// SPDX-License-Identifier: Apache-2.0
// Test fixture: two kernels, one C++ (mangled, templated) and one extern "C".
namespace fixture {
template <class T>
__global__ void scale(T a, T* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
template __global__ void scale<float>(float, float*, int);
}  // namespace fixture

extern "C" __global__ void fixture_fill(int* p, int v) { p[threadIdx.x] = v; }
