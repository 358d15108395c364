# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
run_consumer
------------

Configures and builds a consumer project with a given CMake (``ctest --build-and-test`` always
uses the CMake that runs it, the matrix needs others). Fails when either step fails; prints the
build output so that the test can match the verify step's line.

.. code-block:: console

  cmake -DCMAKE_UNDER_TEST=<cmake> -DSOURCE=<dir> -DBUILD=<dir> -DOPTIONS=<-Da;-Db> -P run_consumer.cmake
#]=======================================================================]
cmake_policy(VERSION 3.18)
file(REMOVE_RECURSE "${BUILD}")
execute_process(COMMAND "${CMAKE_UNDER_TEST}" -S "${SOURCE}" -B "${BUILD}" -G Ninja ${OPTIONS}
                RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "run_consumer: configuring ${SOURCE} with ${CMAKE_UNDER_TEST} failed (exit ${_rc})")
endif()
execute_process(COMMAND "${CMAKE_UNDER_TEST}" --build "${BUILD}" RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "run_consumer: building ${SOURCE} with ${CMAKE_UNDER_TEST} failed (exit ${_rc})")
endif()
