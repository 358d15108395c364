// SPDX-License-Identifier: Apache-2.0
// C = A * B for row-major float matrices (A: M x K, B: K x N, C: M x N).
// One source for nvcc and NVRTC (see saxpy.cuh). Two paths in one kernel:
//   - tensor cores (CC >= 8.0): mma.sync m16n8k8 with TF32 inputs and FP32 accumulation;
//   - plain FP32 FMA, compiled for every target and used when use_tensor_cores == 0 or when
//     the image was compiled for an architecture below 8.0.
// Launch: blockDim = (128, 1, 1), gridDim = (ceil(N / 32), ceil(M / 32)). Any M, N, K >= 1.
#ifndef ARCHGUARD_KERNELS_MATMUL_CUH
#define ARCHGUARD_KERNELS_MATMUL_CUH

#define AG_MM_TILE 32
#define AG_MM_KT 16
#define AG_MM_THREADS 128

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define AG_MM_HAS_TENSOR_CORES 1
__device__ __forceinline__ unsigned ag_to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;"
      : "=r"(r)
      : "f"(x));
  return r;
}
#endif

// The A/B tiles are padded (+4 / +8 floats per row) so that the fragment loads of the
// tensor-core path hit 32 different banks.
extern "C" __global__ void __launch_bounds__(AG_MM_THREADS)
    ag_matmul(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
              float* __restrict__ C, int use_tensor_cores) {
  __shared__ float As[AG_MM_TILE][AG_MM_KT + 4];
  __shared__ float Bs[AG_MM_KT][AG_MM_TILE + 8];
  const int tid = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * AG_MM_TILE;
  const int col0 = static_cast<int>(blockIdx.x) * AG_MM_TILE;
#ifdef AG_MM_HAS_TENSOR_CORES
  const bool tc = use_tensor_cores != 0;
#else
  const bool tc = false;
  (void)use_tensor_cores;
#endif
  // Tensor path: warp w owns rows (w / 2) * 16 .. +16 and columns (w % 2) * 16 .. +16 as two
  // m16n8 tiles, 4 accumulators each. Plain path: thread t owns column t % 32 and rows
  // (t / 32) * 8 .. +8.
  float acc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += AG_MM_KT) {
    for (int i = tid; i < AG_MM_TILE * AG_MM_KT; i += AG_MM_THREADS) {
      const int r = i / AG_MM_KT, c = i % AG_MM_KT;
      const int gr = row0 + r, gc = k0 + c;
      As[r][c] = (gr < M && gc < K) ? A[static_cast<unsigned long long>(gr) * K + gc] : 0.0f;
    }
    for (int i = tid; i < AG_MM_KT * AG_MM_TILE; i += AG_MM_THREADS) {
      const int r = i / AG_MM_TILE, c = i % AG_MM_TILE;
      const int gr = k0 + r, gc = col0 + c;
      Bs[r][c] = (gr < K && gc < N) ? B[static_cast<unsigned long long>(gr) * N + gc] : 0.0f;
    }
    __syncthreads();
    if (tc) {
#ifdef AG_MM_HAS_TENSOR_CORES
      const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
      const int wr = (warp / 2) * 16, wc = (warp % 2) * 16;
#pragma unroll
      for (int kk = 0; kk < AG_MM_KT; kk += 8) {
        const unsigned a0 = ag_to_tf32(As[wr + g][kk + t]);
        const unsigned a1 = ag_to_tf32(As[wr + g + 8][kk + t]);
        const unsigned a2 = ag_to_tf32(As[wr + g][kk + t + 4]);
        const unsigned a3 = ag_to_tf32(As[wr + g + 8][kk + t + 4]);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const unsigned b0 = ag_to_tf32(Bs[kk + t][wc + nt * 8 + g]);
          const unsigned b1 = ag_to_tf32(Bs[kk + t + 4][wc + nt * 8 + g]);
          asm volatile(
              "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
              "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
              : "+f"(acc[nt * 4 + 0]), "+f"(acc[nt * 4 + 1]), "+f"(acc[nt * 4 + 2]), "+f"(acc[nt * 4 + 3])
              : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
      }
#endif
    } else {
      const int c = tid % 32, rbase = (tid / 32) * 8;
#pragma unroll
      for (int k = 0; k < AG_MM_KT; ++k) {
        const float b = Bs[k][c];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] += As[rbase + j][k] * b;
      }
    }
    __syncthreads();
  }

  if (tc) {
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int wr = (warp / 2) * 16, wc = (warp % 2) * 16;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = row0 + wr + g + (i >= 2 ? 8 : 0);
        const int c = col0 + wc + nt * 8 + t * 2 + (i & 1);
        if (r < M && c < N) C[static_cast<unsigned long long>(r) * N + c] = acc[nt * 4 + i];
      }
    }
  } else {
    const int c = col0 + tid % 32, rbase = row0 + (tid / 32) * 8;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (rbase + j < M && c < N) C[static_cast<unsigned long long>(rbase + j) * N + c] = acc[j];
  }
}

#endif
