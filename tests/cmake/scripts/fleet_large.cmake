# SPDX-License-Identifier: Apache-2.0
# Scenario script: a 100,000-line fleet file (12,500 nodes of 8 lines) resolved by the module.
# The CMake reader it replaced took 145 s on such a file; the engine's reader takes well under
# a second. Fails above LIMIT seconds (default 10: generous for a loaded test machine).
cmake_policy(VERSION 3.18)
include("${MODULE_DIR}/CudaArchGuardPolicy.cmake")
if(ARCHGUARD)
  set(CudaArchGuard_EXECUTABLE "${ARCHGUARD}")
endif()
if(NOT LIMIT)
  set(LIMIT 10)
endif()
set(_node "name, compute_cap\nNVIDIA A100-SXM4-80GB, 8.0\nNVIDIA H100 80GB HBM3, 9.0\nNVIDIA H100 80GB HBM3, 9.0\nNVIDIA L40S, 8.9\nNVIDIA L40S, 8.9\nNVIDIA GeForce RTX 5090, 12.0\nNVIDIA GeForce RTX 5090, 12.0\n")
string(REPEAT "${_node}" 12500 _text)
# A name of its own: the cmake.* and matrix.* variants of this scenario run in parallel and share
# the directory (one wrote the file while another read it: a torn line, a failed test).
string(RANDOM LENGTH 12 _tag)
set(_file "${CudaArchGuard_VERIFIER_DIR}/fleet-100k-${CMAKE_VERSION}-${_tag}.csv")
file(WRITE "${_file}" "${_text}")
string(TIMESTAMP _t0 "%s")
cuda_arch_guard_resolve_policy(POLICY "fleet:${_file}" NVCC "${NVCC}")
string(TIMESTAMP _t1 "%s")
math(EXPR _dt "${_t1} - ${_t0}")
file(REMOVE "${_file}")
list(LENGTH CudaArchGuard_GPU_SMS _n)
message(STATUS "fleet_large: ${_n} GPUs, ${CudaArchGuard_ARCHITECTURES}, ${_dt} s")
if(_dt GREATER LIMIT)
  message(FATAL_ERROR "fleet_large: resolving a 100,000-line fleet file took ${_dt} s (limit ${LIMIT} s)")
endif()
