# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
CudaArchGuardToolkit
--------------------

Asks an installed ``nvcc`` what it supports, instead of keeping a per-version table:

* ``nvcc --version``: the CUDA release (``release 13.0``);
* ``nvcc --list-gpu-code`` / ``--list-gpu-arch``: the plain SASS and PTX targets;
* ``nvcc --help``: the ``a`` / ``f`` variants listed under ``--gpu-architecture``;
* ``nvcc --dryrun``: the architecture nvcc compiles for when given none (what CMake records
  as its default ``CMAKE_CUDA_ARCHITECTURES``).

Very old nvcc releases without ``--list-gpu-code`` fall back to the ``--help`` lists.

.. code-block:: cmake

  _cag_nvcc_query(<nvcc> <cache dir or ""> <out_prefix>)

Sets, in the caller's scope (the token parser and the policy engine read them as
``_CAG_NVCC_*``, the prefix they pass):

``<out_prefix>_VERSION``   ``13.0``
``<out_prefix>_SASS``      plain SM numbers nvcc can build SASS for, ascending
``<out_prefix>_PTX``       plain SM numbers nvcc can build PTX for, ascending
``<out_prefix>_VARIANTS``  ``a``/``f`` variants nvcc accepts (``90a;100a;100f;...``)
``<out_prefix>_DEFAULT``   the SM nvcc builds when given no architecture

Results are cached in ``<cache dir>/nvcc-<hash>.cmake`` keyed on nvcc's real path, size and
modification time, so a re-configure does not run nvcc again; a changed nvcc is re-queried.
#]=======================================================================]
include_guard(GLOBAL)
cmake_policy(VERSION 3.18...4.4)  # this file's own policy scope (include() pushes one)

# message(CHECK_START/CHECK_PASS/CHECK_FAIL) in a project; in script mode, where stdout carries
# the result, the same lines go to stderr (and nowhere with QUIET).
macro(_cag_check kind text)
  if(NOT CMAKE_SCRIPT_MODE_FILE)
    message(CHECK_${kind} "${text}")
  elseif(NOT QUIET)
    if("${kind}" STREQUAL "START")
      set(_cag_check_text "${text}")
      message(NOTICE "-- ${text}")
    else()
      message(NOTICE "-- ${_cag_check_text} - ${text}")
    endif()
  endif()
endmacro()

function(_cag_nvcc_run nvcc out_var)
  execute_process(COMMAND "${nvcc}" ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  set(${out_var} "${_out}${_err}" PARENT_SCOPE)
  set(${out_var}_RC "${_rc}" PARENT_SCOPE)
endfunction()

# "sm_75\nsm_80\n..." -> "75;80" (plain only), ascending.
function(_cag_nvcc_numbers text prefix out_var)
  string(REGEX MATCHALL "${prefix}_[0-9]+[af]?" _names "${text}")
  set(_nums "")
  foreach(_n IN LISTS _names)
    if(_n MATCHES "^${prefix}_([0-9]+)$")
      list(APPEND _nums ${CMAKE_MATCH_1})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _nums)
  # Numeric sort: zero-padded keys (list(SORT COMPARE NATURAL) needs 3.18 too, but padding
  # keeps the order independent of any suffix).
  set(_keyed "")
  foreach(_n IN LISTS _nums)
    string(LENGTH "${_n}" _l)
    set(_p "${_n}")
    while(_l LESS 5)
      set(_p "0${_p}")
      math(EXPR _l "${_l} + 1")
    endwhile()
    list(APPEND _keyed "${_p}#${_n}")
  endforeach()
  list(SORT _keyed)
  list(TRANSFORM _keyed REPLACE "^[^#]*#" "")
  set(${out_var} "${_keyed}" PARENT_SCOPE)
endfunction()

