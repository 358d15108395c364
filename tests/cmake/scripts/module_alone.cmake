# SPDX-License-Identifier: Apache-2.0
# Scenario script: one module included alone (MODULE=<name>) does its work with what it
# includes itself: Detect finds GPUs (it once failed with Unknown CMake command
# "_cag_sm_to_cc"), Toolkit asks nvcc, Tokens reads and formats a list.
cmake_policy(VERSION 3.18)
include("${MODULE_DIR}/${MODULE}.cmake")
if(MODULE STREQUAL "CudaArchGuardDetect")
  _cag_detect_gpus("${NVIDIA_SMI}" "${NVCC}" "" _g)
  message(STATUS "alone: GPUS=${_g_NAMES} SOURCE=${_g_SOURCE}")
elseif(MODULE STREQUAL "CudaArchGuardToolkit")
  _cag_nvcc_query("${NVCC}" "" _n)
  message(STATUS "alone: VERSION=${_n_VERSION} SASS=${_n_SASS}")
elseif(MODULE STREQUAL "CudaArchGuardTokens")
  _cag_tokens_parse("8.0;9.0+PTX" _items _err)
  _cag_tokens_format("${_items}" cmake _out)
  message(STATUS "alone: ${_out}")
else()
  message(FATAL_ERROR "module_alone: no case for MODULE=${MODULE}")
endif()
