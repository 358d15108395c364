// SPDX-License-Identifier: Apache-2.0
// Sum of a float array with an architecture-specific path. One source for nvcc and NVRTC.
//   - CC >= 9.0 images: the blocks of a thread-block cluster add their partial sums through
//     distributed shared memory (mapa + ld.shared::cluster), one atomic per cluster;
//   - every other image: one atomic per block (portable fallback).
// Both give the same sum; a launch without a cluster attribute is a cluster of one block.
// Thread 0 of block 0 also writes *image_tag = ag_image_tag(): which image's code ran, so a
// program can report the image the driver picked (PTX JIT-compiled for a newer GPU still
// reports the virtual architecture it was written for).
// Launch: blockDim.x a multiple of 32, at most 1024; *out zeroed first.
#ifndef ARCHGUARD_KERNELS_CLUSTER_SUM_CUH
#define ARCHGUARD_KERNELS_CLUSTER_SUM_CUH

// 10 * __CUDA_ARCH__ + variant: 0 plain, 1 arch-specific ('a'), 2 family-specific ('f').
// e.g. 9001 = sm_90a / compute_90a, 9000 = sm_90, 8000 = compute_80 PTX JIT-compiled.
__device__ __forceinline__ unsigned ag_image_tag() {
#if defined(__CUDA_ARCH_SPECIFIC__)
  return __CUDA_ARCH__ * 10u + 1u;
#elif defined(__CUDA_ARCH_FAMILY_SPECIFIC__)
  return __CUDA_ARCH__ * 10u + 2u;
#elif defined(__CUDA_ARCH__)
  return __CUDA_ARCH__ * 10u;
#else
  return 0u;
#endif
}

extern "C" __global__ void ag_cluster_sum(unsigned long long n, const float* __restrict__ x,
                                          double* __restrict__ out, unsigned* __restrict__ image_tag) {
  __shared__ double warp_sums[32];
  __shared__ double block_sum;
  const unsigned long long stride = static_cast<unsigned long long>(blockDim.x) * gridDim.x;
  double sum = 0.0;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride)
    sum += static_cast<double>(x[i]);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w) s += warp_sums[w];
    block_sum = s;
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) *image_tag = ag_image_tag();
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Cluster path: every block publishes block_sum, rank 0 gathers them over DSMEM; the second
  // barrier keeps the other blocks (and their shared memory) alive until rank 0 has read.
  unsigned rank, ranks;
  asm volatile("mov.u32 %0, %%cluster_ctarank;"
               : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;"
               : "=r"(ranks));
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
  if (rank == 0 && threadIdx.x == 0) {
    const unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(&block_sum));
    double total = 0.0;
    for (unsigned r = 0; r < ranks; ++r) {
      unsigned remote;
      double v;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                   : "=r"(remote)
                   : "r"(local), "r"(r));
      asm volatile("ld.shared::cluster.f64 %0, [%1];"
                   : "=d"(v)
                   : "r"(remote)
                   : "memory");
      total += v;
    }
    atomicAdd(out, total);
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
#else
  if (threadIdx.x == 0) atomicAdd(out, block_sum);
#endif
}

#endif
