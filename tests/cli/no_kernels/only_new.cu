// SPDX-License-Identifier: Apache-2.0
// Built for sm_100 only, with a kernel of its own: that kernel fails with 209 on CC 9.0.
__global__ void only_on_new_gpus(float* x) { x[threadIdx.x] += 1.0f; }
void launch_only(float* x) { only_on_new_gpus<<<1, 32>>>(x); }
