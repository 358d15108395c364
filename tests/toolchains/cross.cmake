# SPDX-License-Identifier: Apache-2.0
# One cross test: build tests/toolchains/project (kernels/ + the quickstart sample) with a board's
# toolchain file and the cross toolkit of scripts/setup-cross.sh, then check what a user would:
#   1. configure + build succeed, the module's verify step included (it runs archguard verify on
#      every CUDA target after linking it; a missing image fails the build);
#   2. archguard inspect: quickstart and the kernels library are aarch64 ELF files holding exactly
#      the pinned images (EXPECT_SASS / EXPECT_PTX), nothing more;
#   3. archguard check --cc: each CHECKS item "<cc>=native", "<cc>=jit" or "<cc>=209" is the
#      prediction; a 209 must name the fix;
#   4. the quickstart host code runs under qemu-aarch64 with the aarch64 runtime until it asks for
#      a GPU, and exits 77 with its documented "no CUDA device: skipped" line.
#
#   cmake -DSOURCE=<repo> -DBINARY=<dir> -DTOOLCHAIN=<file> -DCROSS_ROOT=<.tools/cuda-cross>
#         -DARCHGUARD=<host archguard> -DEXPECT_SASS=<sm_..;..> -DEXPECT_PTX=<compute_..|none>
#         -DCHECKS=<cc=outcome;...> [-DGENERATOR=Ninja] -P cross.cmake
# The test runs it through tests/require.sh, which exits 77 (skipped) when the cross toolkit or
# Debian's cross packages are missing: run scripts/setup-cross.sh (CI does, through
# scripts/test.sh). Run by hand without them, it fails naming what is missing.
include("${CMAKE_CURRENT_LIST_DIR}/../script_args.cmake")
cag_script_require(cross.cmake SOURCE BINARY TOOLCHAIN CROSS_ROOT ARCHGUARD EXPECT_SASS EXPECT_PTX CHECKS)
if(NOT GENERATOR)
  set(GENERATOR Ninja)
endif()
get_filename_component(_board "${TOOLCHAIN}" NAME_WE)

if(NOT EXISTS "${CROSS_ROOT}/bin/nvcc" OR NOT EXISTS "${CROSS_ROOT}/targets/sbsa-linux/lib")
  message(FATAL_ERROR "cross ${_board}: no cross toolkit at ${CROSS_ROOT}; run scripts/setup-cross.sh")
endif()
find_program(_gxx aarch64-linux-gnu-g++)
find_program(_qemu NAMES qemu-aarch64-static qemu-aarch64)
if(NOT _gxx OR NOT _qemu OR NOT EXISTS /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1)
  message(FATAL_ERROR "cross ${_board}: aarch64-linux-gnu-g++, qemu-aarch64 or the arm64 sysroot is missing; run scripts/setup-cross.sh")
endif()

function(_run what out_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_var} "${out}${err}" PARENT_SCOPE)
  set(${out_var}_RC "${rc}" PARENT_SCOPE)
endfunction()
function(_must what)
  _run("${what}" r ${ARGN})
  if(NOT r_RC EQUAL 0)
    message(FATAL_ERROR "cross ${_board}: ${what} failed (exit ${r_RC}):\n${r}")
  endif()
  set(_last "${r}" PARENT_SCOPE)
endfunction()

# 1. configure and build (the verify step is part of the build).
file(REMOVE_RECURSE "${BINARY}")
_must("configure" "${CMAKE_COMMAND}" -S "${SOURCE}/tests/toolchains/project" -B "${BINARY}" -G "${GENERATOR}"
      "-DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN}" "-DCMAKE_CUDA_COMPILER=${CROSS_ROOT}/bin/nvcc"
      "-DCMAKE_MODULE_PATH=${SOURCE}/cmake/Modules" "-DCudaArchGuard_EXECUTABLE=${ARCHGUARD}")
if(NOT _last MATCHES "verify: archguard verify")
  message(FATAL_ERROR "cross ${_board}: the configure step did not set up archguard's verify step:\n${_last}")
endif()
_must("build (with the verify step)" "${CMAKE_COMMAND}" --build "${BINARY}")
string(REGEX MATCHALL "CudaArchGuard: target '[^']+' holds " _verified "${_last}")
list(LENGTH _verified _nv)
if(NOT _nv EQUAL 2)
  message(FATAL_ERROR "cross ${_board}: expected the verify step to pass for 2 targets, saw ${_nv}:\n${_last}")
