# SPDX-License-Identifier: Apache-2.0
# Script mode of CudaArchGuardTable: the C++ header of the architecture table, or its rows.
#   cmake -DEMIT=cxx -DOUTPUT=<header> -P table-script.cmake
#   cmake -DEMIT=rows -P table-script.cmake
cmake_policy(VERSION 3.18...4.4)
set(_CAG_SCRIPT ON)
get_filename_component(_cag_modules "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
include("${_cag_modules}/CudaArchGuardTable.cmake")
if(EMIT STREQUAL "cxx")
  if(NOT OUTPUT)
    message(FATAL_ERROR "CudaArchGuardTable: EMIT=cxx needs -DOUTPUT=<header path>")
  endif()
  _cag_table_emit_cxx("${OUTPUT}")
elseif(EMIT STREQUAL "rows")
  _cag_table_emit_rows(_rows)
  execute_process(COMMAND ${CMAKE_COMMAND} -E echo_append "${_rows}")
else()
  message(FATAL_ERROR "CudaArchGuardTable: unknown EMIT='${EMIT}'; use -DEMIT=cxx -DOUTPUT=<file> or -DEMIT=rows")
endif()
