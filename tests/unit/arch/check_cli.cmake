# SPDX-License-Identifier: Apache-2.0
# Runs archguard with ARGS ('|'-separated) and checks the exit code and the output
# (stdout and stderr together) against a regular expression.
#   cmake -DARCHGUARD=<exe> "-DARGS=arch|explain|86a" -DEXPECT_RC=2 "-DEXPECT_REGEX=..." \
#         [-DREJECT_REGEX=...] -P check_cli.cmake
cmake_minimum_required(VERSION 3.18)  # script mode: set the policies (CMP0007 for list())
foreach(_v ARCHGUARD ARGS EXPECT_RC EXPECT_REGEX)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "check_cli: -D${_v}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" _args "${ARGS}")
execute_process(COMMAND "${ARCHGUARD}" ${_args} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
set(_all "${_out}${_err}")
string(REPLACE "|" " " _shown "${ARGS}")
if(NOT _rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "check_cli: 'archguard ${_shown}' exited ${_rc}, expected ${EXPECT_RC}; output:\n${_all}")
endif()
if(NOT _all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "check_cli: 'archguard ${_shown}' output does not match '${EXPECT_REGEX}':\n${_all}")
endif()
if(DEFINED REJECT_REGEX AND _all MATCHES "${REJECT_REGEX}")
  message(FATAL_ERROR "check_cli: 'archguard ${_shown}' output matches '${REJECT_REGEX}', which it must not:\n${_all}")
endif()
