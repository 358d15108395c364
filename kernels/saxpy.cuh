// SPDX-License-Identifier: Apache-2.0
// saxpy: y = a*x + y. One source for nvcc (included by .cu files) and NVRTC (embedded as a
// string by kernels/CMakeLists.txt): no #include, extern "C" names, no host code.
#ifndef ARCHGUARD_KERNELS_SAXPY_CUH
#define ARCHGUARD_KERNELS_SAXPY_CUH

// Memory-bound: each thread moves 16-byte vectors (float4) in a grid-stride loop; the scalar
// tail covers n % 4. x and y must be 16-byte aligned (cudaMalloc/cuMemAlloc give 256).
extern "C" __global__ void ag_saxpy(unsigned long long n, float a, const float* __restrict__ x,
                                    float* __restrict__ y) {
  const unsigned long long stride = static_cast<unsigned long long>(blockDim.x) * gridDim.x;
  const unsigned long long first = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned long long n4 = n / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (unsigned long long i = first; i < n4; i += stride) {
    const float4 xv = x4[i];
    float4 yv = y4[i];
    yv.x = a * xv.x + yv.x;
    yv.y = a * xv.y + yv.y;
    yv.z = a * xv.z + yv.z;
    yv.w = a * xv.w + yv.w;
    y4[i] = yv;
  }
  for (unsigned long long i = n4 * 4 + first; i < n; i += stride) y[i] = a * x[i] + y[i];
}

#endif
