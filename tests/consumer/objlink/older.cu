// SPDX-License-Identifier: Apache-2.0
__global__ void older_kernel(float* p) { p[threadIdx.x] *= 2.0f; }
