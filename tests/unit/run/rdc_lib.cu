// SPDX-License-Identifier: Apache-2.0
// A relocatable (-rdc) static library built for one architecture (librdc_sm80.a in the tests),
// device-linked into a shared object for another: nvlink drops its kernel without a word.
__global__ void rdc_lib_kernel(int* out) {
  if (out != nullptr) *out = 2;
}
