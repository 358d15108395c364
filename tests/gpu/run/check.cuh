// SPDX-License-Identifier: Apache-2.0
// The runtime API checks of the run cases' programs (and bench/run/launches.cu): a call that
// fails prints "<call> failed: code=<n> (<name>)" (run_mode.sh takes the first code=<n>) and
// makes main return 1.
#pragma once
#include <cuda_runtime.h>
#include <cstdio>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::printf("%s failed: code=%d (%s)\n", #call, static_cast<int>(e_), cudaGetErrorName(e_)); \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

// The last launch was accepted, and it (with everything before it) ran.
#define CHECK_LAUNCHED()            \
  do {                              \
    CHECK(cudaGetLastError());      \
    CHECK(cudaDeviceSynchronize()); \
  } while (0)
