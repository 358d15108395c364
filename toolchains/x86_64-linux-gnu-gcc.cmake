# SPDX-License-Identifier: Apache-2.0
# Native x86-64 Linux with the system GCC and the CUDA toolkit at its standard prefix.
#   cmake -S . -B build --toolchain toolchains/x86_64-linux-gnu-gcc.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER gcc)
set(CMAKE_CXX_COMPILER g++)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
set(CMAKE_CUDA_HOST_COMPILER g++)
