# SPDX-License-Identifier: Apache-2.0
# Jetson AGX Thor (CC 11.0), cross-built on x86-64 with the CUDA 13 Arm (SBSA) toolkit.
#
# Policy: SASS sm_110 + PTX compute_110. Before CUDA 13.0 nvcc named Thor sm_101 (CC 10.1);
# JetPack 7's CUDA 13.0 driver reports CC 11.0, where sm_101 images do not load: this file refuses
# an nvcc older than 13.0.
#
# Release: CUDA >= 13.0 (JetPack 7.0 and later, L4T r38). CUDA 13 uses one Arm toolkit for
# servers and Thor: the target directory is targets/sbsa-linux.
#
#   cmake -S . -B build-thor --toolchain toolchains/jetson-thor.cmake \
#         -DCMAKE_CUDA_COMPILER=<CUDA 13 toolkit with targets/sbsa-linux>/bin/nvcc
include("${CMAKE_CURRENT_LIST_DIR}/cuda-board.cmake")
_cag_board(NAME "Jetson AGX Thor" CC 11.0 POLICY 110 PTX highest CUDA 13.0
           NOTE "Thor needs CUDA 13.0 or later (JetPack 7)")
