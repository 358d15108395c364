# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
CudaArchGuardVerifier
---------------------

Internal. ``archguard-verify``, the dependency-free tool built from the sources shipped with the
module (``tools/archguard-verify``: the project's own ELF, fatbin, architecture and coverage
sources; no compression or archive library, no CLI11), and the tool that reads the architecture
tokens the CMake side does not parse itself.

.. code-block:: cmake

  _cag_verifier_build(<out_exe> <out_why>)
  _cag_arch_tool(<out_exe> <out_why>)

``_cag_verifier_build`` builds the tool once per build tree and reuses it while its sources and
the C++ compiler stay the same. In a project that enables ``CXX`` it uses ``try_compile``; in a
project that does not (``LANGUAGES CUDA`` alone) and in script mode (``cmake -P``) it configures
and builds a small project of its own with ``execute_process``. ``CudaArchGuard_VERIFIER_DIR``
names where to build and keep it (default: ``<build>/CMakeFiles/CudaArchGuard/verifier``, in
script mode ``$XDG_CACHE_HOME/archguard/cmake-verifier`` or ``~/.cache/archguard/cmake-verifier``);
several build trees may share one, each build keyed by its sources and compiler and locked.
``<out_exe>`` is ``""`` (with ``<out_why>``) when it cannot be built.

``_cag_arch_tool`` gives the tool that answers ``arch plan`` (the policy engine) and ``arch
normalize`` (the token grammar) at configure time: the archguard tool when
``CudaArchGuard_EXECUTABLE`` names an existing file, else ``archguard-verify`` built here (unless
``CudaArchGuard_BUILTIN_VERIFIER`` is ``OFF``); ``""`` with ``<out_why>`` when neither can run.
#]=======================================================================]
include_guard(GLOBAL)
cmake_policy(VERSION 3.18...4.4)
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardToolkit.cmake")  # _cag_check: stderr in script mode, where stdout is the result

# Where the tool's sources are: beside the installed module, or the source tree. Sets <out_root>
# (or "" with <out_why>) and <out_files> (the list file's entries).
function(_cag_verifier_sources out_root out_files out_why)
  set(${out_root} "" PARENT_SCOPE)
  set(_list "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/verifier-sources.txt")
  if(EXISTS "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/verifier/tools/archguard-verify/main.cpp")
    set(_root "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/verifier")        # installed
  else()
    get_filename_component(_root "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../.." ABSOLUTE)  # the source tree
  endif()
  if(NOT EXISTS "${_list}" OR NOT EXISTS "${_root}/tools/archguard-verify/main.cpp")
    set(${out_why} "its sources are not beside the module (${_root})" PARENT_SCOPE)
    return()
  endif()
  file(STRINGS "${_list}" _files REGEX "^[^#]")
  set(${out_root} "${_root}" PARENT_SCOPE)
  set(${out_files} "${_files}" PARENT_SCOPE)
endfunction()

