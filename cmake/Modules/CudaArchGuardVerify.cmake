# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
CudaArchGuardVerify
-------------------

Checks, as part of the build, that a finished binary really holds the architectures it was
meant to: a missing SASS or PTX image fails the build with a message naming the target, the
file and what is missing, instead of a user's "no kernel image is available" months later.

Usable alone (``include(CudaArchGuardVerify)``: it includes what it uses) or through
``CudaArchGuard``, which calls it for every CUDA target.

.. code-block:: cmake

  cuda_arch_guard_verify(<target> [ARCHITECTURES <arch>...] [PTX highest|none|<arch>])

``<target>``
  An executable, shared, module, static or object library with CUDA sources. Executables and
  libraries are checked on their file, object libraries on each of their objects.
``ARCHITECTURES``
  What the target must hold, in any dialect (``90`` = SASS + PTX, ``90-real`` = SASS only,
  ``sm_90``, ``9.0+PTX``, ``all-major``). Default: the target's own resolved
  ``CUDA_ARCHITECTURES`` (``ARCH_POLICY``'s list when the property is ``OFF``; used alone, a
  target whose property is ``OFF`` needs ``ARCHITECTURES``).
``PTX``
  Overrides the PTX requirement: ``none`` (SASS only), ``highest`` (PTX for the highest
  required architecture) or an architecture (``90``).

The check runs ``archguard verify <file> --require <SASS as X-real list> --ptx <X-virtual list|none>`` when
``CudaArchGuard_EXECUTABLE`` names the tool (a path, or a target of this build, which is then
built first); otherwise ``cuobjdump --list-elf/--list-ptx`` (``CudaArchGuard_CUOBJDUMP``, found
on ``PATH`` and beside nvcc); with neither, ``cuda_arch_guard_verify`` says at configure time
that verification is off. Where the target lives in the calling directory the check is a
``POST_BUILD`` step; otherwise (and for object libraries) it is a custom target
``<target>_archguard_verify`` that is part of ``all``, which ``cmake --build --target <target>``
does not build: CMake attaches a ``POST_BUILD`` step only from the target's own directory
(``add_custom_command(TARGET)``). Call ``cuda_arch_guard_verify(<target>)`` there, after the
target is created, to make it a ``POST_BUILD`` step; the automatic verification of
``CudaArchGuard`` lists every target left with a stamp target, and that line, in a warning.

The verify step itself is the script ``CudaArchGuard/verify-step.cmake`` (``-P`` on this file
runs the same):

.. code-block:: console

  cmake -DTARGET=<name> -DFILES=<f1|f2> -DREQUIRE=<sass:80|ptx:90> [-DARCHGUARD=<exe>]
        [-DCUOBJDUMP=<exe>] [-DREASON=<text>] [-DSTAMP=<file>] -P CudaArchGuard/verify-step.cmake
#]=======================================================================]
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE AND NOT _CAG_SCRIPT)
  include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuard/verify-step.cmake")  # the script mode lives there
  return()
endif()
include_guard(GLOBAL)
cmake_policy(VERSION 3.18...4.4)
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardTokens.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardPolicy.cmake")  # cuda_arch_guard_resolve_policy
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardVerifier.cmake")  # _cag_verifier_build

# ---- configure-time side ------------------------------------------------------------------

# Whether a target has CUDA sources (.cu files or sources marked LANGUAGE CUDA), and how many.
function(_cag_target_has_cuda target out_var)
  set(_n 0)
  get_target_property(_srcs ${target} SOURCES)
  if(_srcs)
    foreach(_s IN LISTS _srcs)
      if(_s MATCHES "\\.cu$")
        math(EXPR _n "${_n} + 1")
      elseif(NOT _s MATCHES "\\$<")
        get_property(_lang SOURCE "${_s}" TARGET_DIRECTORY ${target} PROPERTY LANGUAGE)
        if(_lang STREQUAL "CUDA")
          math(EXPR _n "${_n} + 1")
        endif()
      endif()
    endforeach()
  endif()
  if(_n GREATER 0)
    set(${out_var} ON PARENT_SCOPE)
  else()
    set(${out_var} OFF PARENT_SCOPE)
  endif()
  if(ARGC GREATER 2)
    set(${ARGV2} ${_n} PARENT_SCOPE)
  endif()
