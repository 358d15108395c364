# SPDX-License-Identifier: Apache-2.0
# Cross-compiling C/C++ for 64-bit Arm Linux from x86-64 with Debian's g++-aarch64-linux-gnu.
# Third-party libraries must exist for arm64 under CMAKE_SYSROOT (or Debian multiarch
# /usr/lib/aarch64-linux-gnu). For CUDA code use the file of the board instead (jetson-orin,
# jetson-thor, grace-hopper, grace-blackwell): they pin the board's architectures and check that
# the toolkit has the Arm target (targets/sbsa-linux; scripts/setup-cross.sh lays one out).
#   cmake -S . -B build-arm64 --toolchain toolchains/aarch64-linux-gnu.cmake
include("${CMAKE_CURRENT_LIST_DIR}/aarch64-common.cmake")
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CUDA_HOST_COMPILER aarch64-linux-gnu-g++)
if(EXISTS /usr/local/cuda/targets/sbsa-linux)
  set(CUDAToolkit_TARGET_DIR /usr/local/cuda/targets/sbsa-linux)
endif()
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
