// SPDX-License-Identifier: Apache-2.0
// Small helpers the samples share: the GPU check (exit 77 = skipped, for CTest) and error text.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace sample {

inline constexpr int kSkip = 77;

/// Device 0's properties, or exit 77 when the machine has no usable GPU or driver.
inline cudaDeviceProp require_gpu(const char* program) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf("%s: no CUDA device (%s, %d): skipped\n", program,
                e != cudaSuccess ? cudaGetErrorName(e) : "0 devices", static_cast<int>(e));
    std::exit(kSkip);
  }
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  std::printf("device 0: %s, compute capability %d.%d\n", p.name, p.major, p.minor);
  return p;
}

/// "cudaErrorNoKernelImageForDevice (209): no kernel image is available for execution on the device"
inline void print_error(const char* what, cudaError_t e) {
  std::printf("%s: %s (%d): %s\n", what, cudaGetErrorName(e), static_cast<int>(e), cudaGetErrorString(e));
}

}  // namespace sample