endfunction()

# The tool the verify step runs: sets <out_prefix>_CMD (command words), <out_prefix>_DEP (target
# to build first or ""), <out_prefix>_KIND (archguard | builtin | cuobjdump | ""): the archguard
# tool when named, else archguard-verify built here (unless CudaArchGuard_BUILTIN_VERIFIER is
# OFF), else cuobjdump.
function(_cag_verify_tool out_prefix)
  set(_cmd "")
  set(_dep "")
  set(_kind "")
  if(NOT CudaArchGuard_EXECUTABLE)
    get_property(CudaArchGuard_EXECUTABLE GLOBAL PROPERTY _CAG_EXECUTABLE)
  endif()
  if(CudaArchGuard_EXECUTABLE)
    if(TARGET "${CudaArchGuard_EXECUTABLE}")
      set(_cmd "-DARCHGUARD=$<TARGET_FILE:${CudaArchGuard_EXECUTABLE}>")
      set(_dep "${CudaArchGuard_EXECUTABLE}")
      set(_kind archguard)
    elseif(EXISTS "${CudaArchGuard_EXECUTABLE}")
      # A tool from before the verify verb existed cannot check: ask it once per process, and
      # again on a re-configure only when the tool changed (path, size, mtime: the cache entry).
      get_property(_ok GLOBAL PROPERTY _CAG_TOOL_OK_${CudaArchGuard_EXECUTABLE})
      if("${_ok}" STREQUAL "")
        file(TIMESTAMP "${CudaArchGuard_EXECUTABLE}" _mtime "%Y-%m-%dT%H:%M:%S" UTC)
        file(SIZE "${CudaArchGuard_EXECUTABLE}" _size)
        set(_id "${CudaArchGuard_EXECUTABLE}|${_size}|${_mtime}")
        if("${_CAG_TOOL_PROBE}" MATCHES "^(ON|OFF)=(.*)$" AND CMAKE_MATCH_2 STREQUAL _id)
          set(_ok "${CMAKE_MATCH_1}")
        else()
          execute_process(COMMAND "${CudaArchGuard_EXECUTABLE}" verify --help
                          RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
          if(_rc EQUAL 0)
            set(_ok ON)
          else()
            set(_ok OFF)
          endif()
          if(NOT CMAKE_SCRIPT_MODE_FILE)
            set(_CAG_TOOL_PROBE "${_ok}=${_id}" CACHE INTERNAL "CudaArchGuard: whether the tool has the verify verb")
          endif()
        endif()
        set_property(GLOBAL PROPERTY _CAG_TOOL_OK_${CudaArchGuard_EXECUTABLE} ${_ok})
      endif()
      if(_ok)
        set(_cmd "-DARCHGUARD=${CudaArchGuard_EXECUTABLE}")
        set(_kind archguard)
      endif()
    endif()
  endif()
  if(NOT _kind AND (NOT DEFINED CudaArchGuard_BUILTIN_VERIFIER OR CudaArchGuard_BUILTIN_VERIFIER))
    _cag_verifier_build(_exe _why)
    if(_exe)
      set(_cmd "-DARCHGUARD=${_exe}")
      set(_kind builtin)
    endif()
  endif()
  if(NOT _kind AND CudaArchGuard_CUOBJDUMP AND EXISTS "${CudaArchGuard_CUOBJDUMP}")
    set(_cmd "-DCUOBJDUMP=${CudaArchGuard_CUOBJDUMP}")
    set(_kind cuobjdump)
  endif()
  set(${out_prefix}_CMD "${_cmd}" PARENT_SCOPE)
  set(${out_prefix}_DEP "${_dep}" PARENT_SCOPE)
  set(${out_prefix}_KIND "${_kind}" PARENT_SCOPE)
endfunction()

# The items a target must hold, from an explicit list or its CUDA_ARCHITECTURES.
function(_cag_verify_requirement target archs ptx out_items out_reason)
  if(archs)
    set(_reason "cuda_arch_guard_verify(ARCHITECTURES ${archs})")
    set(_value "${archs}")
    set(_who "cuda_arch_guard_verify: target '${target}': ARCHITECTURES ${archs}")
  else()
    get_target_property(_from ${target} _CAG_REQUIRE_FROM)  # no CUDA source: its linked objects' list
    if(NOT _from)
      set(_from ${target})
    endif()
    get_target_property(_value ${_from} CUDA_ARCHITECTURES)
    set(_who "CudaArchGuard: target '${_from}': CUDA_ARCHITECTURES ${_value}")
    if((NOT _value OR _value STREQUAL "OFF") AND "${CudaArchGuard_ARCHITECTURES}" STREQUAL "")
      message(FATAL_ERROR "cuda_arch_guard_verify: target '${target}': its CUDA_ARCHITECTURES is ${_value} and no "
                          "ARCH_POLICY was resolved (include(CudaArchGuard) does that); give ARCHITECTURES <arch>...")
    elseif(NOT _value OR _value STREQUAL "OFF")
      set(_reason "ARCH_POLICY; the target's CUDA_ARCHITECTURES is ${_value}")
      set(_value "${CudaArchGuard_ARCHITECTURES}")
    elseif(NOT _from STREQUAL target)
      set(_reason "the CUDA_ARCHITECTURES of '${_from}', linked into it")
    else()
      set(_reason "the target's CUDA_ARCHITECTURES")
    endif()
  endif()
  # Resolve through the engine (all-major, native, any dialect), memoised per value.
  string(MD5 _key "${_value}")
  get_property(_memo GLOBAL PROPERTY _CAG_REQ_${_key})
  if(NOT _memo AND "${_value}" STREQUAL "${CudaArchGuard_ARCHITECTURES}" AND CudaArchGuard_ITEMS)
    set(_memo "${CudaArchGuard_ITEMS}")  # the policy's own list: already resolved
  endif()
  if(NOT _memo)
    cuda_arch_guard_resolve_policy(POLICY "${_value}" EXACT WHO "${_who}" NVCC "${CMAKE_CUDA_COMPILER}"
      NVIDIA_SMI "${CudaArchGuard_NVIDIA_SMI}" CACHE_DIR "${_CAG_CACHE_DIR}" PREFIX _cag_req)
    set(_memo "${_cag_req_ITEMS}")
    set_property(GLOBAL PROPERTY _CAG_REQ_${_key} "${_memo}")
  endif()
  set(_items "${_memo}")
  if(ptx)
    list(FILTER _items EXCLUDE REGEX "^ptx:")
    if(ptx STREQUAL "none")
      string(APPEND _reason ", PTX none")
    elseif(ptx STREQUAL "highest")
      _cag_items_highest_sass("${_items}" _hi)
      if(_hi)
        list(APPEND _items "ptx:${_hi}")
      endif()
    else()
      _cag_tokens_parse("${ptx}" _p _err)
      if(_err)
        message(FATAL_ERROR "cuda_arch_guard_verify: target '${target}': PTX '${ptx}' is not highest, none or an architecture such as 90 (${_err})")
      endif()
      foreach(_it IN LISTS _p)
        string(REGEX REPLACE "^[a-z]+:" "ptx:" _it "${_it}")
        list(APPEND _items "${_it}")
      endforeach()
      list(REMOVE_DUPLICATES _items)
      string(APPEND _reason ", PTX ${ptx}")
    endif()
  endif()
  set(${out_items} "${_items}" PARENT_SCOPE)
  set(${out_reason} "${_reason}" PARENT_SCOPE)
endfunction()

function(cuda_arch_guard_verify target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PTX" "ARCHITECTURES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "cuda_arch_guard_verify: target '${target}': unknown arguments '${arg_UNPARSED_ARGUMENTS}'; "
                        "use ARCHITECTURES <arch>... and PTX highest|none|<arch>")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "cuda_arch_guard_verify: '${target}' is not a target; call it after add_executable/add_library")
  endif()
  get_target_property(_type ${target} TYPE)
  get_target_property(_imported ${target} IMPORTED)
  get_target_property(_aliased ${target} ALIASED_TARGET)
  if(_imported OR _aliased)
    message(FATAL_ERROR "cuda_arch_guard_verify: target '${target}' is imported or an alias; verify the real target where it is built")
  endif()
  if(_type STREQUAL "OBJECT_LIBRARY")
    set(_files "$<JOIN:$<TARGET_OBJECTS:${target}>,|>")
  elseif(_type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY|STATIC_LIBRARY)$")
    set(_files "$<TARGET_FILE:${target}>")
  else()
    message(FATAL_ERROR "cuda_arch_guard_verify: target '${target}' is a ${_type}; only executables, "
                        "shared, module, static and object libraries hold device code")
  endif()
  get_target_property(_done ${target} _CAG_VERIFY_ATTACHED)
  if(_done)
    return()
  endif()
  # Resolve the requirement first, so that a bad ARCHITECTURES fails even without a tool.
  _cag_verify_requirement(${target} "${arg_ARCHITECTURES}" "${arg_PTX}" _items _reason)
  _cag_verify_tool(_tool)
  if(NOT _tool_KIND)
    get_property(_said GLOBAL PROPERTY _CAG_VERIFY_OFF_SAID)
    if(NOT _said)
      message(WARNING "CudaArchGuard: verification is off: neither the archguard tool (CudaArchGuard_EXECUTABLE) "
                      "nor cuobjdump (CudaArchGuard_CUOBJDUMP) was found. Install CudaArchGuard and use "
                      "find_package(CudaArchGuard), or point CudaArchGuard_CUOBJDUMP at cuobjdump.")
      set_property(GLOBAL PROPERTY _CAG_VERIFY_OFF_SAID ON)
    endif()
    return()
  endif()
  string(REPLACE ";" "|" _req "${_items}")
  _cag_tokens_format("${_items}" cmake _req_text)
  set_property(TARGET ${target} PROPERTY _CAG_VERIFY_ATTACHED ON)
  set(_cmd "${CMAKE_COMMAND}" "-DTARGET=${target}" "-DFILES=${_files}" "-DREQUIRE=${_req}"
           "-DREASON=${_reason}" ${_tool_CMD})
  get_target_property(_bindir ${target} BINARY_DIR)
  if(NOT _type STREQUAL "OBJECT_LIBRARY" AND _bindir STREQUAL CMAKE_CURRENT_BINARY_DIR)
    add_custom_command(TARGET ${target} POST_BUILD
      COMMAND ${_cmd} -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/verify-step.cmake"
      COMMENT "CudaArchGuard: verifying ${target} holds ${_req_text}"
      VERBATIM)
    if(_tool_DEP)
      add_dependencies(${target} ${_tool_DEP})
    endif()
  else()
    # add_custom_command(TARGET) only works in the target's directory: use a stamp instead.
    set(_stamp "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/CudaArchGuard/${target}.verified")
    set(_dep_files "${_files}")
    if(_type STREQUAL "OBJECT_LIBRARY")
      set(_dep_files "$<TARGET_OBJECTS:${target}>")
    endif()
    add_custom_command(OUTPUT "${_stamp}"
      COMMAND ${_cmd} "-DSTAMP=${_stamp}" -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/verify-step.cmake"
      DEPENDS ${target} ${_tool_DEP} "${_dep_files}" "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/verify-step.cmake"
      COMMENT "CudaArchGuard: verifying ${target} holds ${_req_text}"
      VERBATIM)
    add_custom_target(${target}_archguard_verify ALL DEPENDS "${_stamp}")
    if(NOT _type STREQUAL "OBJECT_LIBRARY")
      # A target with a link of its own that `--target` builds unverified: listed in one warning
      # at the end of the configure step, with the line that fixes it (CudaArchGuard.cmake).
      set_property(GLOBAL APPEND PROPERTY _CAG_STAMPED ${target})
    endif()
  endif()
endfunction()