endif()

# 2. inspect: aarch64, exactly the pinned images.
set(_app "${BINARY}/quickstart")
set(_lib "${BINARY}/kernels/libarchguard_kernels.a")
foreach(_f IN ITEMS "${_app}" "${_lib}")
  _must("archguard inspect ${_f}" "${ARCHGUARD}" inspect --json "${_f}")
  string(JSON _objs LENGTH "${_last}" inputs 0 objects)
  if(_objs LESS 1)
    message(FATAL_ERROR "cross ${_board}: archguard inspect found no object in ${_f}")
  endif()
  math(EXPR _last_obj "${_objs} - 1")
  foreach(_i RANGE ${_last_obj})
    string(JSON _machine GET "${_last}" inputs 0 objects ${_i} machine)
    if(NOT _machine STREQUAL "aarch64")
      message(FATAL_ERROR "cross ${_board}: ${_f} object ${_i} is a ${_machine} ELF, expected aarch64")
    endif()
    foreach(_kind sass ptx)
      string(JSON _n LENGTH "${_last}" inputs 0 objects ${_i} coverage ${_kind})
      set(_got "")
      if(_n GREATER 0)
        math(EXPR _top "${_n} - 1")
        foreach(_k RANGE ${_top})
          string(JSON _a GET "${_last}" inputs 0 objects ${_i} coverage ${_kind} ${_k})
          list(APPEND _got "${_a}")
        endforeach()
      endif()
      list(SORT _got)
      string(TOUPPER "${_kind}" _K)
      set(_want "${EXPECT_${_K}}")
      if(_want STREQUAL "none")
        set(_want "")
      endif()
      list(SORT _want)
      if(NOT "${_got}" STREQUAL "${_want}")
        message(FATAL_ERROR "cross ${_board}: ${_f} object ${_i} holds ${_kind} '${_got}', the pinned policy is '${_want}'")
      endif()
    endforeach()
  endforeach()
endforeach()
message("cross ${_board}: aarch64 ELF with exactly sass ${EXPECT_SASS}, ptx ${EXPECT_PTX}")

# 3. predictions.
foreach(_c IN LISTS CHECKS)
  if(NOT _c MATCHES "^([0-9]+\\.[0-9]+)=(native|jit|209)$")
    message(FATAL_ERROR "cross.cmake: bad CHECKS item '${_c}'")
  endif()
  set(_cc "${CMAKE_MATCH_1}")
  set(_want "${CMAKE_MATCH_2}")
  string(REPLACE "." "" _sm "${_cc}")
  _run("check" _out "${ARCHGUARD}" check "${_app}" --cc "${_cc}")
  if(_want STREQUAL "native")
    set(_ok OFF)
    if(_out_RC EQUAL 0 AND _out MATCHES "natively" AND NOT _out MATCHES "JIT|jit-compiles")
      set(_ok ON)
    endif()
  elseif(_want STREQUAL "jit")
    set(_ok OFF)
    if(_out_RC EQUAL 0 AND _out MATCHES "jit-compiles")
      set(_ok ON)
    endif()
  else()
    set(_ok OFF)
    if(_out_RC EQUAL 1 AND _out MATCHES "209" AND _out MATCHES "fix: rebuild with sass sm_${_sm}")
      set(_ok ON)
    endif()
  endif()
  if(NOT _ok)
    message(FATAL_ERROR "cross ${_board}: archguard check --cc ${_cc} (exit ${_out_RC}) does not predict ${_want}:\n${_out}")
  endif()
  string(REGEX MATCH "[^\n]*(runs natively|jit-compiles|no kernel image for)[^\n]*" _line "${_out}")
  string(STRIP "${_line}" _line)
  message("cross ${_board}: --cc ${_cc}: ${_want}: ${_line}")
endforeach()

# 4. host code under qemu: the aarch64 runtime finds no driver; the sample says so and skips.
_run("qemu" _q "${_qemu}" -L /usr/aarch64-linux-gnu "${_app}")
if(NOT _q_RC EQUAL 77 OR NOT _q MATCHES "quickstart: no CUDA device: skipped")
  message(FATAL_ERROR "cross ${_board}: quickstart under qemu exited ${_q_RC}, expected 77 and its no-GPU line:\n${_q}")
endif()
message("cross ${_board}: quickstart under qemu-aarch64: exit 77, '${_q}'")
