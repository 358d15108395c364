# SPDX-License-Identifier: Apache-2.0
# A board's toolchain file must refuse a toolkit that cannot build for the board, before anything
# is compiled, and say how to fix it. The toolkit here is a stand-in: a shell script answering
# nvcc's --version / --list-gpu-code / --list-gpu-arch / --help as the named release does, with
# or without an aarch64 target directory (or the real NVCC when given).
#   cmake -DSOURCE=<repo> -DBINARY=<dir> -DBOARD=<toolchain name> -DEXPECT=<regex>
#         [-DRELEASE=12.9 -DSMS=75;...;101 -DVARIANTS=90a;100a;...] [-DNO_TARGET=ON] [-DNVCC=<nvcc>]
#         -P refuse.cmake
include("${CMAKE_CURRENT_LIST_DIR}/../script_args.cmake")
cag_script_require(refuse.cmake SOURCE BINARY BOARD EXPECT)
file(REMOVE_RECURSE "${BINARY}")
if(NOT NVCC)
  set(_top "${BINARY}/fake-cuda-${RELEASE}")
  set(NVCC "${_top}/bin/nvcc")
  set(_codes "")
  set(_archs "")
  foreach(_s IN LISTS SMS)
    string(APPEND _codes "sm_${_s}\\n")
    string(APPEND _archs "compute_${_s}\\n")
  endforeach()
  set(_allowed "")
  foreach(_s IN LISTS SMS VARIANTS)
    string(APPEND _allowed "compute_${_s},sm_${_s},")
  endforeach()
  file(WRITE "${BINARY}/nvcc.in"
"#!/bin/sh
# stand-in for nvcc ${RELEASE}
case \"$*\" in
  *--version*) echo 'Cuda compilation tools, release ${RELEASE}, V${RELEASE}.0' ;;
  *--list-gpu-code*) printf '${_codes}' ;;
  *--list-gpu-arch*) printf '${_archs}' ;;
  *--help*) printf -- '--gpu-architecture <arch>   (-arch)\\n        Allowed values for this option:  ${_allowed}.\\n\\n--gpu-code <code>\\n' ;;
  *) exit 0 ;;
esac
")
  file(MAKE_DIRECTORY "${_top}/bin")
  file(COPY "${BINARY}/nvcc.in" DESTINATION "${BINARY}/tmp" FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  file(RENAME "${BINARY}/tmp/nvcc.in" "${NVCC}")
  if(NOT NO_TARGET)
    file(MAKE_DIRECTORY "${_top}/targets/sbsa-linux/lib")
  endif()
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE}/tests/toolchains/project" -B "${BINARY}/build"
                        "-DCMAKE_TOOLCHAIN_FILE=${SOURCE}/toolchains/${BOARD}.cmake" "-DCMAKE_CUDA_COMPILER=${NVCC}"
                        "-DCMAKE_MODULE_PATH=${SOURCE}/cmake/Modules"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
string(REGEX REPLACE "\n *" " " _flat "${_out}${_err}")
if(_rc EQUAL 0)
  message(FATAL_ERROR "refuse ${BOARD}: configuring with ${NVCC} succeeded; the toolchain file should have refused it:\n${_out}${_err}")
endif()
if(NOT _flat MATCHES "${EXPECT}")
  message(FATAL_ERROR "refuse ${BOARD}: the error does not match '${EXPECT}':\n${_out}${_err}")
endif()
string(REGEX MATCH "${BOARD}.cmake: [^\n]*" _line "${_flat}")
string(REGEX REPLACE " +" " " _line "${_line}")
message("refuse ${BOARD}: ${_line}")
