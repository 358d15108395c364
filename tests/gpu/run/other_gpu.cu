// SPDX-License-Identifier: Apache-2.0
// Device code of the `cubin` case, built with `nvcc -cubin` for another architecture than the
// GPU's: cubin_loader loads the file with cuModuleLoad, which fails with
// CUDA_ERROR_NO_BINARY_FOR_GPU (209). Nothing of it is ever launched.
extern "C" __global__ void cubin_kernel(int* out) { out[threadIdx.x] = static_cast<int>(threadIdx.x) + 1; }
