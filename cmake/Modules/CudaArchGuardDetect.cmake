# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
CudaArchGuardDetect
-------------------

Finds the compute capabilities of the GPUs this host can see. (Fleet files are read by the
policy engine, ``archguard::parse_fleet_csv``, through ``arch plan``.)

.. code-block:: cmake

  _cag_detect_gpus(<nvidia-smi or ""> <nvcc> <cache dir or ""> <out_prefix>)

``_cag_detect_gpus`` tries, in order:

1. ``nvidia-smi --query-gpu=index,uuid,name,compute_cap --format=csv,noheader`` (about 25 ms),
   filtered by ``CUDA_VISIBLE_DEVICES`` (indices in nvidia-smi's PCI order, or ``GPU-`` UUID
   prefixes; an empty value hides every GPU; as in CUDA, the list ends at the first entry that
   names no GPU);
2. the toolkit's ``__nvcc_device_query`` beside nvcc (it uses the CUDA runtime, so it follows
   ``CUDA_VISIBLE_DEVICES`` exactly);
3. a probe compiled with nvcc and run.

Every answer is validated against a strict pattern, so an error message printed by a tool can
never become an architecture. Sets ``<out_prefix>_SMS`` (distinct SM numbers, ascending),
``<out_prefix>_NAMES`` (``name (CC)`` per device), ``<out_prefix>_SOURCE`` (which method
answered) and ``<out_prefix>_WHY`` (why none was found). With a cache directory the answer is kept in
``<cache dir>/gpus.cmake`` keyed on the host, the tools and ``CUDA_VISIBLE_DEVICES``; delete
that file to detect again.
#]=======================================================================]
include_guard(GLOBAL)
cmake_policy(VERSION 3.18...4.4)  # this file's own policy scope (include() pushes one)
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardToolkit.cmake")  # _cag_check
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardTable.cmake")    # _cag_sm_to_cc

# "9.0" -> 90; fails on anything that is not a capability.
function(_cag_cc_to_sm cc out_var)
  if(cc MATCHES "^([0-9]+)\\.([0-9])$")
    math(EXPR _sm "${CMAKE_MATCH_1} * 10 + ${CMAKE_MATCH_2}")
    set(${out_var} ${_sm} PARENT_SCOPE)
  else()
    set(${out_var} "" PARENT_SCOPE)
  endif()
endfunction()

