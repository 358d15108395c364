# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
CudaArchGuardVerifier
---------------------

Internal. ``archguard-verify``, the dependency-free tool built from the sources shipped with the
module (``tools/archguard-verify``: the project's own ELF, fatbin, architecture and coverage
sources; no compression or archive library, no CLI11), and the tool that reads the architecture
tokens the CMake side does not parse itself.

.. code-block:: cmake

  _cag_verifier_build(<out_exe> <out_why>)
  _cag_arch_tool(<out_exe> <out_why>)

``_cag_verifier_build`` builds the tool once per key (its sources, the table, the C++ compiler
and the flags it is built with) and keeps it in a per-user cache that every build tree and
script-mode run share: ``CudaArchGuard_VERIFIER_DIR`` when set, else
``$ARCHGUARD_CACHE_DIR/cmake-verifier``, ``$XDG_CACHE_HOME/archguard/cmake-verifier`` or
``~/.cache/archguard/cmake-verifier`` (the JIT cache's root rule), one
sub-directory per key, locked while it is built. In a project that enables ``CXX`` it uses
``try_compile``; in a project that does not (``LANGUAGES CUDA`` alone) and in script mode
(``cmake -P``) it configures and builds a small project of its own with ``execute_process``.
The cache follows the rules of the project's other caches: its directories are created 0700 and
must be yours and not writable by group or others (no symbolic link below the root), and an
entry whose tool does not match the MD5 recorded with its key is built again. A cache that
cannot be used never fails the configure: a project builds the tool in its own tree
(``<build>/CMakeFiles/CudaArchGuard/verifier``) and says why. A re-configure re-uses the tool it
took (same key, same file size and mtime) without looking again.
``<out_exe>`` is ``""`` (with ``<out_why>``) when it cannot be built.

``_cag_arch_tool`` gives the tool that answers ``arch plan`` (the policy engine) and ``arch
normalize`` (the token grammar) at configure time: the archguard tool when
``CudaArchGuard_EXECUTABLE`` names an existing file, else ``archguard-verify`` built here (unless
``CudaArchGuard_BUILTIN_VERIFIER`` is ``OFF``); ``""`` with ``<out_why>`` when neither can run.
#]=======================================================================]
include_guard(GLOBAL)
cmake_policy(VERSION 3.18...4.4)
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardToolkit.cmake")  # _cag_check: stderr in script mode, where stdout is the result

# Where the tool's sources are: beside the installed module, or the source tree. Sets <out_root>
# (or "" with <out_why>) and <out_files> (the list file's entries).
function(_cag_verifier_sources out_root out_files out_why)
  set(${out_root} "" PARENT_SCOPE)
  set(_list "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/verifier-sources.txt")
  if(EXISTS "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/verifier/tools/archguard-verify/main.cpp")
    set(_root "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/verifier")        # installed
  else()
    get_filename_component(_root "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../.." ABSOLUTE)  # the source tree
  endif()
  if(NOT EXISTS "${_list}" OR NOT EXISTS "${_root}/tools/archguard-verify/main.cpp")
    set(${out_why} "its sources are not beside the module (${_root})" PARENT_SCOPE)
    return()
  endif()
  file(STRINGS "${_list}" _files REGEX "^[^#]")
  set(${out_root} "${_root}" PARENT_SCOPE)
  set(${out_files} "${_files}" PARENT_SCOPE)
endfunction()

# Builds the tool with a project of its own (no CXX in the calling project, or script mode).
# Sets <out_ok> and appends the tools' output to <io_log>.
function(_cag_verifier_build_nested dir srcs root cxx out_ok io_log)
  set(_p "${dir}/project")
  set(_text "cmake_minimum_required(VERSION 3.18)\nproject(archguard_verify LANGUAGES CXX)\nadd_executable(archguard-verify")
  foreach(_s IN LISTS srcs)
    string(APPEND _text "\n  [==[${_s}]==]")
  endforeach()
  string(APPEND _text ")\ntarget_compile_definitions(archguard-verify PRIVATE ARCHGUARD_NO_COMPRESSION)\n"
         "target_include_directories(archguard-verify PRIVATE [==[${root}/include]==] [==[${root}/src]==] [==[${dir}/gen]==])\n"
         "set_target_properties(archguard-verify PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)\n")
  file(WRITE "${_p}/CMakeLists.txt" "${_text}")
  set(_args -S "${_p}" -B "${dir}/build" -DCMAKE_BUILD_TYPE=Release)
  if(CMAKE_GENERATOR)  # a project without CXX: its generator; script mode: CMake's default
    list(APPEND _args -G "${CMAKE_GENERATOR}")
    if(CMAKE_MAKE_PROGRAM)
      list(APPEND _args "-DCMAKE_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}")
    endif()
  endif()
  if(cxx)
    list(APPEND _args "-DCMAKE_CXX_COMPILER=${cxx}")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" ${_args} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  set(_log "${${io_log}}${_out}")
  if(_rc EQUAL 0)
    execute_process(COMMAND "${CMAKE_COMMAND}" --build "${dir}/build" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
    string(APPEND _log "${_out}")
  endif()
  set(_ok OFF)
  if(_rc EQUAL 0)
    file(GLOB_RECURSE _built "${dir}/build/archguard-verify${CMAKE_EXECUTABLE_SUFFIX}")
    if(_built)
      list(GET _built 0 _built)
      execute_process(COMMAND "${CMAKE_COMMAND}" -E copy "${_built}" "${dir}/archguard-verify${CMAKE_EXECUTABLE_SUFFIX}"
                      RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
      string(APPEND _log "${_out}")
      if(_rc EQUAL 0)
        set(_ok ON)
      endif()
    endif()
  endif()
  set(${out_ok} ${_ok} PARENT_SCOPE)
  set(${io_log} "${_log}" PARENT_SCOPE)
endfunction()

# The per-user cache of built verifiers: cmake-verifier under the JIT cache's root. Sets
# <out_root> ("" when none of the variables is set).
function(_cag_verifier_user_cache out_root)
  # The JIT and results caches' root rule (docs/jit.md): ARCHGUARD_CACHE_DIR, else an absolute
  # XDG_CACHE_HOME, else ~/.cache, each with archguard/ below the last two.
  set(_root "")
  if(NOT "$ENV{ARCHGUARD_CACHE_DIR}" STREQUAL "")
    set(_root "$ENV{ARCHGUARD_CACHE_DIR}")
  elseif("$ENV{XDG_CACHE_HOME}" MATCHES "^/")
    set(_root "$ENV{XDG_CACHE_HOME}/archguard")
  elseif(NOT "$ENV{HOME}" STREQUAL "")
    set(_root "$ENV{HOME}/.cache/archguard")
  endif()
  if(_root)
    set(_root "${_root}/cmake-verifier")
  endif()
  set(${out_root} "${_root}" PARENT_SCOPE)
endfunction()

# Creates <dir> (missing components 0700) and checks it with the rules of the project's other
# caches (docs/jit.md, "Security"): every directory from <top> down to <dir>, and the entry's
# files, must be yours, no symbolic link, and not writable by group or others; the path above
# <top> may go through links that you or root own. One process (sh), on a first use only.
# Sets <out_why> to "" when it may be used, else to why not.
function(_cag_verifier_dir_check top dir out_why)
  set(${out_why} "" PARENT_SCOPE)
  if(NOT EXISTS /bin/sh)
    set(${out_why} "no /bin/sh to check its owner and mode" PARENT_SCOPE)
    return()
  endif()
  set(_script [=[
set -f
umask 077
top=$1; dir=$2; shift 2
me=$(id -u) || { echo "cannot tell your uid"; exit 1; }
p=""; ifs=$IFS; IFS=/
for c in $top; do
  IFS=$ifs
  [ -n "$c" ] || continue
  p="$p/$c"
  if [ -L "$p" ]; then
    u=$(stat -c %u -- "$p") || { echo "cannot stat $p"; exit 1; }
    if [ "$u" != "$me" ] && [ "$u" != 0 ]; then echo "$p is a symbolic link owned by uid $u, not by you (uid $me) or root"; exit 1; fi
  fi
done
IFS=$ifs
mkdir -p -- "$dir" 2>/dev/null || { echo "cannot create $dir"; exit 1; }
check() {
  s=$(stat -c '%u:%a:%F' -- "$1") || { echo "cannot stat $1"; exit 1; }
  u=${s%%:*}; r=${s#*:}; m=${r%%:*}; t=${r#*:}
  if [ "$t" = "symbolic link" ]; then echo "$1 is a symbolic link"; exit 1; fi
  if [ "$u" != "$me" ]; then echo "$1 is owned by uid $u, not by you (uid $me)"; exit 1; fi
  case $m in
    *[2367]?|*[2367]) echo "$1 is writable by group or others (mode $m; chmod go-w $1)"; exit 1 ;;
  esac
}
d=$dir
while :; do
  check "$d"
  [ "$d" = "$top" ] && break
  case $d in "$top"/*) d=${d%/*} ;; *) break ;; esac
done
for f in "$@"; do
  if [ -e "$f" ] || [ -L "$f" ]; then check "$f"; fi
done
echo ok
]=])
  execute_process(COMMAND /bin/sh -c "${_script}" sh "${top}" "${dir}" ${ARGN}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0 OR NOT _out STREQUAL "ok")
    string(STRIP "${_out} ${_err}" _why)
    set(${out_why} "${_why}" PARENT_SCOPE)
  endif()
endfunction()

# Builds the tool in <dir> unless <dir> holds one for <key> already (key.txt: the key, then the
# tool's MD5, so that a damaged file is built again). Sets <out_exe> ("" with <out_why>).
function(_cag_verifier_build_in dir key how cxx root srcs out_exe out_why)
  set(${out_exe} "" PARENT_SCOPE)
  set(${out_why} "" PARENT_SCOPE)
  file(MAKE_DIRECTORY "${dir}")
  file(LOCK "${dir}" DIRECTORY GUARD FUNCTION TIMEOUT 600 RESULT_VARIABLE _lock)
  if(NOT _lock EQUAL 0)
    set(${out_why} "cannot lock ${dir}: ${_lock}" PARENT_SCOPE)
    return()
  endif()
  set(_exe "${dir}/archguard-verify${CMAKE_EXECUTABLE_SUFFIX}")
  set(_old "")
  if(EXISTS "${dir}/key.txt" AND EXISTS "${_exe}")
    file(READ "${dir}/key.txt" _old)
    file(MD5 "${_exe}" _sum)
    if(NOT _old STREQUAL "${key}\n${_sum}\n")
      set(_old "")
    endif()
  endif()
  if(_old STREQUAL "")
    _cag_check(START "CudaArchGuard: building the verify tool archguard-verify")
    file(REMOVE_RECURSE "${dir}/build" "${dir}/gen" "${dir}/project")
    file(REMOVE "${_exe}" "${dir}/key.txt")
    execute_process(COMMAND "${CMAKE_COMMAND}" -DEMIT=cxx "-DOUTPUT=${dir}/gen/archguard/generated/arch_table.hpp"
                            -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/table-script.cmake"
                    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
    set(_copy_err "")
    if(NOT _rc EQUAL 0)
      set(_ok OFF)
    elseif(how STREQUAL "nested")
      _cag_verifier_build_nested("${dir}" "${srcs}" "${root}" "${cxx}" _ok _out)
    else()
      try_compile(_ok "${dir}/build" SOURCES ${srcs}
        COMPILE_DEFINITIONS -DARCHGUARD_NO_COMPRESSION "-I${root}/include" "-I${root}/src" "-I${dir}/gen"
        CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
        OUTPUT_VARIABLE _out COPY_FILE "${_exe}" COPY_FILE_ERROR _copy_err)
    endif()
    if(_ok AND NOT _copy_err AND EXISTS "${_exe}")
      file(MD5 "${_exe}" _sum)
      file(WRITE "${dir}/key.txt" "${key}\n${_sum}\n")
      _cag_check(PASS "${_exe}")
    else()
      file(WRITE "${dir}/error.log" "${_out}\n${_copy_err}\n")
      set(${out_why} "compiling it failed (log: ${dir}/error.log)" PARENT_SCOPE)
      _cag_check(FAIL "failed; see ${dir}/error.log")
      return()
    endif()
  endif()
  set(${out_exe} "${_exe}" PARENT_SCOPE)
endfunction()

# archguard-verify, built once per key (its sources, the table, the compiler and its flags) and
# kept in the per-user cache (CudaArchGuard_VERIFIER_DIR, else XDG_CACHE_HOME or ~/.cache under
# archguard/cmake-verifier/<key>), which every build tree and script-mode run share. A cache that
# cannot be used (no such directory, refused as insecure, not creatable, a failed build there)
# never fails the configure: a project builds the tool in its own tree instead
# (<build>/CMakeFiles/CudaArchGuard/verifier), saying why.
function(_cag_verifier_build out_var out_why)
  set(${out_var} "" PARENT_SCOPE)
  get_property(_known GLOBAL PROPERTY _CAG_VERIFIER SET)
  if(_known)
    get_property(_exe GLOBAL PROPERTY _CAG_VERIFIER)
    get_property(_why GLOBAL PROPERTY _CAG_VERIFIER_WHY)
    set(${out_var} "${_exe}" PARENT_SCOPE)
    set(${out_why} "${_why}" PARENT_SCOPE)
    return()
  endif()
  set(_exe "")
  set(_why "")
  get_property(_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(CMAKE_SCRIPT_MODE_FILE OR NOT "CXX" IN_LIST _langs)
    set(_how nested)
    set(_cxx "${CMAKE_CUDA_HOST_COMPILER}")  # the host compiler the project gave nvcc, else CMake's choice
    # CMake's choice follows CXX, CXXFLAGS and LDFLAGS; the nested project builds Release.
    set(_key "nested;${_cxx};$ENV{CXX};$ENV{CXXFLAGS};$ENV{LDFLAGS};${CMAKE_GENERATOR}")
  else()
    set(_how try_compile)
    # What try_compile compiles and links with: the compiler, its target and sysroot, and the
    # flags of the configuration try_compile uses (CMAKE_TRY_COMPILE_CONFIGURATION, else Debug).
    set(_cfg "${CMAKE_TRY_COMPILE_CONFIGURATION}")
    if(NOT _cfg)
      set(_cfg Debug)
    endif()
    string(TOUPPER "${_cfg}" _cfg)
    set(_key "${CMAKE_CXX_COMPILER};${CMAKE_CXX_COMPILER_ID};${CMAKE_CXX_COMPILER_VERSION};${CMAKE_CXX_COMPILER_TARGET}")
    foreach(_v CMAKE_SYSROOT CMAKE_CXX_FLAGS CMAKE_CXX_FLAGS_${_cfg} CMAKE_EXE_LINKER_FLAGS CMAKE_EXE_LINKER_FLAGS_${_cfg})
      string(APPEND _key "|${${_v}}")
    endforeach()
  endif()
  _cag_verifier_sources(_root _files _why)
  if(_root)
    set(_srcs "")
    foreach(_f IN LISTS _files)
      file(MD5 "${_root}/${_f}" _h)
      string(APPEND _key ";${_h}")
      if(_f MATCHES "\\.cpp$")
        list(APPEND _srcs "${_root}/${_f}")
      endif()
    endforeach()
    file(MD5 "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/architectures.txt" _h)
    string(MD5 _key "${_key};${_h}")
    string(SUBSTRING "${_key}" 0 12 _short)
    # A re-configure finds the tool it took last time: same key and CudaArchGuard_VERIFIER_DIR,
    # same file (size and mtime).
    string(MD5 _seen_key "${_key};${CudaArchGuard_VERIFIER_DIR}")
    if(NOT CMAKE_SCRIPT_MODE_FILE AND "${_CAG_VERIFIER_SEEN}" MATCHES "^([^|]*)\\|([^|]*)\\|([^|]*)\\|(.+)$"
       AND CMAKE_MATCH_1 STREQUAL _seen_key AND EXISTS "${CMAKE_MATCH_4}")
      set(_seen_exe "${CMAKE_MATCH_4}")
      set(_seen_size "${CMAKE_MATCH_2}")
      set(_seen_time "${CMAKE_MATCH_3}")
      file(SIZE "${_seen_exe}" _size)
      file(TIMESTAMP "${_seen_exe}" _time "%Y-%m-%dT%H:%M:%S" UTC)
      if(_size STREQUAL _seen_size AND _time STREQUAL _seen_time)
        set_property(GLOBAL PROPERTY _CAG_VERIFIER "${_seen_exe}")
        set_property(GLOBAL PROPERTY _CAG_VERIFIER_WHY "")
        set(${out_var} "${_seen_exe}" PARENT_SCOPE)
        set(${out_why} "" PARENT_SCOPE)
        return()
      endif()
    endif()
    # The per-user cache, checked as the project's other caches are.
    if(CudaArchGuard_VERIFIER_DIR)
      set(_top "${CudaArchGuard_VERIFIER_DIR}")
    else()
      _cag_verifier_user_cache(_top)
    endif()
    set(_cache_why "")
    if(_top)
      set(_dir "${_top}/${_short}")
      _cag_verifier_dir_check("${_top}" "${_dir}" _cache_why "${_dir}/archguard-verify${CMAKE_EXECUTABLE_SUFFIX}" "${_dir}/key.txt")
      if(NOT _cache_why)
        _cag_verifier_build_in("${_dir}" "${_key}" "${_how}" "${_cxx}" "${_root}" "${_srcs}" _exe _cache_why)
      endif()
    else()
      set(_cache_why "none of CudaArchGuard_VERIFIER_DIR, ARCHGUARD_CACHE_DIR, XDG_CACHE_HOME and HOME is set")
    endif()
    if(NOT _exe)
      if(CMAKE_SCRIPT_MODE_FILE)
        set(_why "${_cache_why}")
      else()
        message(STATUS "CudaArchGuard: the verifier cache cannot be used (${_cache_why}); archguard-verify is kept in this build tree")
        _cag_verifier_build_in("${CMAKE_BINARY_DIR}/CMakeFiles/CudaArchGuard/verifier" "${_key}" "${_how}" "${_cxx}"
                               "${_root}" "${_srcs}" _exe _why)
      endif()
    endif()
    if(_exe AND NOT CMAKE_SCRIPT_MODE_FILE)
      file(SIZE "${_exe}" _size)
      file(TIMESTAMP "${_exe}" _time "%Y-%m-%dT%H:%M:%S" UTC)
      set(_CAG_VERIFIER_SEEN "${_seen_key}|${_size}|${_time}|${_exe}" CACHE INTERNAL "CudaArchGuard: the archguard-verify this tree uses")
    endif()
  endif()
  set_property(GLOBAL PROPERTY _CAG_VERIFIER "${_exe}")
  set_property(GLOBAL PROPERTY _CAG_VERIFIER_WHY "${_why}")
  set(${out_var} "${_exe}" PARENT_SCOPE)
  set(${out_why} "${_why}" PARENT_SCOPE)
endfunction()

function(_cag_arch_tool out_cmd out_why)
  set(_exe "${CudaArchGuard_EXECUTABLE}")
  if(NOT _exe)
    get_property(_exe GLOBAL PROPERTY _CAG_EXECUTABLE)
  endif()
  set(_cmd "")
  set(_why "")
  if(_exe AND NOT TARGET "${_exe}" AND EXISTS "${_exe}" AND NOT IS_DIRECTORY "${_exe}")
    set(_cmd "${_exe}")
  elseif(NOT DEFINED CudaArchGuard_BUILTIN_VERIFIER OR CudaArchGuard_BUILTIN_VERIFIER)
    _cag_verifier_build(_v _why)
    if(_v)
      set(_cmd "${_v}")
    else()
      set(_why "archguard-verify: ${_why}")
    endif()
  else()
    set(_why "CudaArchGuard_BUILTIN_VERIFIER is OFF and CudaArchGuard_EXECUTABLE names no archguard tool")
  endif()
  set(${out_cmd} "${_cmd}" PARENT_SCOPE)
  set(${out_why} "${_why}" PARENT_SCOPE)
endfunction()
