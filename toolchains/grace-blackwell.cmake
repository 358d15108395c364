# SPDX-License-Identifier: Apache-2.0
# Grace Blackwell GB200 (CC 10.0) and GB300 (Blackwell Ultra, CC 10.3) servers, cross-built on
# x86-64 with the CUDA Arm (SBSA) toolkit.
#
# Policy: SASS sm_100f + PTX compute_100. The family-specific sm_100f runs on every member of the
# 10.0 family (CC 10.0 and 10.3), so one image serves both GB200 and GB300 and may still use the
# family's features (tcgen05); sm_100a would run on 10.0 only. The plain compute_100 PTX lets
# later architectures JIT it.
#
# Release: CUDA >= 12.9 (sm_100f, and the first release that targets GB300's sm_103); the
# server's driver must support the release built with.
#
#   cmake -S . -B build-gb200 --toolchain toolchains/grace-blackwell.cmake \
#         -DCMAKE_CUDA_COMPILER=<toolkit with targets/sbsa-linux>/bin/nvcc
include("${CMAKE_CURRENT_LIST_DIR}/cuda-board.cmake")
_cag_board(NAME "Grace Blackwell GB200/GB300" CC 10.0 POLICY 100f PTX highest CUDA 12.9
           NOTE "sm_100f needs CUDA 12.9 or later")
