# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
CudaArchGuard
-------------

Chooses the CUDA architectures of a project from a policy, checked against the installed nvcc,
and verifies every CUDA target after it is built, so that "no kernel image is available for
execution on the device" is caught by the build instead of by users.

.. code-block:: cmake

  cmake_minimum_required(VERSION 3.18)
  project(app LANGUAGES CXX CUDA)
  find_package(CudaArchGuard REQUIRED)   # or: list(APPEND CMAKE_MODULE_PATH <dir>) + include(CudaArchGuard)
  add_executable(app app.cu)             # gets the guarded architectures and the verify step

.. code-block:: console

  cmake -B build -DARCH_POLICY=all-major
  cmake -B build -DARCH_POLICY=native
  cmake -B build -DARCH_POLICY="80;90a;120" -DARCH_PTX=highest -DARCH_MIN=8.0

Cache entries (documented where declared below): ``ARCH_POLICY`` (``auto``), ``ARCH_PTX``
(``highest``), ``ARCH_MIN``, ``CudaArchGuard_VERIFY`` (``ON``), ``CudaArchGuard_NVIDIA_SMI``,
``CudaArchGuard_CUOBJDUMP``, ``CudaArchGuard_NVCC_THREADS`` (``0``: nvcc ``--threads`` per CPU
on every CUDA target, unless it already sets ``--threads``); ``CudaArchGuard_EXECUTABLE`` (a path or the name of a target that
builds ``archguard``) may also be a normal variable. See ``CudaArchGuardPolicy`` for the
policies and docs/policy.md for the full reference.

A user's own choice is respected, never overwritten: when ``CMAKE_CUDA_ARCHITECTURES`` was set
by the user (``-D``, ``set()`` before the include, or the ``CUDAARCHS`` environment variable)
it is used as given, checked against nvcc, and verified. CMake itself fills the cache entry with
nvcc's default architecture during ``project()``; the module tells that value from a user's by
three facts: the entry's help string is CMake's own, ``CUDAARCHS`` is unset, and the value equals
the architecture nvcc builds by default (``nvcc --dryrun``). Only then does ``ARCH_POLICY`` apply,
through a normal variable in the including directory (the cache entry is not touched) and, at
the end of the configure step, on every CUDA target that still carries CMake's default.
A target's own ``CUDA_ARCHITECTURES`` set to anything else is kept and verified.

Result variables (also in the cache as INTERNAL entries, so every directory sees them):

``CudaArchGuard_ARCHITECTURES``          CMake syntax (``75-real;...;120``)
``CudaArchGuard_GENCODE_FLAGS``          nvcc ``-gencode=...`` flags
``CudaArchGuard_TORCH_ARCH_LIST``        for ``TORCH_CUDA_ARCH_LIST``
``CudaArchGuard_TF_COMPUTE_CAPABILITIES`` for ``TF_CUDA_COMPUTE_CAPABILITIES``
``CudaArchGuard_SASS``, ``CudaArchGuard_PTX``, ``CudaArchGuard_POLICY_USED``, ``CudaArchGuard_GPUS``

Verification: every target with CUDA sources gets ``cuda_arch_guard_verify()`` (see
``CudaArchGuardVerify``) at the end of the top-level directory: through
``cmake_language(DEFER)`` on CMake >= 3.19, through a watch on ``CMAKE_CURRENT_LIST_DIR``
(which CMake clears once the whole project is read) on 3.18. Set ``CudaArchGuard_VERIFY=OFF``
to skip it, or the target property ``CUDA_ARCH_GUARD_VERIFY`` to ``OFF`` for one target.
#]=======================================================================]
include_guard(GLOBAL)
cmake_policy(VERSION 3.18...4.4)
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardPolicy.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardVerify.cmake")

list(APPEND CMAKE_MESSAGE_CONTEXT "CudaArchGuard")

