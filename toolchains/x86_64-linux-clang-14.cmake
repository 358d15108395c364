# SPDX-License-Identifier: Apache-2.0
# Native x86-64 Linux with clang 14 (used for the libFuzzer targets and sanitizer builds).
# nvcc keeps g++ as its host compiler: CUDA 13.0 supports clang as host only from 14 up and
# the kernels gain nothing from it.
#   cmake -S . -B build --toolchain toolchains/x86_64-linux-clang-14.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER clang-14)
set(CMAKE_CXX_COMPILER clang++-14)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
set(CMAKE_CUDA_HOST_COMPILER g++)
