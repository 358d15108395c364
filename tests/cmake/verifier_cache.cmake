# SPDX-License-Identifier: Apache-2.0
# The per-user verifier cache (issue 25): plain include(CudaArchGuard) without the archguard tool
# builds archguard-verify once into $XDG_CACHE_HOME/archguard/cmake-verifier, and a second fresh
# build tree uses it without building; a damaged entry is built again; a cache writable by group
# or others is refused and the configure still succeeds, with the tool built in the tree.
#   cmake -DCMAKE_UNDER_TEST=<cmake> -DMODULE_DIR=<modules> -DPROJECT=<projects/plain> -DNVCC=<nvcc>
#         -DWORK=<dir> -P verifier_cache.cmake
# Three builds of the verifier (about 10 s of CPU each).
cmake_policy(VERSION 3.19)
include("${CMAKE_CURRENT_LIST_DIR}/../script_args.cmake")
cag_script_require(verifier_cache CMAKE_UNDER_TEST MODULE_DIR PROJECT NVCC WORK)
file(REMOVE_RECURSE "${WORK}")
set(_xdg "${WORK}/xdg")
set(_root "${_xdg}/archguard/cmake-verifier")
set(_built "building the verify tool archguard-verify")

# configure(<tree> <must match> <must not match or "">)
function(configure tree match forbid)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env --unset=ARCHGUARD_CACHE_DIR "XDG_CACHE_HOME=${_xdg}"
                          "${CMAKE_UNDER_TEST}" -S "${PROJECT}" -B "${WORK}/${tree}" -G Ninja
                          "-DCMAKE_CUDA_COMPILER=${NVCC}" "-DCAG_MODULE_DIR=${MODULE_DIR}" -DARCH_POLICY=80
                          -DCudaArchGuard_CUOBJDUMP=CudaArchGuard_CUOBJDUMP-NOTFOUND
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  string(REGEX REPLACE "[ \t]*\n[ \t]+" " " _flat "${_out}${_err}")
  set(_bad "")
  if(NOT _rc EQUAL 0)
    set(_bad "exit ${_rc}")
  elseif(NOT _flat MATCHES "${match}")
    set(_bad "the output does not match '${match}'")
  elseif(forbid AND _flat MATCHES "${forbid}")
    set(_bad "the output matches '${forbid}', which it must not")
  endif()
  if(_bad)
    message(FATAL_ERROR "verifier_cache, tree ${tree}: ${_bad}\n--- stdout ---\n${_out}\n--- stderr ---\n${_err}")
  endif()
  message(STATUS "tree ${tree}: ok")
endfunction()

set(_uses "verify: archguard-verify, built from the module's sources \\(${_root}/[0-9a-f]+/archguard-verify\\)")
# 1. the first tree builds it into the per-user cache (created 0700)
configure(a "${_built}.*${_uses}" "")
file(GLOB _entries LIST_DIRECTORIES true "${_root}/*")
list(LENGTH _entries _n)
if(NOT _n EQUAL 1)
  message(FATAL_ERROR "verifier_cache: expected one entry in ${_root}, found: ${_entries}")
endif()
execute_process(COMMAND stat -c %a "${_root}" "${_entries}" OUTPUT_VARIABLE _modes)
string(REPLACE "\n" " " _modes "${_modes}")
if(NOT _modes MATCHES "^700 700 $")
  message(FATAL_ERROR "verifier_cache: the cache directories must be created 0700, are: ${_modes}")
endif()
# 2. a second fresh tree costs no verifier build; nor does a re-configure of it
configure(b "${_uses}" "${_built}")
configure(b "${_uses}" "${_built}")
# 3. a damaged entry is built again
file(WRITE "${_entries}/archguard-verify" "#!/bin/sh\nexit 0\n")
configure(c "${_built}.*${_uses}" "")
configure(d "${_uses}" "${_built}")
# 4. a cache writable by others is refused; the configure succeeds with the tool in its own tree
file(CHMOD "${_root}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_WRITE GROUP_EXECUTE)
configure(e "the verifier cache cannot be used \\(${_root} is writable by group or others \\(mode 770.*${_built}.*built from the module's sources \\(${WORK}/e/CMakeFiles/CudaArchGuard/verifier/archguard-verify\\)" "")
file(CHMOD "${_root}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
message(STATUS "verifier_cache: ok")