function(_cag_nvcc_query_uncached nvcc)
  list(APPEND CMAKE_MESSAGE_CONTEXT "nvcc")
  _cag_check(START "CudaArchGuard: asking ${nvcc} what it supports")
  _cag_nvcc_run("${nvcc}" _ver --version)
  if(NOT _ver_RC EQUAL 0 OR NOT _ver MATCHES "release ([0-9]+\\.[0-9]+)")
    _cag_check(FAIL "no usable nvcc")
    message(FATAL_ERROR "CudaArchGuard: '${nvcc} --version' failed or printed no 'release X.Y' (exit ${_ver_RC}): ${_ver}\n"
                        "Point CMAKE_CUDA_COMPILER (or -DNVCC= in script mode) at a working nvcc.")
  endif()
  set(_version "${CMAKE_MATCH_1}")
  _cag_nvcc_run("${nvcc}" _help --help)
  # The allowed values of --gpu-architecture: the paragraph after "Allowed values" up to the
  # next option.
  set(_allowed "")
  if(_help MATCHES "--gpu-architecture[^\n]*\n(.*)")
    set(_rest "${CMAKE_MATCH_1}")
    string(FIND "${_rest}" "Allowed values" _at)
    if(_at GREATER -1)
      string(SUBSTRING "${_rest}" ${_at} -1 _rest)
      string(REGEX REPLACE "\n--.*" "" _allowed "${_rest}")
    endif()
  endif()
  _cag_nvcc_run("${nvcc}" _codes --list-gpu-code)
  _cag_nvcc_run("${nvcc}" _archs --list-gpu-arch)
  if(_codes_RC EQUAL 0 AND _codes MATCHES "sm_[0-9]")
    _cag_nvcc_numbers("${_codes}" sm _sass)
  else()
    _cag_nvcc_numbers("${_allowed}" sm _sass)
  endif()
  if(_archs_RC EQUAL 0 AND _archs MATCHES "compute_[0-9]")
    _cag_nvcc_numbers("${_archs}" compute _ptx)
  else()
    _cag_nvcc_numbers("${_allowed}" compute _ptx)
  endif()
  if(NOT _sass)
    _cag_check(FAIL "no GPU code listed")
    message(FATAL_ERROR "CudaArchGuard: '${nvcc}' lists no GPU code (--list-gpu-code and --help gave no sm_XY); is it nvcc?")
  endif()
  string(REGEX MATCHALL "sm_[0-9]+[af]" _var "${_allowed}")
  list(TRANSFORM _var REPLACE "^sm_" "")
  list(REMOVE_DUPLICATES _var)
  # The default architecture: what nvcc compiles for with no -arch (nothing is compiled).
  _cag_nvcc_run("${nvcc}" _dry --dryrun -c cag_default_probe.cu -o cag_default_probe.o)
  set(_default "")
  if(_dry MATCHES "-arch[= ]compute_([0-9]+)")
    set(_default "${CMAKE_MATCH_1}")
  endif()
  list(GET _sass 0 _lo)
  list(GET _sass -1 _hi)
  list(LENGTH _var _nvar)
  _cag_check(PASS "CUDA ${_version}, sm_${_lo} to sm_${_hi}, ${_nvar} a/f variants")
  set(_CAG_NVCC_VERSION "${_version}" PARENT_SCOPE)
  set(_CAG_NVCC_SASS "${_sass}" PARENT_SCOPE)
  set(_CAG_NVCC_PTX "${_ptx}" PARENT_SCOPE)
  set(_CAG_NVCC_VARIANTS "${_var}" PARENT_SCOPE)
  set(_CAG_NVCC_DEFAULT "${_default}" PARENT_SCOPE)
endfunction()

function(_cag_nvcc_query nvcc cache_dir out_prefix)
  if(NOT EXISTS "${nvcc}" OR IS_DIRECTORY "${nvcc}")
    message(FATAL_ERROR "CudaArchGuard: nvcc '${nvcc}' does not exist; set CMAKE_CUDA_COMPILER (or -DNVCC=<path> in script mode)")
  endif()
  get_filename_component(_real "${nvcc}" REALPATH)
  file(TIMESTAMP "${_real}" _mtime "%Y%m%d%H%M%S" UTC)
  file(SIZE "${_real}" _size)
  set(_key "${_real}|${_size}|${_mtime}")
  set(_vars _CAG_NVCC_VERSION _CAG_NVCC_SASS _CAG_NVCC_PTX _CAG_NVCC_VARIANTS _CAG_NVCC_DEFAULT)
  # In-process memo first (several queries per configure), then the file cache.
  get_property(_memo GLOBAL PROPERTY _CAG_NVCC_MEMO_${_key})
  if(_memo)
    foreach(_v IN LISTS _vars)
      get_property(_val GLOBAL PROPERTY _CAG_NVCC_MEMO_${_key}_${_v})
      string(REPLACE "_CAG_NVCC_" "${out_prefix}_" _out "${_v}")
      set(${_out} "${_val}" PARENT_SCOPE)
    endforeach()
    return()
  endif()
  set(_file "")
  if(cache_dir)
    string(MD5 _h "${_real}")
    set(_file "${cache_dir}/nvcc-${_h}.cmake")
    if(EXISTS "${_file}")
      set(_cached_key "")
      include("${_file}")
      if(_cached_key STREQUAL _key)
        set(_hit ON)
      endif()
    endif()
  endif()
  if(NOT _hit)
    _cag_nvcc_query_uncached("${nvcc}")
    if(_file)
      set(_content "# CudaArchGuard: what '${_real}' reported; regenerated when nvcc changes.\nset(_cached_key \"${_key}\")\n")
      foreach(_v IN LISTS _vars)
        string(APPEND _content "set(${_v} \"${${_v}}\")\n")
      endforeach()
      file(WRITE "${_file}" "${_content}")
    endif()
  endif()
  set_property(GLOBAL PROPERTY _CAG_NVCC_MEMO_${_key} ON)
  foreach(_v IN LISTS _vars)
    set_property(GLOBAL PROPERTY _CAG_NVCC_MEMO_${_key}_${_v} "${${_v}}")
    string(REPLACE "_CAG_NVCC_" "${out_prefix}_" _out "${_v}")
    set(${_out} "${${_v}}" PARENT_SCOPE)
  endforeach()
endfunction()
