// SPDX-License-Identifier: Apache-2.0
// Sum of a float array with warp shuffles. One source for nvcc and NVRTC (see saxpy.cuh).
#ifndef ARCHGUARD_KERNELS_REDUCE_CUH
#define ARCHGUARD_KERNELS_REDUCE_CUH

// Launch with blockDim.x a multiple of 32 and at most 1024, any grid; *out must be zeroed
// first. Partial sums are doubles so that the result does not depend on the grid size
// beyond rounding of the final atomics (double atomicAdd needs CC >= 6.0: every target).
extern "C" __global__ void ag_reduce_sum(unsigned long long n, const float* __restrict__ x,
                                         double* __restrict__ out) {
  __shared__ double warp_sums[32];
  const unsigned long long stride = static_cast<unsigned long long>(blockDim.x) * gridDim.x;
  double sum = 0.0;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride)
    sum += static_cast<double>(x[i]);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    const unsigned warps = (blockDim.x + 31) / 32;
    sum = lane < warps ? warp_sums[lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) atomicAdd(out, sum);
  }
}

#endif
