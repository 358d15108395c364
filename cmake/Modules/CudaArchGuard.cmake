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
``CudaArchGuard_CUOBJDUMP``, ``CudaArchGuard_NVCC_THREADS`` (``auto``: nvcc ``--threads`` of
CPUs / CUDA files on every CUDA target, unless it already sets ``--threads``); ``CudaArchGuard_EXECUTABLE`` (a path or the name of a target that
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
``CudaArchGuard_TORCH_ARCH_LIST``        for ``TORCH_CUDA_ARCH_LIST`` (only entries PyTorch's cpp_extension accepts)
``CudaArchGuard_TORCH_NOTE``             what that list could not express (``100f as 10.0``, ``110 left out``)
``CudaArchGuard_TF_COMPUTE_CAPABILITIES`` for ``TF_CUDA_COMPUTE_CAPABILITIES``
``CudaArchGuard_SASS``, ``CudaArchGuard_PTX``, ``CudaArchGuard_POLICY_USED``, ``CudaArchGuard_GPUS``

Verification: every target with CUDA sources gets ``cuda_arch_guard_verify()`` (see
``CudaArchGuardVerify``). On CMake >= 3.19 that happens at the end of the target's own
directory (``cmake_language(DEFER DIRECTORY)``, registered for each directory as CMake starts
reading it, seen through a watch on ``CMAKE_CURRENT_LIST_DIR``), so the check is a ``POST_BUILD``
step of the target; targets of directories finished before the include, and every target on
CMake 3.18 (no deferred calls: the watch sees ``CMAKE_CURRENT_LIST_DIR`` cleared once the whole
project is read), get a ``<target>_archguard_verify`` stamp target instead, which a ``--target``
build skips; one warning at the end of the configure step lists them, each with the line that
makes its check a ``POST_BUILD`` step (``cuda_arch_guard_verify(<target>)`` in the target's own
directory, where ``add_custom_command(TARGET)`` may attach it). Set ``CudaArchGuard_VERIFY=OFF``
to skip it, or the target property ``CUDA_ARCH_GUARD_VERIFY`` to ``OFF`` for one target.
#]=======================================================================]
include_guard(GLOBAL)
cmake_policy(VERSION 3.18...4.4)
set(_cag_included_from "${CMAKE_PARENT_LIST_FILE}")  # before the includes below change it
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

# ON: ARCH_POLICY wins over the project's own CMAKE_CUDA_ARCHITECTURES / CUDA_ARCHITECTURES (every
# CUDA target builds the policy's list); OFF (default): the project's list is kept, with a warning
# when ARCH_POLICY was set explicitly.
option(ARCH_POLICY_OVERRIDE "CudaArchGuard: apply ARCH_POLICY even where the project sets its own CUDA architectures" OFF)
# What to build for: auto (the default: SASS for the visible GPUs + PTX of the lowest architecture
# nvcc supports, or all-major without a GPU), native, all, all-major, fleet:<csv> or a list such as 80;90a;120.
set(ARCH_POLICY "auto" CACHE STRING "CudaArchGuard: auto, native, all, all-major, fleet:<csv file> or a list (80;90a;120)")
set_property(CACHE ARCH_POLICY PROPERTY STRINGS auto native all all-major)
# PTX for the highest architecture (default), for all, or none (newer GPUs then fail).
set(ARCH_PTX "highest" CACHE STRING "CudaArchGuard: PTX to embed: highest, all or none")
set_property(CACHE ARCH_PTX PROPERTY STRINGS highest all none)
# Drop targets older than this compute capability (8.0 or 80); empty keeps all.
set(ARCH_MIN "" CACHE STRING "CudaArchGuard: drop architectures older than this compute capability (e.g. 8.0)")
# Verify each CUDA target's binary after it is built.
option(CudaArchGuard_VERIFY "CudaArchGuard: verify the architectures of every CUDA target after building it" ON)
# nvcc --threads for CUDA targets (nvcc compiles one file's architectures in parallel): auto
# (default) = CPUs / CUDA source files, capped at the number of images; N; 0 = one per CPU;
# empty or 1 leaves nvcc serial.
set(CudaArchGuard_NVCC_THREADS "auto" CACHE STRING "CudaArchGuard: nvcc --threads for CUDA targets (auto = CPUs / CUDA files, N, 0 = one per CPU, empty or 1 = off)")
# Build archguard-verify (a small dependency-free verify tool, seconds) from the sources shipped
# with the module when the archguard tool is not given; OFF falls back to cuobjdump.
option(CudaArchGuard_BUILTIN_VERIFIER "CudaArchGuard: build the dependency-free verify tool when the archguard tool is not available" ON)
# Targets nvcc calls deprecated (nvcc 12.x: 50 to 72, which all-major still builds; nvcc warns on
# every compile): quiet (default) adds -Wno-deprecated-gpu-targets to CUDA targets, warn keeps
# nvcc's warnings. ARCH_MIN drops them instead.
set(CudaArchGuard_DEPRECATED "quiet" CACHE STRING "CudaArchGuard: targets nvcc calls deprecated: quiet (-Wno-deprecated-gpu-targets on CUDA targets) or warn")
set_property(CACHE CudaArchGuard_DEPRECATED PROPERTY STRINGS quiet warn)
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
_cag_nvcc_query("${CMAKE_CUDA_COMPILER}" "${_CAG_CACHE_DIR}" _cag_nvcc)

# Appends to the list <out_var> the lines of <file> that set, unset or list(<op>)
# CMAKE_CUDA_ARCHITECTURES, as "<file relative to the source dir>:<line>": from the start, or
# after the first line that begins with <start>, up to the end, or to the first line that begins
# with <stop> ("-": no such line). The module's own files are not read.
function(_cag_archs_changes_in file start stop out_var)
  if(NOT EXISTS "${file}" OR file MATCHES "/CudaArchGuard[^/]*$|/CudaArchGuard/")
    return()
  endif()
  # One list element per line: characters that would split or join list elements are replaced
  # first, so that the line numbers stay right (none of them is in what is matched below).
  file(READ "${file}" _text)
  string(REGEX REPLACE "[];[\\]" "_" _text "${_text}")
  string(REPLACE "\n" ";" _lines "${_text}")
  set(_hits "${${out_var}}")
  set(_started ON)
  if(NOT start STREQUAL "-")
    set(_started OFF)
  endif()
  set(_n 0)
  foreach(_l IN LISTS _lines)
    math(EXPR _n "${_n} + 1")
    if(NOT _started)
      if(_l MATCHES "^[ \t]*${start}")
        set(_started ON)
      endif()
      continue()
    endif()
    if(NOT stop STREQUAL "-" AND _l MATCHES "^[ \t]*${stop}")
      break()
    endif()
    if(_l MATCHES "^[ \t]*((un)?set[ \t]*\\([ \t]*|list[ \t]*\\([ \t]*[A-Z_]+[ \t]+)CMAKE_CUDA_ARCHITECTURES[ \t)]")
      file(RELATIVE_PATH _rel "${CMAKE_SOURCE_DIR}" "${file}")
      list(APPEND _hits "${_rel}:${_n}")
    endif()
  endforeach()
  set(${out_var} "${_hits}" PARENT_SCOPE)
endfunction()

# Where the project set CMAKE_CUDA_ARCHITECTURES, as "; set at <file>:<line>[, ...]" from the
# list files CMake has read so far in this directory chain and the project's cmake/ helpers, or ""
# when no set() or list(<op>) of it is found there (a -D or the environment need no place). Each
# file of the chain is read only up to where it goes on: the including directory's up to the
# include (or find_package) of the module, a parent's up to its add_subdirectory() of the child
# when that names the child literally (else the whole file).
function(_cag_where_archs_set out_var)
  set(_files "")
  set(_stops "")
  set(_d "${CMAKE_CURRENT_SOURCE_DIR}")
  set(_stop "(include|find_package)[ \t]*\\([ \t]*CudaArchGuard[ \t)]")
  while(_d)
    list(APPEND _files "${_d}/CMakeLists.txt")
    list(APPEND _stops "${_stop}")
    set(_child "${_d}")
    get_property(_d DIRECTORY "${_d}" PROPERTY PARENT_DIRECTORY)
    set(_stop "-")  # "-": read the whole file (no empty list elements)
    if(_d)
      file(RELATIVE_PATH _rel "${_d}" "${_child}")
      string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" _rel "${_rel}")
      set(_stop "add_subdirectory[ \t]*\\([ \t]*\"?(\\$\\{CMAKE_CURRENT_SOURCE_DIR\\}/)?${_rel}/?\"?[ \t)]")
    endif()
  endwhile()
  file(GLOB_RECURSE _helpers "${CMAKE_SOURCE_DIR}/cmake/*.cmake" "${CMAKE_SOURCE_DIR}/cmake/*.txt")
  foreach(_h IN LISTS _helpers)
    list(APPEND _files "${_h}")
    list(APPEND _stops "-")
  endforeach()
  set(_hits "")
  list(LENGTH _files _count)
  set(_i 0)
  while(_i LESS _count)
    list(GET _files ${_i} _f)
    list(GET _stops ${_i} _stop)
    math(EXPR _i "${_i} + 1")
    _cag_archs_changes_in("${_f}" "-" "${_stop}" _hits)
  endwhile()
  if(_hits)
    list(REMOVE_DUPLICATES _hits)
    string(REPLACE ";" ", " _hits "${_hits}")
    set(${out_var} "; set at ${_hits}" PARENT_SCOPE)
  else()
    set(${out_var} "" PARENT_SCOPE)
  endif()
endfunction()

# Where the project changed (set, list(<op>) or unset) CMAKE_CUDA_ARCHITECTURES after the
# include, as "<file>:<line>[, ...]" or "": the list files the watch saw change it (the including
# file from the include on) and the project's cmake/ helpers.
function(_cag_where_archs_changed out_var)
  get_property(_files GLOBAL PROPERTY _CAG_ARCHS_CHANGED_IN)
  get_property(_from GLOBAL PROPERTY _CAG_INCLUDED_FROM)
  file(GLOB_RECURSE _helpers "${CMAKE_SOURCE_DIR}/cmake/*.cmake" "${CMAKE_SOURCE_DIR}/cmake/*.txt")
  list(APPEND _files ${_helpers})
  list(REMOVE_DUPLICATES _files)
  set(_hits "")
  foreach(_f IN LISTS _files)
    set(_start "-")
    if(_f STREQUAL _from)
      set(_start "(include|find_package)[ \t]*\\([ \t]*CudaArchGuard[ \t)]")  # from the include on
    endif()
    _cag_archs_changes_in("${_f}" "${_start}" "-" _hits)
  endforeach()
  string(REPLACE ";" ", " _hits "${_hits}")
  set(${out_var} "${_hits}" PARENT_SCOPE)
endfunction()

# Did the user choose the architectures?
get_property(_cag_help CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY HELPSTRING)
get_property(_cag_cached CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY VALUE)
get_property(_cag_type CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY TYPE)
set(_cag_user "")
if(NOT "$ENV{CUDAARCHS}" STREQUAL "")
  set(_cag_user "the CUDAARCHS environment variable")
  set(_cag_user_value "$ENV{CUDAARCHS}")
elseif(NOT "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "${_cag_cached}")
  set(_cag_user "set() in the project")
  set(_cag_user_value "${CMAKE_CUDA_ARCHITECTURES}")
elseif("${_cag_cached}" STREQUAL "" AND "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "")
  # No value at all: the project unset it (unset(CMAKE_CUDA_ARCHITECTURES CACHE)), which
  # chooses nothing (CMake refuses an empty list); the policy applies.
  _cag_where_archs_set(_cag_where)
  string(REPLACE "; set at " " at " _cag_where "${_cag_where}")
  set(_cag_unset_note "the project unset CMAKE_CUDA_ARCHITECTURES${_cag_where}")
elseif(NOT _cag_help STREQUAL "CUDA architectures" OR NOT _cag_type STREQUAL "STRING"
       OR (NOT "${_cag_nvcc_DEFAULT}" STREQUAL "" AND NOT "${_cag_cached}" STREQUAL "${_cag_nvcc_DEFAULT}"))
  set(_cag_user "the cache (-DCMAKE_CUDA_ARCHITECTURES)")
  set(_cag_user_value "${_cag_cached}")
endif()
if(_cag_user AND "${_cag_user_value}" STREQUAL "OFF")
  # OFF: the project passes its own flags; ARCH_POLICY still says what to verify.
  set(_cag_user "")
  set(_cag_arch_off ON)
endif()

# An explicit ARCH_POLICY is never silently ignored: when the project chose its own list, say so
# as a warning naming where; ARCH_POLICY_OVERRIDE=ON makes the policy win on every CUDA target.
set(_cag_override OFF)
if(ARCH_POLICY_OVERRIDE AND NOT _cag_arch_off)
  set(_cag_override ON)
endif()
if(_cag_user AND ARCH_POLICY_OVERRIDE)
  set(_cag_override ON)
  set(_cag_head "ARCH_POLICY=${ARCH_POLICY} (ARCH_POLICY_OVERRIDE=ON: replaces CMAKE_CUDA_ARCHITECTURES=${_cag_user_value} from ${_cag_user})")
  set(_cag_user "")
elseif(_cag_user AND NOT "${ARCH_POLICY}" STREQUAL "auto" AND NOT "${ARCH_POLICY}" STREQUAL "")
  _cag_where_archs_set(_cag_where)
  message(WARNING "CudaArchGuard: ARCH_POLICY=${ARCH_POLICY} is not applied: the project sets "
                  "CMAKE_CUDA_ARCHITECTURES=${_cag_user_value} (${_cag_user}${_cag_where}). Its targets build that list and "
                  "are verified against what they build. To make the policy win, configure with -DARCH_POLICY_OVERRIDE=ON "
                  "(docs/policy.md, \"When the project sets its own list\").")
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
  if(NOT _cag_override)
    set(_cag_head "ARCH_POLICY=${ARCH_POLICY}")
    if(_cag_unset_note)
      string(APPEND _cag_head " (${_cag_unset_note}: no list of its own, the policy applies)")
    endif()
  endif()
endif()
set_property(GLOBAL PROPERTY _CAG_OVERRIDE ${_cag_override})
set_property(GLOBAL PROPERTY _CAG_INCLUDED_FROM "${_cag_included_from}")
set_property(GLOBAL PROPERTY _CAG_USER "${_cag_user}")
# Targets created with CMake's default before (or outside) this scope are fixed at the end.
set_property(GLOBAL PROPERTY _CAG_CMAKE_DEFAULT "${_cag_cached}")
set(CudaArchGuard_NVCC_VERSION "${_cag_nvcc_VERSION}" CACHE INTERNAL "CudaArchGuard: the nvcc release")
if(_cag_user OR _cag_arch_off)
  set_property(GLOBAL PROPERTY _CAG_APPLY_POLICY OFF)
else()
  set_property(GLOBAL PROPERTY _CAG_APPLY_POLICY ON)
endif()
foreach(_cag_v ARCHITECTURES GENCODE_FLAGS TORCH_ARCH_LIST TORCH_NOTE TF_COMPUTE_CAPABILITIES SASS PTX POLICY_USED GPUS TOOLKIT ITEMS RUNS RUNS_TEXT GPU_SMS)
  set(CudaArchGuard_${_cag_v} "${CudaArchGuard_${_cag_v}}" CACHE INTERNAL "CudaArchGuard result")
endforeach()

# Deprecated targets, as nvcc itself says: a --dryrun for the lowest SASS target prints nvcc's
# "architectures prior to '<compute_NN>' are deprecated" warning when there are any.
set(_cag_low "")
foreach(_cag_it IN LISTS CudaArchGuard_ITEMS)
  if(_cag_it MATCHES "^sass:([0-9]+)$" AND (_cag_low STREQUAL "" OR CMAKE_MATCH_1 LESS _cag_low))
    set(_cag_low "${CMAKE_MATCH_1}")
  endif()
endforeach()
set(_cag_deprecated "")
if(_cag_low AND NOT "${CudaArchGuard_ARCHITECTURES}" STREQUAL "")
  set(_cag_key "${CMAKE_CUDA_COMPILER};${_cag_nvcc_VERSION};${_cag_low}")
  if(NOT "${_CAG_DEPRECATED_KEY}" STREQUAL "${_cag_key}")
    file(WRITE "${_CAG_CACHE_DIR}/cag_deprecated_probe.cu" "")
    execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --dryrun -c -arch=sm_${_cag_low} cag_deprecated_probe.cu -o cag_deprecated_probe.o
                    WORKING_DIRECTORY "${_CAG_CACHE_DIR}" RESULT_VARIABLE _cag_rc OUTPUT_VARIABLE _cag_out ERROR_VARIABLE _cag_out
                    TIMEOUT 60)
    set(_cag_below "")
    if(_cag_out MATCHES "prior to '<compute_([0-9]+)>' (is|are) deprecated")
      set(_cag_below "${CMAKE_MATCH_1}")
    endif()
    set(_CAG_DEPRECATED_KEY "${_cag_key}" CACHE INTERNAL "CudaArchGuard: nvcc's deprecation probe")
    set(_CAG_DEPRECATED_BELOW "${_cag_below}" CACHE INTERNAL "CudaArchGuard: nvcc deprecates targets below this")
  endif()
  if(_CAG_DEPRECATED_BELOW)
    foreach(_cag_it IN LISTS CudaArchGuard_ITEMS)
      if(_cag_it MATCHES "^(sass|ptx):([0-9]+)[af]?$" AND CMAKE_MATCH_2 LESS _CAG_DEPRECATED_BELOW)
        list(APPEND _cag_deprecated "${CMAKE_MATCH_2}")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES _cag_deprecated)
  endif()
endif()
set(CudaArchGuard_DEPRECATED_TARGETS "${_cag_deprecated}" CACHE INTERNAL "CudaArchGuard: targets of the list nvcc calls deprecated")
set_property(GLOBAL PROPERTY _CAG_QUIET_DEPRECATED OFF)
if(_cag_deprecated)
  string(REPLACE ";" " " _cag_d "${_cag_deprecated}")
  math(EXPR _cag_min_major "${_CAG_DEPRECATED_BELOW} / 10")
  math(EXPR _cag_min_minor "${_CAG_DEPRECATED_BELOW} % 10")
  if(CudaArchGuard_DEPRECATED STREQUAL "quiet")
    set_property(GLOBAL PROPERTY _CAG_QUIET_DEPRECATED ON)
    set(_cag_dep_how "-Wno-deprecated-gpu-targets is added to CUDA targets (CudaArchGuard_DEPRECATED=warn keeps nvcc's warnings)")
  elseif(CudaArchGuard_DEPRECATED STREQUAL "warn")
    set(_cag_dep_how "nvcc warns on every compile (CudaArchGuard_DEPRECATED=quiet silences it)")
  else()
    message(FATAL_ERROR "CudaArchGuard: CudaArchGuard_DEPRECATED='${CudaArchGuard_DEPRECATED}' is not quiet or warn")
  endif()
  message(STATUS "CudaArchGuard: nvcc ${_cag_nvcc_VERSION} calls ${_cag_d} deprecated (below compute_${_CAG_DEPRECATED_BELOW}); "
                 "${_cag_dep_how}; -DARCH_MIN=${_cag_min_major}.${_cag_min_minor} drops them")
endif()

# The verify tool, said once.
_cag_verify_tool(_cag_tool)
if(NOT CudaArchGuard_VERIFY)
  set(_cag_verify_line "off (CudaArchGuard_VERIFY=OFF)")
elseif(_cag_tool_KIND STREQUAL "archguard")
  set(_cag_verify_line "archguard verify (${CudaArchGuard_EXECUTABLE})")
elseif(_cag_tool_KIND STREQUAL "builtin")
  get_property(_cag_v GLOBAL PROPERTY _CAG_VERIFIER)
  set(_cag_verify_line "archguard-verify, built from the module's sources (${_cag_v})")
elseif(_cag_tool_KIND STREQUAL "cuobjdump")
  set(_cag_verify_line "cuobjdump (${CudaArchGuard_CUOBJDUMP}); the archguard tool is not available")
else()
  set(_cag_verify_line "OFF: neither the archguard tool nor cuobjdump was found (set CudaArchGuard_EXECUTABLE or CudaArchGuard_CUOBJDUMP)")
endif()
string(REPLACE "\n" "\n   " _cag_sum "${CudaArchGuard_SUMMARY}")
message(STATUS "CudaArchGuard: ${_cag_head}\n   ${_cag_sum}\n   CMake: ${CudaArchGuard_ARCHITECTURES}\n   verify: ${_cag_verify_line}")

# ---- end of each directory and of the configure step ------------------------------------------
# A POST_BUILD step can only be added in the target's own directory, so on CMake >= 3.19 each
# directory gets a deferred call at its end (_cag_dir_end): the current one and its ancestors now,
# every directory entered later through a watch on CMAKE_CURRENT_LIST_DIR (CMake sets it to the
# directory's path when it starts reading it). The last call (_cag_finish, end of the top
# directory) sets nvcc --threads, which needs the whole project's file count, and verifies the
# targets of directories finished before the include with a stamp target instead. CMake 3.18 has
# no deferred calls: there the watch sees CMAKE_CURRENT_LIST_DIR cleared at the very end and
# runs _cag_finish alone (stamp targets).
function(_cag_collect_targets dir out_var)
  get_property(_t DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(_s IN LISTS _subs)
    _cag_collect_targets("${_s}" _st)
    list(APPEND _t ${_st})
  endforeach()
  set(${out_var} "${_t}" PARENT_SCOPE)
endfunction()

# The CUDA-bearing OBJECT and STATIC libraries whose device code ends up in <target>'s file: named
# in its sources ($<TARGET_OBJECTS:x>) or linked (LINK_LIBRARIES, and through static and object
# libraries their INTERFACE_LINK_LIBRARIES), recursively. Imported targets are not looked into.
function(_cag_cuda_deps target out_var)
  set(_todo "")
  get_target_property(_srcs ${target} SOURCES)
  foreach(_s IN LISTS _srcs)
    if(_s MATCHES "^\\$<TARGET_OBJECTS:([^>]+)>$")
      list(APPEND _todo "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  get_target_property(_libs ${target} LINK_LIBRARIES)
  list(APPEND _todo ${_libs})
  set(_seen "")
  set(_found "")
  while(_todo)
    list(POP_FRONT _todo _l)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" _l "${_l}")
    string(REGEX REPLACE "::@.*$" "" _l "${_l}")  # target_link_libraries from another directory
    if(_l STREQUAL "" OR _l IN_LIST _seen OR NOT TARGET "${_l}")
      continue()
    endif()
    list(APPEND _seen "${_l}")
    get_target_property(_imp "${_l}" IMPORTED)
    get_target_property(_al "${_l}" ALIASED_TARGET)
    if(_al)
      list(APPEND _todo "${_al}")
      continue()
    endif()
    get_target_property(_type "${_l}" TYPE)
    if(_imp OR NOT _type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|INTERFACE_LIBRARY)$")
      continue()
    endif()
    if(NOT _type STREQUAL "INTERFACE_LIBRARY")
      _cag_target_has_cuda("${_l}" _cuda)
      if(_cuda)
        list(APPEND _found "${_l}")
      endif()
      get_target_property(_more "${_l}" LINK_LIBRARIES)
      if(_more)
        list(APPEND _todo ${_more})
      endif()
    endif()
    get_target_property(_more "${_l}" INTERFACE_LINK_LIBRARIES)
    if(_more)
      list(APPEND _todo ${_more})
    endif()
  endwhile()
  set(${out_var} "${_found}" PARENT_SCOPE)
endfunction()

# Applies the policy to a target still carrying CMake's default and attaches its verify step.
# Sets <out_files> to its number of CUDA sources (0: not a CUDA target). Runs once per target.
function(_cag_handle_target target out_files)
  set(${out_files} 0 PARENT_SCOPE)
  get_target_property(_type ${target} TYPE)
  if(NOT _type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY|STATIC_LIBRARY|OBJECT_LIBRARY)$")
    return()
  endif()
  _cag_target_has_cuda(${target} _cuda _n)
  set(_deps "")
  if(_type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
    _cag_cuda_deps(${target} _deps)  # device code linked in from object or static libraries
  endif()
  if(NOT _cuda AND NOT _deps)
    return()
  endif()
  set(${out_files} ${_n} PARENT_SCOPE)
  get_target_property(_done ${target} _CAG_HANDLED)
  if(_done)
    return()
  endif()
  set_property(TARGET ${target} PROPERTY _CAG_HANDLED ON)
  if(_deps)
    # Its objects are verified here, in the file that ships; the libraries need no check of their own.
    set_property(GLOBAL APPEND PROPERTY _CAG_LINKED_OBJECTS ${_deps})
    if(NOT _cuda)
      list(GET _deps 0 _from)
      set_property(TARGET ${target} PROPERTY _CAG_REQUIRE_FROM "${_from}")
    endif()
  endif()
  if(_type STREQUAL "OBJECT_LIBRARY")
    set_property(GLOBAL APPEND PROPERTY _CAG_OBJECT_LIBRARIES ${target})
  endif()
  get_property(_apply GLOBAL PROPERTY _CAG_APPLY_POLICY)
  get_property(_default GLOBAL PROPERTY _CAG_CMAKE_DEFAULT)
  get_target_property(_archs ${target} CUDA_ARCHITECTURES)
  get_property(_override GLOBAL PROPERTY _CAG_OVERRIDE)
  # What the target's directory holds in CMAKE_CUDA_ARCHITECTURES (at its end): a target whose
  # list equals CMake's default while its directory holds another list set it on itself.
  get_target_property(_sd ${target} SOURCE_DIR)
  get_directory_property(_dirval DIRECTORY "${_sd}" DEFINITION CMAKE_CUDA_ARCHITECTURES)
  get_property(_user GLOBAL PROPERTY _CAG_USER)
  set(_own_setting OFF)
  get_property(_before GLOBAL PROPERTY _CAG_TARGETS_BEFORE)
  if(_apply AND "${_archs}" STREQUAL "${_default}" AND NOT "${_dirval}" STREQUAL "${_default}"
     AND NOT "${_dirval}" STREQUAL "" AND NOT target IN_LIST _before)
    set(_own_setting ON)  # e.g. CUDA_ARCHITECTURES 75 (nvcc 13's default) on the target itself
  endif()
  if(_override AND NOT "${_archs}" STREQUAL "OFF")
    set_property(TARGET ${target} PROPERTY CUDA_ARCHITECTURES "${CudaArchGuard_ARCHITECTURES}")
    set(_origin "ARCH_POLICY_OVERRIDE=ON")
    if(NOT "${_archs}" STREQUAL "${CudaArchGuard_ARCHITECTURES}")
      string(APPEND _origin ", in place of ${_archs}")
    endif()
  elseif(_apply AND "${_archs}" STREQUAL "${_default}" AND NOT _own_setting)
    set_property(TARGET ${target} PROPERTY CUDA_ARCHITECTURES "${CudaArchGuard_ARCHITECTURES}")
    set(_origin "ARCH_POLICY")
    if(NOT "${_archs}" STREQUAL "${CudaArchGuard_ARCHITECTURES}")
      string(APPEND _origin ", in place of CMake's default ${_archs}")
    endif()
  elseif("${_archs}" STREQUAL "OFF")
    set(_origin "CUDA_ARCHITECTURES=OFF: the project's own flags")
  elseif(_user)
    set(_origin "CMAKE_CUDA_ARCHITECTURES from ${_user}")
    if(NOT "${_archs}" STREQUAL "${_dirval}")
      set(_origin "the target's own CUDA_ARCHITECTURES")
    endif()
  elseif("${_archs}" STREQUAL "${CudaArchGuard_ARCHITECTURES}")
    set(_origin "ARCH_POLICY")
  else()
    set(_origin "the target's own CUDA_ARCHITECTURES")
    if("${_archs}" STREQUAL "${_dirval}")
      _cag_where_archs_changed(_where)
      set(_origin "CMAKE_CUDA_ARCHITECTURES changed after include(CudaArchGuard)")
      if(_where)
        string(APPEND _origin ", at ${_where}")
      endif()
      set_property(GLOBAL APPEND PROPERTY _CAG_CHANGED_AFTER "${target}")
      set_property(GLOBAL PROPERTY _CAG_CHANGED_WHERE "${_where}")
    elseif(_own_setting)
      set(_origin "the target's own CUDA_ARCHITECTURES ${_archs}, which is nvcc's default: kept")
    endif()
    if("${_archs}" STREQUAL "${_dirval}" AND NOT _own_setting)
      # said by the warning about the change after the include
    elseif(_apply AND _cuda AND NOT "${ARCH_POLICY}" STREQUAL "auto")
      set_property(GLOBAL APPEND PROPERTY _CAG_OWN_LISTS "'${target}' (${_archs})")  # said once, at the end
    elseif(_own_setting)
      set_property(GLOBAL APPEND PROPERTY _CAG_KEPT_DEFAULT "'${target}'")
    endif()
  endif()
  get_target_property(_final ${target} CUDA_ARCHITECTURES)
  set_property(GLOBAL APPEND PROPERTY _CAG_BUILT "${target}")
  set_property(TARGET ${target} PROPERTY _CAG_ORIGIN "${_origin}")
  get_property(_quiet GLOBAL PROPERTY _CAG_QUIET_DEPRECATED)
  if(_quiet)  # the list holds targets nvcc calls deprecated (CudaArchGuard_DEPRECATED=quiet)
    set_property(TARGET ${target} APPEND PROPERTY COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-Wno-deprecated-gpu-targets>")
    set_property(TARGET ${target} APPEND PROPERTY LINK_OPTIONS "$<DEVICE_LINK:-Wno-deprecated-gpu-targets>")
  endif()
  get_target_property(_want ${target} CUDA_ARCH_GUARD_VERIFY)
  if(CudaArchGuard_VERIFY AND NOT "${_want}" STREQUAL "OFF" AND NOT _type STREQUAL "OBJECT_LIBRARY")
    cuda_arch_guard_verify(${target})
  endif()
endfunction()

function(_cag_dir_end)
  list(APPEND CMAKE_MESSAGE_CONTEXT "CudaArchGuard" "directory")
  get_property(_targets DIRECTORY PROPERTY BUILDSYSTEM_TARGETS)
  foreach(_t IN LISTS _targets)
    _cag_handle_target(${_t} _n)
  endforeach()
endfunction()

function(_cag_register_dir dir)
  get_property(_seen DIRECTORY "${dir}" PROPERTY _CAG_DIR_REGISTERED)
  if(NOT _seen)
    set_property(DIRECTORY "${dir}" PROPERTY _CAG_DIR_REGISTERED ON)
    cmake_language(DEFER DIRECTORY "${dir}" CALL _cag_dir_end)
  endif()
endfunction()

function(_cag_finish)
  get_property(_done GLOBAL PROPERTY _CAG_FINISHED)
  if(_done)
    return()
  endif()
  set_property(GLOBAL PROPERTY _CAG_FINISHED ON)
  list(APPEND CMAKE_MESSAGE_CONTEXT "CudaArchGuard" "finish")
  _cag_collect_targets("${CMAKE_SOURCE_DIR}" _targets)
  set(_cuda_targets "")
  set(_files 0)
  foreach(_t IN LISTS _targets)
    _cag_handle_target(${_t} _n)
    if(_n GREATER 0)
      list(APPEND _cuda_targets ${_t})
      math(EXPR _files "${_files} + ${_n}")
    endif()
  endforeach()
  # What is built, per target (the include-time summary shows the policy's list; the project
  # may change it afterwards, or keep its own on a target).
  get_property(_built GLOBAL PROPERTY _CAG_BUILT)
  if(_built)
    set(_text "")
    foreach(_t IN LISTS _built)
      get_target_property(_l ${_t} CUDA_ARCHITECTURES)
      get_target_property(_o ${_t} _CAG_ORIGIN)
      string(APPEND _text "\n   ${_t}: ${_l} (${_o})")
    endforeach()
    message(STATUS "CudaArchGuard: built, per target:${_text}")
  endif()
  get_property(_changed GLOBAL PROPERTY _CAG_CHANGED_AFTER)
  get_property(_apply GLOBAL PROPERTY _CAG_APPLY_POLICY)
  if(_changed AND _apply)
    get_property(_where GLOBAL PROPERTY _CAG_CHANGED_WHERE)
    if(_where)
      set(_where " (at ${_where})")
    endif()
    string(REPLACE ";" ", " _changed "${_changed}")
    message(WARNING "CudaArchGuard: the project changes CMAKE_CUDA_ARCHITECTURES after include(CudaArchGuard)${_where}: "
                    "${_changed} build that list, not ARCH_POLICY=${ARCH_POLICY}'s ${CudaArchGuard_ARCHITECTURES} (see 'built, per "
                    "target' above); they are verified against what they build. To make the policy win, configure with "
                    "-DARCH_POLICY_OVERRIDE=ON.")
  endif()
  get_property(_kept GLOBAL PROPERTY _CAG_KEPT_DEFAULT)
  if(_kept)
    string(REPLACE ";" ", " _kept "${_kept}")
    get_property(_default GLOBAL PROPERTY _CAG_CMAKE_DEFAULT)
    message(STATUS "CudaArchGuard: ${_kept} set CUDA_ARCHITECTURES ${_default} on the target itself (nvcc's default): kept, not replaced by the policy")
  endif()
  get_property(_own GLOBAL PROPERTY _CAG_OWN_LISTS)
  if(_own)
    string(REPLACE ";" ", " _own "${_own}")
    message(WARNING "CudaArchGuard: ARCH_POLICY=${ARCH_POLICY} is not applied to targets that set their own "
                    "CUDA_ARCHITECTURES: ${_own}. They build their own list and are verified against it. To make the "
                    "policy win, configure with -DARCH_POLICY_OVERRIDE=ON.")
  endif()
  # Object libraries are verified where they are linked; one linked nowhere in the project (a
  # deliverable of its own) gets a stamp target that checks its objects.
  get_property(_objlibs GLOBAL PROPERTY _CAG_OBJECT_LIBRARIES)
  get_property(_linked GLOBAL PROPERTY _CAG_LINKED_OBJECTS)
  foreach(_t IN LISTS _objlibs)
    get_target_property(_want ${_t} CUDA_ARCH_GUARD_VERIFY)
    if(CudaArchGuard_VERIFY AND NOT "${_want}" STREQUAL "OFF" AND NOT _t IN_LIST _linked)
      cuda_arch_guard_verify(${_t})
    endif()
  endforeach()
  # Targets with a link of their own verified through a stamp target: `--target <t>` skips the
  # check. add_custom_command(TARGET ... POST_BUILD) must be called from the target's directory,
  # which this call is not; the user's one line in that directory fixes it.
  get_property(_stamped GLOBAL PROPERTY _CAG_STAMPED)
  if(_stamped)
    if(CMAKE_VERSION VERSION_LESS 3.19)
      set(_why "CMake ${CMAKE_VERSION} has no cmake_language(DEFER) to attach it at the end of each target's directory (CMake >= 3.19 does)")
    else()
      set(_why "their directories were finished before include(CudaArchGuard) or they were passed to cuda_arch_guard_verify() from another directory")
    endif()
    set(_lines "")
    foreach(_t IN LISTS _stamped)
      get_target_property(_sd ${_t} SOURCE_DIR)
      file(RELATIVE_PATH _rel "${CMAKE_SOURCE_DIR}" "${_sd}/CMakeLists.txt")
      string(APPEND _lines "\n  cuda_arch_guard_verify(${_t})   # in ${_rel}, after the target is created")
    endforeach()
    list(LENGTH _stamped _n)
    message(WARNING "CudaArchGuard: ${_n} target(s) are verified by a stamp target <target>_archguard_verify in 'all', "
                    "not by a POST_BUILD step of their own link, so `cmake --build <dir> --target <target>` builds them "
                    "unverified: a POST_BUILD step can only be attached from the target's own directory, and ${_why}. "
                    "To verify each on its own build, add this line to its directory:${_lines}")
  endif()
  # nvcc >= 11.2 compiles one file's architectures in parallel (--threads). "auto" gives each file
  # its share of the CPUs (CPUs / CUDA files, at most one thread per image), so that a project
  # with fewer files than CPUs gains and one that already fills them with -j is not oversubscribed.
  set(_threads "${CudaArchGuard_NVCC_THREADS}")
  if(_threads STREQUAL "auto")
    cmake_host_system_information(RESULT _cpus QUERY NUMBER_OF_LOGICAL_CORES)
    list(LENGTH CudaArchGuard_GENCODE_FLAGS _images)
    set(_threads 1)
    if(_files GREATER 0)
      math(EXPR _threads "(${_cpus} + ${_files} - 1) / ${_files}")
    endif()
    if(_threads GREATER _images)
      set(_threads ${_images})
    endif()
  endif()
  if(NOT _threads MATCHES "^[0-9]+$" OR _threads EQUAL 1 OR CudaArchGuard_NVCC_VERSION VERSION_LESS 11.2)
    set(_threads "")
  endif()
  if(_threads)
    foreach(_t IN LISTS _cuda_targets)
      get_target_property(_opts ${_t} COMPILE_OPTIONS)
      if(NOT "${_opts}" MATCHES "--threads|(^|;)-t[ =0-9]")
        set_property(TARGET ${_t} APPEND PROPERTY COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:--threads=${_threads}>")
      endif()
    endforeach()
  endif()
endfunction()

function(_cag_watch variable access value)
  if(access STREQUAL "MODIFIED_ACCESS" AND "${value}" STREQUAL "")
    _cag_finish()  # CMake 3.18: the whole project has been read (a no-op after the deferred call)
  endif()
endfunction()

# Every new target reads CMAKE_CUDA_ARCHITECTURES (to initialise its CUDA_ARCHITECTURES) while its
# directory's CMakeLists.txt is being executed: the moment to schedule that directory's end-of-
# directory call. (Scheduling when CMAKE_CURRENT_LIST_DIR changes on entering a directory is
# refused by CMake >= 4.1: "DEFER CALL may not be scheduled in directory ... at this time".)
function(_cag_watch_archs variable access value)
  if(access STREQUAL "READ_ACCESS" OR access STREQUAL "UNKNOWN_READ_ACCESS")
    _cag_register_dir("${CMAKE_CURRENT_SOURCE_DIR}")
  elseif(access STREQUAL "MODIFIED_ACCESS" OR access STREQUAL "REMOVED_ACCESS")
    # The project changes the list after the include: remember the file, for the summary.
    set_property(GLOBAL APPEND PROPERTY _CAG_ARCHS_CHANGED_IN "${CMAKE_CURRENT_LIST_FILE}")
  endif()
endfunction()

# Targets made before the include took CMake's default: the policy replaces it on them.
_cag_collect_targets("${CMAKE_SOURCE_DIR}" _cag_before)
set_property(GLOBAL PROPERTY _CAG_TARGETS_BEFORE "${_cag_before}")
if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.19)
  set(_cag_dir "${CMAKE_CURRENT_SOURCE_DIR}")
  while(_cag_dir)
    _cag_register_dir("${_cag_dir}")
    get_property(_cag_dir DIRECTORY "${_cag_dir}" PROPERTY PARENT_DIRECTORY)
  endwhile()
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _cag_finish)
  variable_watch(CMAKE_CUDA_ARCHITECTURES _cag_watch_archs)
else()
  variable_watch(CMAKE_CURRENT_LIST_DIR _cag_watch)
endif()

list(POP_BACK CMAKE_MESSAGE_CONTEXT)
