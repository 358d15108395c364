# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
expect_run
----------

Runs one command and checks both what a user would: its exit status and its output. CTest's
``PASS_REGULAR_EXPRESSION`` alone ignores the exit status, so a test that expects a failure
message would also pass when the command printed it and then exited 0, and a test that expects
success would pass when the build printed the line and then failed.

.. code-block:: console

  cmake -DEXIT=0|nonzero|<n> -DMATCH=<regex> [-DNOT_MATCH=<regex>] -P expect_run.cmake -- <command> [<arg>...]

``MATCH`` must match stdout and stderr together (stdout first); ``NOT_MATCH`` must not.
#]=======================================================================]
cmake_policy(VERSION 3.18)
include("${CMAKE_CURRENT_LIST_DIR}/script_args.cmake")
cag_script_require(expect_run EXIT MATCH)
set(_cmd "")
set(_after FALSE)
math(EXPR _last "${CMAKE_ARGC} - 1")
foreach(_i RANGE 1 ${_last})
  if(_after)
    string(REPLACE ";" "\\;" _arg "${CMAKE_ARGV${_i}}")  # an argument holding ';' stays one argument
    list(APPEND _cmd "${_arg}")
  elseif(CMAKE_ARGV${_i} STREQUAL "--")
    set(_after TRUE)
  endif()
endforeach()
if(NOT _cmd)
  message(FATAL_ERROR "expect_run: no command after --")
endif()
execute_process(COMMAND ${_cmd} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
message("${_out}${_err}")
set(_bad "")
if(EXIT STREQUAL "nonzero")
  if(_rc STREQUAL "0" OR NOT _rc MATCHES "^[0-9]+$")
    set(_bad "expected a failing exit status, got '${_rc}'")
  endif()
elseif(NOT EXIT MATCHES "^[0-9]+$")
  set(_bad "EXIT must be a number or 'nonzero', got '${EXIT}'")
elseif(NOT _rc STREQUAL "${EXIT}")
  set(_bad "expected exit ${EXIT}, got '${_rc}'")
endif()
if(NOT _bad AND NOT "${_out}${_err}" MATCHES "${MATCH}")
  set(_bad "the output does not match '${MATCH}'")
endif()
if(NOT _bad AND DEFINED NOT_MATCH AND NOT NOT_MATCH STREQUAL "" AND "${_out}${_err}" MATCHES "${NOT_MATCH}")
  set(_bad "the output matches '${NOT_MATCH}', which it must not")
endif()
if(_bad)
  message(FATAL_ERROR "expect_run: ${_bad}\ncommand: ${_cmd}")
endif()
message(STATUS "expect_run: ok (exit ${_rc})")