function(_cag_detect_nvidia_smi smi out_sms out_names out_why)
  set(${out_sms} "" PARENT_SCOPE)
  set(${out_names} "" PARENT_SCOPE)
  execute_process(COMMAND "${smi}" --query-gpu=index,uuid,name,compute_cap --format=csv,noheader
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    string(STRIP "${_out}${_err}" _msg)
    set(${out_why} "nvidia-smi failed (exit ${_rc}: ${_msg})" PARENT_SCOPE)
    return()
  endif()
  string(REPLACE "\r" "" _out "${_out}")
  string(REPLACE ";" "," _out "${_out}")
  string(REPLACE "\n" ";" _lines "${_out}")
  set(_idx "")
  set(_uuid "")
  set(_name "")
  set(_sm "")
  foreach(_l IN LISTS _lines)
    if(_l STREQUAL "")
      continue()
    endif()
    if(NOT _l MATCHES "^ *([0-9]+), *([^,]+), *(.*), *([0-9]+\\.[0-9]) *$")
      set(${out_why} "nvidia-smi printed an unexpected line '${_l}'" PARENT_SCOPE)
      return()
    endif()
    list(APPEND _idx "${CMAKE_MATCH_1}")
    list(APPEND _uuid "${CMAKE_MATCH_2}")
    list(APPEND _name "${CMAKE_MATCH_3}")
    _cag_cc_to_sm("${CMAKE_MATCH_4}" _s)
    list(APPEND _sm "${_s}")
  endforeach()
  list(LENGTH _idx _n)
  # Which of them the process would see.
  set(_visible "")
  if(DEFINED ENV{CUDA_VISIBLE_DEVICES})
    string(REPLACE "," ";" _cvd "$ENV{CUDA_VISIBLE_DEVICES}")
    foreach(_e IN LISTS _cvd)
      string(STRIP "${_e}" _e)
      set(_found -1)
      if(_e MATCHES "^[0-9]+$")
        list(FIND _idx "${_e}" _found)
      elseif(_e MATCHES "^GPU-")
        set(_i 0)
        while(_i LESS _n)
          list(GET _uuid ${_i} _u)
          string(FIND "${_u}" "${_e}" _at)
          if(_at EQUAL 0)
            set(_found ${_i})
            break()
          endif()
          math(EXPR _i "${_i} + 1")
        endwhile()
      endif()
      if(_found EQUAL -1)
        break()  # CUDA stops at the first entry that names no device
      endif()
      list(APPEND _visible ${_found})
    endforeach()
  elseif(_n GREATER 0)
    math(EXPR _last "${_n} - 1")
    foreach(_i RANGE ${_last})
      list(APPEND _visible ${_i})
    endforeach()
  endif()
  set(_sms "")
  set(_names "")
  foreach(_i IN LISTS _visible)
    list(GET _sm ${_i} _s)
    list(GET _name ${_i} _nm)
    _cag_sm_to_cc(${_s} _cc)
    list(APPEND _sms ${_s})
    list(APPEND _names "${_nm} (${_cc})")
  endforeach()
  if(NOT _sms)
    if(_n EQUAL 0)
      set(${out_why} "nvidia-smi lists no GPU" PARENT_SCOPE)
    else()
      set(${out_why} "nvidia-smi lists ${_n} GPU(s) but CUDA_VISIBLE_DEVICES='$ENV{CUDA_VISIBLE_DEVICES}' hides them" PARENT_SCOPE)
    endif()
    return()
  endif()
  set(${out_sms} "${_sms}" PARENT_SCOPE)
  set(${out_names} "${_names}" PARENT_SCOPE)
endfunction()

# Validates "86,89" / "9.0 12.0" style output into SM numbers; "" when it is anything else.
function(_cag_detect_parse_caps text out_var)
  string(STRIP "${text}" _t)
  set(${out_var} "" PARENT_SCOPE)
  if(NOT _t MATCHES "^[0-9]+(\\.[0-9])?([,; \n]+[0-9]+(\\.[0-9])?)*$")
    return()
  endif()
  string(REGEX REPLACE "[,; \n]+" ";" _t "${_t}")
  set(_sms "")
  foreach(_c IN LISTS _t)
    if(_c MATCHES "\\.")
      _cag_cc_to_sm("${_c}" _s)
    else()
      set(_s "${_c}")
    endif()
    if(_s LESS 10)
      return()
    endif()
    list(APPEND _sms ${_s})
  endforeach()
  set(${out_var} "${_sms}" PARENT_SCOPE)
endfunction()

function(_cag_detect_probe nvcc cache_dir out_sms out_why)
  set(${out_sms} "" PARENT_SCOPE)
  if(cache_dir)
    set(_dir "${cache_dir}/probe")
  else()
    # Script mode without a cache: a private temporary directory, removed on every path below.
    set(_tmp "$ENV{TMPDIR}")
    if(NOT _tmp)
      set(_tmp "/tmp")
    endif()
    string(RANDOM LENGTH 12 _r)
    set(_dir "${_tmp}/cag-probe-${_r}")
  endif()
  file(MAKE_DIRECTORY "${_dir}")
  file(WRITE "${_dir}/probe.cu" [=[
#include <cstdio>
#include <cuda_runtime.h>
int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return 1;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) return 1;
    std::printf("%s%d.%d", i ? "," : "", p.major, p.minor);
  }
  std::printf("\n");
  return 0;
}
]=])
  execute_process(COMMAND "${nvcc}" -o "${_dir}/probe" "${_dir}/probe.cu"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _o ERROR_VARIABLE _e)
  set(_sms "")
  if(NOT _rc EQUAL 0)
    set(_why "the probe did not compile (exit ${_rc})")
  else()
    execute_process(COMMAND "${_dir}/probe" RESULT_VARIABLE _rc OUTPUT_VARIABLE _o ERROR_VARIABLE _e)
    _cag_detect_parse_caps("${_o}" _sms)
    if(NOT _rc EQUAL 0 OR NOT _sms)
      set(_sms "")
      set(_why "the compiled probe found no CUDA device")
    endif()
  endif()
  if(NOT cache_dir)
    file(REMOVE_RECURSE "${_dir}")
  endif()
  if(_sms)
    set(${out_sms} "${_sms}" PARENT_SCOPE)
  else()
    set(${out_why} "${_why}" PARENT_SCOPE)
  endif()
endfunction()

