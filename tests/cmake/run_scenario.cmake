# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
run_scenario
------------

Runs one CudaArchGuard scenario and checks its exit status and output (rapids-cmake
``testing/`` style, one case per test):

.. code-block:: console

  cmake -DCMAKE_UNDER_TEST=<cmake> -DEXPECT=pass|fail -DMATCH=<regex> [-DNOT_MATCH=<regex>]
        [-DENV=<k=v|k=v>] [-DPROJECT=<dir> -DBUILD=<dir>] [-DAFTER=ON | -DSCRIPT=<file>] -DARGS=<-Da=b|-Dc=d> -P run_scenario.cmake

Without ``PROJECT`` it runs ``<cmake> <ARGS> -P CudaArchGuardPolicy.cmake`` (script mode,
nothing compiled), or with ``AFTER=ON`` ``<cmake> -P CudaArchGuardPolicy.cmake <ARGS>``; with
``PROJECT`` it configures that tiny project. In ``MATCH``/``NOT_MATCH`` an ``@``
stands for ``;``. The output checked is stdout and stderr together (in either order).
#]=======================================================================]
cmake_policy(VERSION 3.18)
include("${CMAKE_CURRENT_LIST_DIR}/../script_args.cmake")
cag_script_require(run_scenario CMAKE_UNDER_TEST EXPECT MATCH MODULE_DIR)
string(REPLACE "|" ";" _args "${ARGS}")
set(_esc "")
foreach(_a IN LISTS _args)
  string(REPLACE "@" "\\;" _a "${_a}")   # an escaped ';' survives as one argument
  list(APPEND _esc "${_a}")
endforeach()
set(_args "${_esc}")
string(REPLACE "@" ";" MATCH "${MATCH}")
string(REPLACE "@" ";" NOT_MATCH "${NOT_MATCH}")
set(_env "")
if(ENV)
  string(REPLACE "|" ";" _env "${ENV}")
endif()
# ${_args} is expanded exactly once, so the escaped ';' of a list value stays inside its argument.
if(PROJECT)
  file(REMOVE_RECURSE "${BUILD}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env ${_env}
                          "${CMAKE_UNDER_TEST}" -S "${PROJECT}" -B "${BUILD}" -G Ninja "-DCAG_MODULE_DIR=${MODULE_DIR}" ${_args}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
else()
  if(SCRIPT)  # another scenario script instead of the policy engine's own script mode
    execute_process(COMMAND "${CMAKE_COMMAND}" -E env ${_env}
                            "${CMAKE_UNDER_TEST}" "-DMODULE_DIR=${MODULE_DIR}" ${_args} -P "${SCRIPT}"
                    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  elseif(AFTER)  # "cmake -P script -Da=b", as the documentation writes it
    execute_process(COMMAND "${CMAKE_COMMAND}" -E env ${_env}
                            "${CMAKE_UNDER_TEST}" -P "${MODULE_DIR}/CudaArchGuardPolicy.cmake" ${_args}
                    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  else()
    execute_process(COMMAND "${CMAKE_COMMAND}" -E env ${_env}
                            "${CMAKE_UNDER_TEST}" ${_args} -P "${MODULE_DIR}/CudaArchGuardPolicy.cmake"
                    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  endif()
endif()
# stdout and stderr are captured apart, so a regex spanning both is tried in both orders.
set(_all "${_out}${_err}")
set(_rev "${_err}${_out}")
# CMake wraps long messages onto indented lines: also compare with those folded to blanks
# (unindented lines, such as a printed result, keep their line break).
string(REGEX REPLACE "[ \t]*\n[ \t]+" " " _flat "${_rev}")
set(_bad "")
if(EXPECT STREQUAL "pass" AND NOT _rc EQUAL 0)
  set(_bad "expected success, got exit ${_rc}")
elseif(EXPECT STREQUAL "fail" AND _rc EQUAL 0)
  set(_bad "expected failure, got exit 0")
elseif(NOT EXPECT MATCHES "^(pass|fail)$")
  set(_bad "EXPECT must be pass or fail, got '${EXPECT}'")
endif()
if(NOT _bad AND NOT _all MATCHES "${MATCH}" AND NOT _rev MATCHES "${MATCH}" AND NOT _flat MATCHES "${MATCH}")
  set(_bad "output does not match '${MATCH}'")
endif()
if(NOT _bad AND NOT "${NOT_MATCH}" STREQUAL "" AND (_all MATCHES "${NOT_MATCH}" OR _flat MATCHES "${NOT_MATCH}"))
  set(_bad "output matches '${NOT_MATCH}', which it must not")
endif()
if(_bad)
  message(FATAL_ERROR "scenario failed: ${_bad}\narguments: ${ARGS} ${PROJECT}\n--- stdout ---\n${_out}\n--- stderr ---\n${_err}")
endif()
message(STATUS "scenario ok (exit ${_rc})")
