# SPDX-License-Identifier: Apache-2.0
# Included by aarch64-linux-gnu.cmake and cuda-board.cmake; not a toolchain file itself: the
# target (Linux on aarch64), where an arm64 cross build finds its libraries and headers (Debian's
# sysroot /usr/aarch64-linux-gnu and multiarch /usr/lib/aarch64-linux-gnu; programs come from
# the build host) and qemu-aarch64, when installed, as the emulator of cross-built programs.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
find_program(_cag_qemu NAMES qemu-aarch64-static qemu-aarch64)
if(_cag_qemu)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${_cag_qemu};-L;/usr/aarch64-linux-gnu")
endif()
