# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
KernelEmbed
-----------

Makes the kernels of ``kernels/`` available to C++ code that has no CUDA compiler of its own:

``archguard_kernel_sources`` (INTERFACE target)
  ``#include <archguard/kernels/sources.hpp>`` gives each ``kernels/*.cuh`` as a string for
  NVRTC (``archguard::kernels::kSaxpySource`` ...), generated from the same files nvcc compiles.

``ARCHGUARD_SMOKE_FATBIN_SOURCE`` (variable)
  A generated C++ file defining ``archguard::doctor::detail::kSmokeFatbin`` (+ ``_size``,
  ``_note``): ``kernels/all.cu`` compiled by ``nvcc -fatbin`` for every real architecture the
  installed nvcc lists (``nvcc --list-gpu-code``) plus PTX of the newest one. ``archguard
  doctor`` loads it through the driver API, so its smoke test needs no CUDA runtime. Without
  nvcc the array is empty and doctor reports that its smoke test was not built.

Cache entries:

``ARCHGUARD_SMOKE_ARCHS``
  Semicolon list of SM numbers (``75;90``) that replaces nvcc's list, for quick local builds
  only; empty (the default) means every architecture the toolkit supports.

This is a project-internal file (not installed); included from ``src/doctor``.
#]=======================================================================]
include_guard(GLOBAL)

set(ARCHGUARD_KERNEL_DIR "${CMAKE_CURRENT_LIST_DIR}/..")
get_filename_component(ARCHGUARD_KERNEL_DIR "${ARCHGUARD_KERNEL_DIR}" ABSOLUTE)
set(ARCHGUARD_KERNEL_HEADERS
    "${ARCHGUARD_KERNEL_DIR}/saxpy.cuh" "${ARCHGUARD_KERNEL_DIR}/reduce.cuh"
    "${ARCHGUARD_KERNEL_DIR}/matmul.cuh" "${ARCHGUARD_KERNEL_DIR}/cluster_sum.cuh")
set(ARCHGUARD_SMOKE_ARCHS "" CACHE STRING
    "SM numbers for the doctor's embedded smoke fatbin (empty: every architecture nvcc supports)")

set(_cag_kgen "${PROJECT_BINARY_DIR}/generated/kernels")
set(_cag_embed "${ARCHGUARD_KERNEL_DIR}/cmake/EmbedFile.cmake")

# --- kernel sources as strings ----------------------------------------------------------------
set(_cag_sources_hpp "${_cag_kgen}/include/archguard/kernels/sources.hpp")
add_custom_command(
  OUTPUT "${_cag_sources_hpp}"
  COMMAND "${CMAKE_COMMAND}" -DMODE=sources "-DOUTPUT=${_cag_sources_hpp}"
          "-DINPUTS=${ARCHGUARD_KERNEL_HEADERS}" -P "${_cag_embed}"
  DEPENDS ${ARCHGUARD_KERNEL_HEADERS} "${_cag_embed}"
  COMMENT "Embedding kernels/*.cuh as NVRTC source strings"
  VERBATIM)
add_custom_target(archguard_kernel_sources_gen DEPENDS "${_cag_sources_hpp}")
add_library(archguard_kernel_sources INTERFACE)
add_dependencies(archguard_kernel_sources archguard_kernel_sources_gen)
target_include_directories(archguard_kernel_sources INTERFACE $<BUILD_INTERFACE:${_cag_kgen}/include>)

# --- the smoke-test fatbin ----------------------------------------------------------------------
set(ARCHGUARD_SMOKE_FATBIN_SOURCE "${_cag_kgen}/smoke_fatbin.cpp")
set(_cag_fatbin "${_cag_kgen}/smoke.fatbin")
set(_cag_nvcc "")
if(CUDAToolkit_NVCC_EXECUTABLE AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
  set(_cag_nvcc "${CUDAToolkit_NVCC_EXECUTABLE}")
elseif(CMAKE_CUDA_COMPILER)
  set(_cag_nvcc "${CMAKE_CUDA_COMPILER}")
endif()

set(_cag_smoke_sms "${ARCHGUARD_SMOKE_ARCHS}")
if(_cag_nvcc AND NOT _cag_smoke_sms)
  execute_process(COMMAND "${_cag_nvcc}" --list-gpu-code
                  OUTPUT_VARIABLE _cag_codes RESULT_VARIABLE _cag_rc ERROR_QUIET)
  if(_cag_rc EQUAL 0)
    string(REGEX MATCHALL "sm_[0-9]+" _cag_codes "${_cag_codes}")
    foreach(_c IN LISTS _cag_codes)
      string(REPLACE "sm_" "" _c "${_c}")
      list(APPEND _cag_smoke_sms "${_c}")
    endforeach()
  endif()
endif()

if(_cag_nvcc AND _cag_smoke_sms)
  list(SORT _cag_smoke_sms COMPARE NATURAL)
  list(REMOVE_DUPLICATES _cag_smoke_sms)
  list(GET _cag_smoke_sms -1 _cag_newest)
  set(_cag_gencode "")
  set(_cag_note "")
  foreach(_sm IN LISTS _cag_smoke_sms)
    list(APPEND _cag_gencode "-gencode=arch=compute_${_sm},code=sm_${_sm}")
    string(APPEND _cag_note "sm_${_sm} ")
  endforeach()
  # PTX of the oldest architecture too: every GPU the toolkit supports can JIT it, so the smoke
  # test still runs under CUDA_FORCE_PTX_JIT=1 (the driver then JITs the highest PTX at or below
  # the device; the newest PTX alone serves no GPU older than it). The newest PTX keeps GPUs
  # newer than the toolkit covered.
  list(GET _cag_smoke_sms 0 _cag_oldest)
  if(NOT _cag_oldest STREQUAL _cag_newest)
    list(APPEND _cag_gencode "-gencode=arch=compute_${_cag_oldest},code=compute_${_cag_oldest}")
    string(APPEND _cag_note "compute_${_cag_oldest} ")
  endif()
  list(APPEND _cag_gencode "-gencode=arch=compute_${_cag_newest},code=compute_${_cag_newest}")
  string(APPEND _cag_note "compute_${_cag_newest}")
  add_custom_command(
    OUTPUT "${_cag_fatbin}"
    COMMAND "${_cag_nvcc}" -fatbin ${_cag_gencode} -o "${_cag_fatbin}" "${ARCHGUARD_KERNEL_DIR}/all.cu"
    DEPENDS "${ARCHGUARD_KERNEL_DIR}/all.cu" ${ARCHGUARD_KERNEL_HEADERS}
    COMMENT "Building the doctor's smoke-test fatbin (${_cag_note})"
    VERBATIM)
  set(_cag_fatbin_dep "${_cag_fatbin}")
else()
  message(STATUS "CudaArchGuard: no nvcc found; archguard doctor is built without its smoke-test fatbin")
  set(_cag_fatbin_dep "")
  set(_cag_note "")
endif()
add_custom_command(
  OUTPUT "${ARCHGUARD_SMOKE_FATBIN_SOURCE}"
  COMMAND "${CMAKE_COMMAND}" -DMODE=binary "-DOUTPUT=${ARCHGUARD_SMOKE_FATBIN_SOURCE}"
          "-DINPUT=${_cag_fatbin_dep}" -DSYMBOL=kSmokeFatbin
          -DNAMESPACE=archguard::doctor::detail "-DNOTE=${_cag_note}" -P "${_cag_embed}"
  DEPENDS ${_cag_fatbin_dep} "${_cag_embed}"
  COMMENT "Embedding the smoke-test fatbin"
  VERBATIM)
