# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
run_consumer
------------

Configures and builds a consumer project with a given CMake (``ctest --build-and-test`` always
uses the CMake that runs it, the matrix needs others). Fails when either step fails; prints the
build output so that the test can match the verify step's line.

.. code-block:: console

  cmake -DCMAKE_UNDER_TEST=<cmake> -DSOURCE=<dir> -DBUILD=<dir> -DOPTIONS=<-Da;-Db>
        [-DEXPECT=<regex|regex>] [-DEXPECT_CONFIGURE=<regex>] [-DFORBID=<regex>] [-DTARGET=<target>] [-DEXPECT_FAIL=ON]
        -P run_consumer.cmake

``EXPECT``: regexes that must all match the build output; ``FORBID``: one that must not;
``EXPECT_CONFIGURE``: one regex that must match the configure output.
``TARGET``: build only that target (``--target``); ``EXPECT_FAIL``: the build must fail.
#]=======================================================================]
cmake_policy(VERSION 3.18)
file(REMOVE_RECURSE "${BUILD}")
execute_process(COMMAND "${CMAKE_UNDER_TEST}" -S "${SOURCE}" -B "${BUILD}" -G Ninja ${OPTIONS}
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _cfg_out ERROR_VARIABLE _cfg_err)
message("${_cfg_out}${_cfg_err}")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "run_consumer: configuring ${SOURCE} with ${CMAKE_UNDER_TEST} failed (exit ${_rc})")
endif()
if(EXPECT_CONFIGURE AND NOT "${_cfg_out}${_cfg_err}" MATCHES "${EXPECT_CONFIGURE}")
  message(FATAL_ERROR "run_consumer: the configure output lacks '${EXPECT_CONFIGURE}'")
endif()
set(_target "")
if(TARGET)
  set(_target --target "${TARGET}")
endif()
execute_process(COMMAND "${CMAKE_UNDER_TEST}" --build "${BUILD}" ${_target} RESULT_VARIABLE _rc
                OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
message("${_out}${_err}")
if(EXPECT_FAIL AND _rc EQUAL 0)
  message(FATAL_ERROR "run_consumer: building ${SOURCE} with ${CMAKE_UNDER_TEST} succeeded; it must fail")
elseif(NOT EXPECT_FAIL AND NOT _rc EQUAL 0)
  message(FATAL_ERROR "run_consumer: building ${SOURCE} with ${CMAKE_UNDER_TEST} failed (exit ${_rc})")
endif()
string(REPLACE "|" ";" _expect "${EXPECT}")
foreach(_re IN LISTS _expect)
  if(NOT "${_out}${_err}" MATCHES "${_re}")
    message(FATAL_ERROR "run_consumer: the build output lacks '${_re}'")
  endif()
endforeach()
if(FORBID AND "${_out}${_err}" MATCHES "${FORBID}")
  message(FATAL_ERROR "run_consumer: the build output matches '${FORBID}', which it must not")
endif()
