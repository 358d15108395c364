// SPDX-License-Identifier: Apache-2.0
// Built for sm_80 only (CMakeLists.txt): the library then lacks the required sm_90.
__global__ void stale_add(float* x, float a) { x[threadIdx.x] += a; }
extern "C" void launch_stale_add(float* x, float a) { stale_add<<<1, 32>>>(x, a); }
