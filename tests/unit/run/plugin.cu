// SPDX-License-Identifier: Apache-2.0
// A plugin as a program dlopen()s it: one kernel, and a C function that hands the fake program
// the kernel's host function (what cudaLaunchKernel receives). Built by the run tests for one
// architecture (libplugin_sm80.so, libplugin_sm90.so).
__global__ void plugin_kernel(int* out) {
  if (out != nullptr) *out = 1;
}
extern "C" const void* archguard_test_kernel() { return reinterpret_cast<const void*>(&plugin_kernel); }
