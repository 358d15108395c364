# SPDX-License-Identifier: Apache-2.0
# Scenario script: misuse of the public function cuda_arch_guard_resolve_policy(), one CASE per run.
cmake_policy(VERSION 3.18)
include("${MODULE_DIR}/CudaArchGuardPolicy.cmake")
if(CASE STREQUAL "unknown_argument")
  cuda_arch_guard_resolve_policy(POLICY all-major NVCC "${NVCC}" BOGUS 1)
elseif(CASE STREQUAL "no_nvcc")
  cuda_arch_guard_resolve_policy(POLICY all-major)
elseif(CASE STREQUAL "prefix")
  cuda_arch_guard_resolve_policy(POLICY "8.6;9.0" NVCC "${NVCC}" PREFIX mine)
  message(STATUS "mine_ARCHITECTURES=${mine_ARCHITECTURES} mine_TORCH_ARCH_LIST=${mine_TORCH_ARCH_LIST}")
else()
  message(FATAL_ERROR "misuse.cmake: unknown CASE '${CASE}'")
endif()
