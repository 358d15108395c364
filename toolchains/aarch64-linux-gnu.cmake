# SPDX-License-Identifier: Apache-2.0
# Cross-compiling C/C++ for 64-bit Arm Linux from x86-64 with Debian's g++-aarch64-linux-gnu.
# Third-party libraries must exist for arm64 under CMAKE_SYSROOT (or Debian multiarch
# /usr/lib/aarch64-linux-gnu). For CUDA code use the file of the board instead (jetson-orin,
# jetson-thor, grace-hopper, grace-blackwell): they pin the board's architectures and check that
# the toolkit has the Arm target (targets/sbsa-linux; scripts/setup-cross.sh lays one out).
#   cmake -S . -B build-arm64 --toolchain toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CUDA_HOST_COMPILER aarch64-linux-gnu-g++)
if(EXISTS /usr/local/cuda/targets/sbsa-linux)
  set(CUDAToolkit_TARGET_DIR /usr/local/cuda/targets/sbsa-linux)
endif()
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
# Cross-built test binaries run under qemu-user when available.
find_program(_cag_qemu qemu-aarch64-static qemu-aarch64)
if(_cag_qemu)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${_cag_qemu};-L;/usr/aarch64-linux-gnu")
endif()
