// SPDX-License-Identifier: Apache-2.0
// The shared object that links librdc_sm80.a with -rdc for sm_90: its own kernel is in the linked
// sm_90 image, rdc_lib_kernel only in the library's relocatable sm_80 code.
extern __global__ void rdc_lib_kernel(int* out);
__global__ void rdc_own_kernel(int* out) {
  if (out != nullptr) *out = 3;
}
extern "C" const void* archguard_test_kernel() { return reinterpret_cast<const void*>(&rdc_lib_kernel); }
extern "C" const void* archguard_test_own_kernel() { return reinterpret_cast<const void*>(&rdc_own_kernel); }