# The GPUs another source than nvidia-smi found (SM numbers in <sms>), into _cag_detect_gpus's
# _sms and _source, each named "GPU (<cc>)" in its _names.
macro(_cag_detect_take sms source)
  set(_sms "${sms}")
  set(_source "${source}")
  foreach(_s IN LISTS _sms)
    _cag_sm_to_cc(${_s} _cc)
    list(APPEND _names "GPU (${_cc})")
  endforeach()
endmacro()

function(_cag_detect_gpus smi nvcc cache_dir out_prefix)
  list(APPEND CMAKE_MESSAGE_CONTEXT "detect")
  cmake_host_system_information(RESULT _host QUERY HOSTNAME)
  if(DEFINED ENV{CUDA_VISIBLE_DEVICES})
    set(_cvd "set:$ENV{CUDA_VISIBLE_DEVICES}")
  else()
    set(_cvd "unset")
  endif()
  set(_key "${_host}|${smi}|${nvcc}|${_cvd}")
  set(_vars _CAG_GPU_SMS _CAG_GPU_NAMES _CAG_GPU_SOURCE _CAG_GPU_WHY)
  if(cache_dir AND EXISTS "${cache_dir}/gpus.cmake")
    set(_cached_key "")
    include("${cache_dir}/gpus.cmake")
    if(_cached_key STREQUAL _key)
      _cag_gpu_results(${out_prefix})
      return()
    endif()
  endif()
  _cag_check(START "CudaArchGuard: looking for GPUs")
  set(_sms "")
  set(_names "")
  set(_source "")
  set(_why "")
  if(smi AND EXISTS "${smi}")
    _cag_detect_nvidia_smi("${smi}" _sms _names _w)
    if(_sms)
      set(_source "nvidia-smi")
    else()
      list(APPEND _why "${_w}")
    endif()
  else()
    list(APPEND _why "nvidia-smi not found")
  endif()
  # An explicit "no device" from nvidia-smi is an answer; only a missing or broken tool falls
  # through to the slower methods.
  set(_conclusive OFF)
  if(NOT _sms AND _why MATCHES "lists no GPU|hides them")
    set(_conclusive ON)
  endif()
  if(NOT _sms AND NOT _conclusive)
    get_filename_component(_nvcc_dir "${nvcc}" DIRECTORY)
    set(_dq "${_nvcc_dir}/__nvcc_device_query")
    if(EXISTS "${_dq}")
      execute_process(COMMAND "${_dq}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _o ERROR_VARIABLE _e)
      _cag_detect_parse_caps("${_o}" _dsms)
      if(_rc EQUAL 0 AND _dsms)
        _cag_detect_take("${_dsms}" "__nvcc_device_query")
      else()
        # It asks the CUDA runtime, like the probe would: its "no" is final.
        list(APPEND _why "__nvcc_device_query found no device (exit ${_rc})")
        set(_conclusive ON)
      endif()
    else()
      list(APPEND _why "no __nvcc_device_query beside nvcc")
    endif()
    if(NOT _sms AND NOT _conclusive)
      _cag_detect_probe("${nvcc}" "${cache_dir}" _psms _w)
      if(_psms)
        _cag_detect_take("${_psms}" "probe")
      else()
        list(APPEND _why "${_w}")
      endif()
    endif()
  endif()
  if(_sms)
    set(_why "")
    list(LENGTH _names _n)
    _cag_check(PASS "${_n} via ${_source}")
  else()
    set(_source "none")
    string(REPLACE ";" ", " _why "${_why}")
    _cag_check(FAIL "none (${_why})")
  endif()
  set(_CAG_GPU_SMS "${_sms}")
  set(_CAG_GPU_NAMES "${_names}")
  set(_CAG_GPU_SOURCE "${_source}")
  set(_CAG_GPU_WHY "${_why}")
  if(cache_dir)
    set(_content "# CudaArchGuard: GPUs detected on this host; delete this file to detect again.\nset(_cached_key \"${_key}\")\n")
    foreach(_v IN LISTS _vars)
      string(REPLACE "\"" "\\\"" _val "${${_v}}")
      string(APPEND _content "set(${_v} \"${_val}\")\n")
    endforeach()
    file(WRITE "${cache_dir}/gpus.cmake" "${_content}")
  endif()
  _cag_gpu_results(${out_prefix})
endfunction()

# Copies the _CAG_GPU_* of the calling function to <out_prefix>_* of its caller.
macro(_cag_gpu_results out_prefix)
  foreach(_v SMS NAMES SOURCE WHY)
    set(${out_prefix}_${_v} "${_CAG_GPU_${_v}}" PARENT_SCOPE)
  endforeach()
endmacro()
