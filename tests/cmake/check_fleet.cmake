# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
check_fleet
-----------

Runs ``ARCH_POLICY=fleet:<file>`` through the module (``cuda_arch_guard_resolve_policy``, which
hands the file to the policy engine's one fleet reader through ``arch plan``) over the corpus
shared with the C++ unit test (``tests/data/fleet/EXPECTED.txt``: ``<file>|<sms>`` or
``<file>|ERROR|<line>|<fragment>``) and fails on every disagreement. The GPUs are compared as a
multiset (one SM per row, in any order), as the C++ test does. Each case runs in a child ``cmake
-P`` (a reader error is a FATAL_ERROR). Also generates a file holding a NUL byte in
``WORK_DIR``, which the corpus cannot hold as text. ``NVCC`` (a fake one will do: nothing is
compiled) and ``ARCHGUARD`` (archguard or archguard-verify) are passed on to the child.

.. code-block:: console

  cmake -DCORPUS_DIR=tests/data/fleet -DMODULE_DIR=cmake/Modules -DWORK_DIR=/tmp/x \
        -DNVCC=tests/cmake/fake/cuda-13.0/bin/nvcc -DARCHGUARD=build/default/tools/archguard-verify/archguard-verify -P check_fleet.cmake
#]=======================================================================]
cmake_policy(VERSION 3.18)
if(DEFINED ONE)  # child: resolve fleet:<one file>, print its GPUs' SMs sorted
  include("${MODULE_DIR}/CudaArchGuardPolicy.cmake")
  set(CudaArchGuard_EXECUTABLE "${ARCHGUARD}")
  cuda_arch_guard_resolve_policy(POLICY "fleet:${ONE}" NVCC "${NVCC}")
  set(_sms "${CudaArchGuard_GPU_SMS}")
  list(SORT _sms COMPARE NATURAL)
  string(REPLACE ";" "," _sms "${_sms}")
  message("SMS=${_sms}")
  return()
endif()

function(_run_case file out_var)
  execute_process(COMMAND "${CMAKE_COMMAND}" "-DONE=${file}" "-DMODULE_DIR=${MODULE_DIR}" "-DNVCC=${NVCC}" "-DARCHGUARD=${ARCHGUARD}"
                          -P "${CMAKE_CURRENT_LIST_FILE}"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  set(${out_var} "${_rc}|${_out}${_err}" PARENT_SCOPE)
endfunction()

include("${CMAKE_CURRENT_LIST_DIR}/corpus_lines.cmake")
_cag_corpus_lines("${CORPUS_DIR}/EXPECTED.txt" _lines)  # the fragments hold '[' and '\'
set(_n 0)
set(_bad "")
foreach(_l IN LISTS _lines)
  if(_l STREQUAL "" OR _l MATCHES "^#")
    continue()
  endif()
  string(REPLACE "|" ";" _f "${_l}")
  list(GET _f 0 _file)
  list(GET _f 1 _want)
  _run_case("${CORPUS_DIR}/${_file}" _got)
  string(REPLACE "@BS@" "\\" _got_shown "${_got}")
  math(EXPR _n "${_n} + 1")
  if(_want STREQUAL "ERROR")
    list(GET _f 2 _line)
    list(GET _f 3 _frag)
    _cag_corpus_unescape(_frag)
    set(_where "${_file}:${_line}: ")
    if(_line STREQUAL "0")
      set(_where "${_file}")
    endif()
    string(REPLACE "\n" " " _flat "${_got}")
    string(REGEX REPLACE "  +" " " _flat "${_flat}")
    string(FIND "${_flat}" "${_frag}" _at_frag)
    string(FIND "${_flat}" "${_where}" _at_where)
    if(_got MATCHES "^0\\|" OR _at_frag EQUAL -1 OR _at_where EQUAL -1)
      string(APPEND _bad "\n  ${_file}: expected an error at '${_where}' containing '${_frag}', got: ${_flat}")
    endif()
  else()
    string(REPLACE "," ";" _want "${_want}")
    list(SORT _want COMPARE NATURAL)
    string(REPLACE ";" "," _want "${_want}")
    if(NOT _got MATCHES "^0\\|.*SMS=${_want}\n")
      string(APPEND _bad "\n  ${_file}: expected SMS=${_want}, got: ${_got_shown}")
    endif()
  endif()
endforeach()

# A NUL byte: file(READ) would stop there; the reader must say so, not read half the file.
if(WORK_DIR)
  file(MAKE_DIRECTORY "${WORK_DIR}")
  # CMake strings cannot hold a NUL byte: the shell writes the file.
  execute_process(COMMAND sh -c "printf 'NVIDIA A100, 8.0\\nbroken\\000 GPU, 9.0\\nNVIDIA H100, 9.0\\n' > '${WORK_DIR}/nul.csv'")
  _run_case("${WORK_DIR}/nul.csv" _got)
  math(EXPR _n "${_n} + 1")
  string(REGEX REPLACE "[ \n]+" " " _flat "${_got}")
  if(_got MATCHES "^0\\|" OR NOT _flat MATCHES "nul.csv:2: the line holds a NUL byte")
    string(APPEND _bad "\n  nul.csv: expected an error about the NUL byte on line 2, got: ${_got}")
  endif()
endif()

if(_bad)
  message(FATAL_ERROR "check_fleet: ${_n} cases, disagreements:${_bad}")
endif()
message(STATUS "check_fleet: ${_n} cases agree")
