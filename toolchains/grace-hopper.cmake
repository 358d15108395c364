# SPDX-License-Identifier: Apache-2.0
# Grace Hopper GH200 servers (Arm Neoverse V2 host, H100/H200-class GPU, CC 9.0), cross-built on
# x86-64 with the CUDA Arm (SBSA) toolkit.
#
# Policy: SASS sm_90a + PTX compute_90. sm_90a is the Hopper arch-specific target: it runs on
# CC 9.0 only and unlocks wgmma / setmaxnreg / TMA multicast that plain sm_90 cannot use, which is
# why Hopper kernels are worth building for it. It has no forward compatibility, so the plain
# compute_90 PTX is kept: Blackwell (CC 10.0 and later) JIT-compiles it. Pre-Hopper GPUs (8.x)
# cannot run this build (209).
#
# Release: CUDA >= 12.0 (sm_90a); the server's driver must support the release built with.
#
#   cmake -S . -B build-gh200 --toolchain toolchains/grace-hopper.cmake \
#         -DCMAKE_CUDA_COMPILER=<toolkit with targets/sbsa-linux>/bin/nvcc
include("${CMAKE_CURRENT_LIST_DIR}/cuda-board.cmake")
_cag_board(NAME "Grace Hopper GH200" CC 9.0 POLICY 90a PTX highest CUDA 12.0
           NOTE "sm_90a needs CUDA 12.0 or later")