get_property(_cag_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
if(NOT "CUDA" IN_LIST _cag_languages OR NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "CudaArchGuard: CUDA is not enabled in this project; write project(<name> LANGUAGES CXX CUDA) "
                      "or enable_language(CUDA) before include(CudaArchGuard) / find_package(CudaArchGuard)")
endif()
if(NOT CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA")
  message(FATAL_ERROR "CudaArchGuard: the CUDA compiler is ${CMAKE_CUDA_COMPILER_ID} (${CMAKE_CUDA_COMPILER}); "
                      "the policy engine asks nvcc what it supports. Set CMAKE_CUDA_COMPILER to nvcc.")
endif()

# What to build for: auto, native, all, all-major, fleet:<csv> or a list such as 80;90a;120.
set(ARCH_POLICY "auto" CACHE STRING "CudaArchGuard: auto, native, all, all-major, fleet:<csv file> or a list (80;90a;120)")
set_property(CACHE ARCH_POLICY PROPERTY STRINGS auto native all all-major)
# PTX for the highest architecture (default), for all, or none (newer GPUs then fail).
set(ARCH_PTX "highest" CACHE STRING "CudaArchGuard: PTX to embed: highest, all or none")
set_property(CACHE ARCH_PTX PROPERTY STRINGS highest all none)
# Drop targets older than this compute capability (8.0 or 80); empty keeps all.
set(ARCH_MIN "" CACHE STRING "CudaArchGuard: drop architectures older than this compute capability (e.g. 8.0)")
# Verify each CUDA target's binary after it is built.
option(CudaArchGuard_VERIFY "CudaArchGuard: verify the architectures of every CUDA target after building it" ON)
# nvcc --threads for CUDA targets that build several images: 0 = one thread per CPU (nvcc
# compiles the architectures of one file in parallel); empty or 1 leaves nvcc serial.
set(CudaArchGuard_NVCC_THREADS "0" CACHE STRING "CudaArchGuard: nvcc --threads for CUDA targets (0 = per CPU, empty = off)")
# nvidia-smi to ask for the visible GPUs (native / auto); empty: search PATH.
set(CudaArchGuard_NVIDIA_SMI "" CACHE FILEPATH "CudaArchGuard: nvidia-smi used to detect GPUs (empty: PATH)")
# cuobjdump, the verify step's fallback when the archguard tool is not available.
get_filename_component(_cag_nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
find_program(CudaArchGuard_CUOBJDUMP cuobjdump HINTS "${_cag_nvcc_dir}"
             DOC "CudaArchGuard: cuobjdump, used to verify binaries when the archguard tool is not available")

set(_CAG_CACHE_DIR "${CMAKE_BINARY_DIR}/CMakeFiles/CudaArchGuard" CACHE INTERNAL "CudaArchGuard: nvcc and GPU answers")
file(MAKE_DIRECTORY "${_CAG_CACHE_DIR}")
# The tool as named where the module was included (a normal variable there, maybe a target).
set_property(GLOBAL PROPERTY _CAG_EXECUTABLE "${CudaArchGuard_EXECUTABLE}")
_cag_nvcc_query("${CMAKE_CUDA_COMPILER}" "${_CAG_CACHE_DIR}")

# Did the user choose the architectures?
get_property(_cag_help CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY HELPSTRING)
get_property(_cag_cached CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY VALUE)
set(_cag_user "")
if(NOT "$ENV{CUDAARCHS}" STREQUAL "")
  set(_cag_user "the CUDAARCHS environment variable")
  set(_cag_user_value "$ENV{CUDAARCHS}")
elseif(NOT "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "${_cag_cached}")
  set(_cag_user "set() in the project")
  set(_cag_user_value "${CMAKE_CUDA_ARCHITECTURES}")
elseif(NOT _cag_help MATCHES "^(CUDA architectures|Default GPU architectures for CUDA compilation)$"
       OR NOT "${_cag_cached}" STREQUAL "${_CAG_NVCC_DEFAULT}")
  set(_cag_user "the cache (-DCMAKE_CUDA_ARCHITECTURES)")
  set(_cag_user_value "${_cag_cached}")
endif()
if(_cag_user AND "${_cag_user_value}" STREQUAL "OFF")
  # OFF: the project passes its own flags; ARCH_POLICY still says what to verify.
  set(_cag_user "")
  set(_cag_arch_off ON)
endif()

if(_cag_user)
  cuda_arch_guard_resolve_policy(POLICY "${_cag_user_value}" EXACT NVCC "${CMAKE_CUDA_COMPILER}"
    NVIDIA_SMI "${CudaArchGuard_NVIDIA_SMI}" CACHE_DIR "${_CAG_CACHE_DIR}")
  if(NOT "$ENV{CUDAARCHS}" STREQUAL "" AND CMAKE_VERSION VERSION_LESS 3.20)
    # CMake < 3.20 ignores CUDAARCHS; honour it as 3.20+ does.
    set(CMAKE_CUDA_ARCHITECTURES "${CudaArchGuard_ARCHITECTURES}")
  endif()
  set(_cag_head "respecting CMAKE_CUDA_ARCHITECTURES=${_cag_user_value} from ${_cag_user}; ARCH_POLICY is not used")
else()
  cuda_arch_guard_resolve_policy(POLICY "${ARCH_POLICY}" PTX "${ARCH_PTX}" MIN "${ARCH_MIN}"
    NVCC "${CMAKE_CUDA_COMPILER}" NVIDIA_SMI "${CudaArchGuard_NVIDIA_SMI}" CACHE_DIR "${_CAG_CACHE_DIR}")
  if(NOT _cag_arch_off)
    set(CMAKE_CUDA_ARCHITECTURES "${CudaArchGuard_ARCHITECTURES}")
  endif()
  set(_cag_head "ARCH_POLICY=${ARCH_POLICY}")
endif()
# Targets created with CMake's default before (or outside) this scope are fixed at the end.
set_property(GLOBAL PROPERTY _CAG_CMAKE_DEFAULT "${_cag_cached}")
set(CudaArchGuard_NVCC_VERSION "${_CAG_NVCC_VERSION}" CACHE INTERNAL "CudaArchGuard: the nvcc release")
if(_cag_user OR _cag_arch_off)
  set_property(GLOBAL PROPERTY _CAG_APPLY_POLICY OFF)
else()
  set_property(GLOBAL PROPERTY _CAG_APPLY_POLICY ON)
endif()
foreach(_cag_v ARCHITECTURES GENCODE_FLAGS TORCH_ARCH_LIST TF_COMPUTE_CAPABILITIES SASS PTX POLICY_USED GPUS TOOLKIT ITEMS)
  set(CudaArchGuard_${_cag_v} "${CudaArchGuard_${_cag_v}}" CACHE INTERNAL "CudaArchGuard result")
endforeach()

# The verify tool, said once.
_cag_verify_tool()
if(NOT CudaArchGuard_VERIFY)
  set(_cag_verify_line "off (CudaArchGuard_VERIFY=OFF)")
elseif(_cag_tool_kind STREQUAL "archguard")
  set(_cag_verify_line "archguard verify (${CudaArchGuard_EXECUTABLE})")
elseif(_cag_tool_kind STREQUAL "cuobjdump")
  set(_cag_verify_line "cuobjdump (${CudaArchGuard_CUOBJDUMP}); the archguard tool is not available")
else()
  set(_cag_verify_line "OFF: neither the archguard tool nor cuobjdump was found (set CudaArchGuard_EXECUTABLE or CudaArchGuard_CUOBJDUMP)")
endif()
string(REPLACE "\n" "\n   " _cag_sum "${CudaArchGuard_SUMMARY}")
message(STATUS "CudaArchGuard: ${_cag_head}\n   ${_cag_sum}\n   CMake: ${CudaArchGuard_ARCHITECTURES}\n   verify: ${_cag_verify_line}")

# ---- end of configure: apply the policy to stragglers and attach the verify step ---------------
function(_cag_collect_targets dir out_var)
  get_property(_t DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(_s IN LISTS _subs)
    _cag_collect_targets("${_s}" _st)
    list(APPEND _t ${_st})
  endforeach()
  set(${out_var} "${_t}" PARENT_SCOPE)
endfunction()

function(_cag_finish)
  get_property(_done GLOBAL PROPERTY _CAG_FINISHED)
  if(_done)
    return()
  endif()
  set_property(GLOBAL PROPERTY _CAG_FINISHED ON)
  list(APPEND CMAKE_MESSAGE_CONTEXT "CudaArchGuard" "finish")
  get_property(_apply GLOBAL PROPERTY _CAG_APPLY_POLICY)
  get_property(_default GLOBAL PROPERTY _CAG_CMAKE_DEFAULT)
  _cag_collect_targets("${CMAKE_SOURCE_DIR}" _targets)
  foreach(_t IN LISTS _targets)
    get_target_property(_type ${_t} TYPE)
    if(NOT _type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY|STATIC_LIBRARY|OBJECT_LIBRARY)$")
      continue()
    endif()
    _cag_target_has_cuda(${_t} _cuda)
    if(NOT _cuda)
      continue()
    endif()
    get_target_property(_archs ${_t} CUDA_ARCHITECTURES)
    if(_apply AND "${_archs}" STREQUAL "${_default}")
      set_property(TARGET ${_t} PROPERTY CUDA_ARCHITECTURES "${CudaArchGuard_ARCHITECTURES}")
    endif()
    # nvcc >= 11.2 compiles a file's architectures in parallel with --threads.
    if(NOT "${CudaArchGuard_NVCC_THREADS}" STREQUAL "" AND NOT "${CudaArchGuard_NVCC_THREADS}" STREQUAL "1"
       AND CudaArchGuard_NVCC_VERSION VERSION_GREATER_EQUAL 11.2)
      get_target_property(_opts ${_t} COMPILE_OPTIONS)
      if(NOT "${_opts}" MATCHES "--threads|(^|;)-t[ =0-9]")
        set_property(TARGET ${_t} APPEND PROPERTY COMPILE_OPTIONS
                     "$<$<COMPILE_LANGUAGE:CUDA>:--threads=${CudaArchGuard_NVCC_THREADS}>")
      endif()
    endif()
    get_target_property(_want ${_t} CUDA_ARCH_GUARD_VERIFY)
    if(CudaArchGuard_VERIFY AND NOT "${_want}" STREQUAL "OFF")
      cuda_arch_guard_verify(${_t})
    endif()
  endforeach()
endfunction()

function(_cag_finish_watch variable access value)
  if(access STREQUAL "MODIFIED_ACCESS" AND "${value}" STREQUAL "")
    _cag_finish()
  endif()
endfunction()

if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.19)
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _cag_finish)
else()
  variable_watch(CMAKE_CURRENT_LIST_DIR _cag_finish_watch)
endif()

list(POP_BACK CMAKE_MESSAGE_CONTEXT)