# Builds the tool with a project of its own (no CXX in the calling project, or script mode).
# Sets <out_ok> and appends the tools' output to <io_log>.
function(_cag_verifier_build_nested dir srcs root cxx out_ok io_log)
  set(_p "${dir}/project")
  set(_text "cmake_minimum_required(VERSION 3.18)\nproject(archguard_verify LANGUAGES CXX)\nadd_executable(archguard-verify")
  foreach(_s IN LISTS srcs)
    string(APPEND _text "\n  [==[${_s}]==]")
  endforeach()
  string(APPEND _text ")\ntarget_compile_definitions(archguard-verify PRIVATE ARCHGUARD_NO_COMPRESSION)\n"
         "target_include_directories(archguard-verify PRIVATE [==[${root}/include]==] [==[${root}/src]==] [==[${dir}/gen]==])\n"
         "set_target_properties(archguard-verify PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)\n")
  file(WRITE "${_p}/CMakeLists.txt" "${_text}")
  set(_args -S "${_p}" -B "${dir}/build" -DCMAKE_BUILD_TYPE=Release)
  if(CMAKE_GENERATOR)  # a project without CXX: its generator; script mode: CMake's default
    list(APPEND _args -G "${CMAKE_GENERATOR}")
    if(CMAKE_MAKE_PROGRAM)
      list(APPEND _args "-DCMAKE_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}")
    endif()
  endif()
  if(cxx)
    list(APPEND _args "-DCMAKE_CXX_COMPILER=${cxx}")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" ${_args} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  set(_log "${${io_log}}${_out}")
  if(_rc EQUAL 0)
    execute_process(COMMAND "${CMAKE_COMMAND}" --build "${dir}/build" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
    string(APPEND _log "${_out}")
  endif()
  set(_ok OFF)
  if(_rc EQUAL 0)
    file(GLOB_RECURSE _built "${dir}/build/archguard-verify${CMAKE_EXECUTABLE_SUFFIX}")
    if(_built)
      list(GET _built 0 _built)
      execute_process(COMMAND "${CMAKE_COMMAND}" -E copy "${_built}" "${dir}/archguard-verify${CMAKE_EXECUTABLE_SUFFIX}"
                      RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
      string(APPEND _log "${_out}")
      if(_rc EQUAL 0)
        set(_ok ON)
      endif()
    endif()
  endif()
  set(${out_ok} ${_ok} PARENT_SCOPE)
  set(${io_log} "${_log}" PARENT_SCOPE)
endfunction()

function(_cag_verifier_build out_var out_why)
  set(${out_var} "" PARENT_SCOPE)
  get_property(_known GLOBAL PROPERTY _CAG_VERIFIER SET)
  if(_known)
    get_property(_exe GLOBAL PROPERTY _CAG_VERIFIER)
    get_property(_why GLOBAL PROPERTY _CAG_VERIFIER_WHY)
    set(${out_var} "${_exe}" PARENT_SCOPE)
    set(${out_why} "${_why}" PARENT_SCOPE)
    return()
  endif()
  set(_exe "")
  set(_why "")
  get_property(_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(CMAKE_SCRIPT_MODE_FILE OR NOT "CXX" IN_LIST _langs)
    set(_how nested)
    set(_cxx "${CMAKE_CUDA_HOST_COMPILER}")  # the host compiler the project gave nvcc, else CMake's choice
    set(_key "nested;${_cxx}")
  else()
    set(_how try_compile)
    set(_key "${CMAKE_CXX_COMPILER};${CMAKE_CXX_COMPILER_VERSION}")
  endif()
  _cag_verifier_sources(_root _files _why)
  set(_dir "")
  if(_root)
    set(_srcs "")
    foreach(_f IN LISTS _files)
      file(MD5 "${_root}/${_f}" _h)
      string(APPEND _key ";${_h}")
      if(_f MATCHES "\\.cpp$")
        list(APPEND _srcs "${_root}/${_f}")
      endif()
    endforeach()
    file(MD5 "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/architectures.txt" _h)
    string(MD5 _key "${_key};${_h}")
    string(SUBSTRING "${_key}" 0 12 _short)
    if(CudaArchGuard_VERIFIER_DIR)
      set(_dir "${CudaArchGuard_VERIFIER_DIR}/${_short}")
    elseif(NOT CMAKE_SCRIPT_MODE_FILE)
      set(_dir "${CMAKE_BINARY_DIR}/CMakeFiles/CudaArchGuard/verifier")
    elseif(NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
      set(_dir "$ENV{XDG_CACHE_HOME}/archguard/cmake-verifier/${_short}")
    elseif(NOT "$ENV{HOME}" STREQUAL "")
      set(_dir "$ENV{HOME}/.cache/archguard/cmake-verifier/${_short}")
    else()
      set(_why "no directory to build it in (set CudaArchGuard_VERIFIER_DIR, XDG_CACHE_HOME or HOME)")
    endif()
  endif()
  if(_dir)
    file(MAKE_DIRECTORY "${_dir}")
    file(LOCK "${_dir}" DIRECTORY GUARD FUNCTION TIMEOUT 600)
    set(_exe "${_dir}/archguard-verify${CMAKE_EXECUTABLE_SUFFIX}")
    set(_old "")
    if(EXISTS "${_dir}/key.txt" AND EXISTS "${_exe}")
      file(READ "${_dir}/key.txt" _old)
    endif()
    if(NOT _old STREQUAL _key)
      _cag_check(START "CudaArchGuard: building the verify tool archguard-verify")
      file(REMOVE_RECURSE "${_dir}/build" "${_dir}/gen" "${_dir}/project")
      file(REMOVE "${_exe}")
      execute_process(COMMAND "${CMAKE_COMMAND}" -DEMIT=cxx "-DOUTPUT=${_dir}/gen/archguard/generated/arch_table.hpp"
                              -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/table-script.cmake"
                      RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
      set(_copy_err "")
      if(NOT _rc EQUAL 0)
        set(_ok OFF)
      elseif(_how STREQUAL "nested")
        _cag_verifier_build_nested("${_dir}" "${_srcs}" "${_root}" "${_cxx}" _ok _out)
      else()
        try_compile(_ok "${_dir}/build" SOURCES ${_srcs}
          COMPILE_DEFINITIONS -DARCHGUARD_NO_COMPRESSION "-I${_root}/include" "-I${_root}/src" "-I${_dir}/gen"
          CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
          OUTPUT_VARIABLE _out COPY_FILE "${_exe}" COPY_FILE_ERROR _copy_err)
      endif()
      if(_ok AND NOT _copy_err AND EXISTS "${_exe}")
        file(WRITE "${_dir}/key.txt" "${_key}")
        _cag_check(PASS "${_exe}")
      else()
        file(WRITE "${_dir}/error.log" "${_out}\n${_copy_err}\n")
        set(_why "compiling it failed (log: ${_dir}/error.log)")
        set(_exe "")
        _cag_check(FAIL "failed; see ${_dir}/error.log")
      endif()
    endif()
  endif()
  set_property(GLOBAL PROPERTY _CAG_VERIFIER "${_exe}")
  set_property(GLOBAL PROPERTY _CAG_VERIFIER_WHY "${_why}")
  set(${out_var} "${_exe}" PARENT_SCOPE)
  set(${out_why} "${_why}" PARENT_SCOPE)
endfunction()

function(_cag_arch_tool out_cmd out_why)
  set(_exe "${CudaArchGuard_EXECUTABLE}")
  if(NOT _exe)
    get_property(_exe GLOBAL PROPERTY _CAG_EXECUTABLE)
  endif()
  set(_cmd "")
  set(_why "")
  if(_exe AND NOT TARGET "${_exe}" AND EXISTS "${_exe}" AND NOT IS_DIRECTORY "${_exe}")
    set(_cmd "${_exe}")
  elseif(NOT DEFINED CudaArchGuard_BUILTIN_VERIFIER OR CudaArchGuard_BUILTIN_VERIFIER)
    _cag_verifier_build(_v _why)
    if(_v)
      set(_cmd "${_v}")
    else()
      set(_why "archguard-verify: ${_why}")
    endif()
  else()
    set(_why "CudaArchGuard_BUILTIN_VERIFIER is OFF and CudaArchGuard_EXECUTABLE names no archguard tool")
  endif()
  set(${out_cmd} "${_cmd}" PARENT_SCOPE)
  set(${out_why} "${_why}" PARENT_SCOPE)
endfunction()
