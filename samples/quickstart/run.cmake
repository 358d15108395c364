# SPDX-License-Identifier: Apache-2.0
# The quickstart smoke test: configure the standalone project against the module in this source
# tree, build it (the module's verify step runs as part of the build) and print its coverage.
#   cmake -DSOURCE=<samples/quickstart> -DBINARY=<dir> -DMODULES=<cmake/Modules>
#         -DARCHGUARD=<archguard> -DCUDA_COMPILER=<nvcc> [-DGENERATOR=Ninja] -P run.cmake
# The run itself is the separate test sample.quickstart.run (label gpu).
include("${CMAKE_CURRENT_LIST_DIR}/../../tests/script_args.cmake")
cag_script_require("quickstart run.cmake" SOURCE BINARY MODULES ARCHGUARD CUDA_COMPILER)
if(NOT GENERATOR)
  set(GENERATOR Ninja)
endif()

function(_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "quickstart: ${what} failed (exit ${rc})")
  endif()
endfunction()

_step("configure" "${CMAKE_COMMAND}" -S "${SOURCE}" -B "${BINARY}" -G "${GENERATOR}"
      "-DCMAKE_MODULE_PATH=${MODULES}" "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}"
      "-DCudaArchGuard_EXECUTABLE=${ARCHGUARD}")
_step("build (with the verify step)" "${CMAKE_COMMAND}" --build "${BINARY}")
_step("archguard inspect" "${ARCHGUARD}" inspect "${BINARY}/quickstart")

