# SPDX-License-Identifier: Apache-2.0
# Re-configure and the policy answer (issue 25): the tool's `arch plan` answer is kept in the build
# tree and re-used while every input is unchanged, and asked again when one changes. Configures
# projects/plain with the real nvcc and a wrapper tool that logs each invocation:
#   cmake -DCMAKE_UNDER_TEST=<cmake> -DMODULE_DIR=<modules> -DPROJECT=<projects/plain> -DTOOL=<archguard>
#         -DNVCC=<nvcc> -DWORK=<dir> -P plan_cache.cmake
# Each step is one configure; the count of `arch plan` runs must grow by exactly what it says,
# and an unchanged re-configure starts the tool not at all.
cmake_policy(VERSION 3.19)
include("${CMAKE_CURRENT_LIST_DIR}/../script_args.cmake")
cag_script_require(plan_cache CMAKE_UNDER_TEST MODULE_DIR PROJECT TOOL NVCC WORK)
file(REMOVE_RECURSE "${WORK}")
# A copy of the modules, so that the table can change without touching the source tree.
file(COPY "${MODULE_DIR}/" DESTINATION "${WORK}/modules")
set(_log "${WORK}/tool.log")
set(_wrap "${WORK}/archguard-wrap")
function(write_wrapper extra)
  file(WRITE "${_wrap}" "#!/bin/sh\n# ${extra}\nprintf '%s\\n' \"$*\" >> '${_log}'\nexec '${TOOL}' \"$@\"\n")
  file(CHMOD "${_wrap}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
endfunction()
write_wrapper("first")
file(WRITE "${_log}" "")
file(WRITE "${WORK}/fleet.csv" "name, compute_cap\nNVIDIA A100-SXM4-80GB, 8.0\n")

set(_step 0)
# configure(<expected arch plan runs so far> <expected tool runs so far or -> <regex> [-D...])
function(configure plans runs match)
  math(EXPR _n "${_step} + 1")
  set(_step ${_n} PARENT_SCOPE)
  execute_process(COMMAND "${CMAKE_UNDER_TEST}" -S "${PROJECT}" -B "${WORK}/build" -G Ninja ${ARGN}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  file(STRINGS "${_log}" _lines)
  set(_p 0)
  set(_all 0)
  foreach(_l IN LISTS _lines)
    math(EXPR _all "${_all} + 1")
    if(_l MATCHES "^arch plan")
      math(EXPR _p "${_p} + 1")
    endif()
  endforeach()
  set(_bad "")
  if(NOT _rc EQUAL 0)
    set(_bad "exit ${_rc}")
  elseif(NOT _p EQUAL plans)
    set(_bad "${_p} arch plan runs so far, expected ${plans}")
  elseif(NOT runs STREQUAL "-" AND NOT _all EQUAL runs)
    set(_bad "${_all} tool runs so far, expected ${runs}")
  elseif(NOT "${_out}${_err}" MATCHES "${match}")
    set(_bad "the output does not match '${match}'")
  endif()
  if(_bad)
    message(FATAL_ERROR "plan_cache step ${_n} (${ARGN}): ${_bad}\n--- tool log ---\n${_lines}\n--- stdout ---\n${_out}\n--- stderr ---\n${_err}")
  endif()
  message(STATUS "step ${_n}: ${_p} arch plan runs, ${_all} tool runs (${ARGN})")
endfunction()

set(_ok80 "runs: .*APP_ARCHS_FINAL=80\n")  # the summary is shown on every configure, replayed or not
configure(1 - "${_ok80}" "-DCMAKE_CUDA_COMPILER=${NVCC}" "-DCAG_MODULE_DIR=${WORK}/modules"
          "-DCudaArchGuard_EXECUTABLE=${_wrap}" "-DARCH_POLICY=fleet:${WORK}/fleet.csv" -DCudaArchGuard_VERIFY=ON)
file(STRINGS "${_log}" _first)
list(LENGTH _first _runs)
# Unchanged: nothing is started (neither arch plan nor the verify verb's probe).
configure(1 ${_runs} "${_ok80}")
configure(1 ${_runs} "${_ok80}")
# Each input changed re-resolves once, then is re-used.
configure(2 - "ARCH_PTX=none.*APP_ARCHS_FINAL=80-real\n" -DARCH_PTX=none)
configure(2 - "APP_ARCHS_FINAL=80-real\n")
configure(3 - "ARCH_PTX=none ARCH_MIN=7.0" -DARCH_MIN=7.0)
file(APPEND "${WORK}/fleet.csv" "NVIDIA H100 80GB HBM3, 9.0\n")  # the fleet file's content
configure(4 - "APP_ARCHS_FINAL=80-real.90-real\n")
configure(4 - "APP_ARCHS_FINAL=80-real.90-real\n")
write_wrapper("the tool was replaced")                              # the tool's size and mtime
configure(5 - "APP_ARCHS_FINAL=80-real.90-real\n")
file(APPEND "${WORK}/modules/CudaArchGuard/architectures.txt" "# changed\n")  # the table
configure(6 - "APP_ARCHS_FINAL=80-real.90-real\n")
configure(7 - "APP_ARCHS_FINAL=86-real\n" -DARCH_POLICY=86 -DARCH_PTX=none -DARCH_MIN=)  # the policy
configure(7 - "APP_ARCHS_FINAL=86-real\n")
# A fleet file that is gone is asked for again (and its error stops the configure).
configure(8 - "APP_ARCHS_FINAL=80-real.90-real\n" "-DARCH_POLICY=fleet:${WORK}/fleet.csv")
file(REMOVE "${WORK}/fleet.csv")
execute_process(COMMAND "${CMAKE_UNDER_TEST}" -S "${PROJECT}" -B "${WORK}/build" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
file(STRINGS "${_log}" _lines)
list(FILTER _lines INCLUDE REGEX "^arch plan")
list(LENGTH _lines _p)
# CMake wraps a long message where it likes (it depends on the length of the paths in it).
string(REGEX REPLACE "[ \n]+" " " _err_flat "${_err}")
if(_rc EQUAL 0 OR NOT _p EQUAL 9 OR NOT "${_err_flat}" MATCHES "the fleet file does not exist")
  message(FATAL_ERROR "plan_cache: a removed fleet file must be asked for again and fail (exit ${_rc}, ${_p} arch plan runs)\n${_out}\n${_err}")
endif()
message(STATUS "plan_cache: ok")
