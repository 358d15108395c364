# SPDX-License-Identifier: Apache-2.0
# Jetson AGX Orin, Orin NX, Orin Nano (CC 8.7, Tegra), cross-built on x86-64.
#
# Policy: SASS sm_87 + PTX compute_87. Orin is a Tegra part: SASS has no minor-version
# compatibility there, so sm_87 runs on CC 8.7 only and an sm_86 build (RTX 30xx) does not run on
# Orin, nor does this build on CC 8.6 (209). The PTX lets later GPUs (Thor, CC 11.0) JIT it.
#
# Release: nvcc >= 11.4 targets sm_87. The CUDA runtime linked into the binary must be one the
# board's driver supports: JetPack 6.x (L4T r36) ships CUDA 12.6 with its cross toolkit
# (cuda-cross-aarch64-12-6, targets/aarch64-linux); a binary built with a newer toolkit (CUDA 13)
# needs a JetPack whose driver supports that release (see NVIDIA's JetPack release notes), or
# fails on the board with cudaErrorInsufficientDriver (35).
#
#   cmake -S . -B build-orin --toolchain toolchains/jetson-orin.cmake \
#         -DCMAKE_CUDA_COMPILER=<toolkit with targets/sbsa-linux or aarch64-linux>/bin/nvcc
include("${CMAKE_CURRENT_LIST_DIR}/cuda-board.cmake")
_cag_board(NAME "Jetson Orin" CC 8.7 POLICY 87 PTX highest CUDA 11.4
           NOTE "the board's JetPack must support the CUDA release built with (JetPack 6.x: CUDA 12.6)")
