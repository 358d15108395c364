// SPDX-License-Identifier: Apache-2.0
// Built for sm_100 only, with device data and no kernel: a fatbin that decides nothing.
__device__ int stub_counter;
int* stub_address() {
  int* p = nullptr;
  cudaGetSymbolAddress(reinterpret_cast<void**>(&p), stub_counter);
  return p;
}
