# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
CudaArchGuardPolicy
-------------------

Asks the policy engine (the C++ library, ``archguard::plan_policy``, through ``arch plan`` of
the archguard tool or of ``archguard-verify``) what ``ARCH_POLICY`` (+ ``ARCH_PTX``,
``ARCH_MIN``) becomes for the installed nvcc, and applies its answer: an explicit list of SASS
and PTX targets, checked against what that nvcc supports, with where it runs. This module holds
no rule of its own: it runs nvcc (``CudaArchGuardToolkit``) and looks for GPUs
(``CudaArchGuardDetect``), hands the answers to the engine and formats the targets it returns.
Used by ``CudaArchGuard.cmake`` inside a project and on its own in script mode.

The tool is ``CudaArchGuard_EXECUTABLE`` when it names an existing archguard (or
archguard-verify) file, else ``archguard-verify`` built once from the sources shipped with the
module (``CudaArchGuardVerifier``). When neither can run (``CudaArchGuard_BUILTIN_VERIFIER=OFF``
and no archguard, or no C++ compiler), a list in CMake's own syntax is applied as CMake reads it
(``80`` = SASS + PTX of 80), unchecked, with a warning that says so; every other policy
(``auto``, ``native``, ``all``, ``all-major``, ``fleet:``, nvcc flags) is a fatal error naming
what to set (docs/policy.md, "Without a tool").

.. code-block:: cmake

  cuda_arch_guard_resolve_policy(
    POLICY <policy>            # auto | native | all | all-major | fleet:<csv> | <list>
    NVCC <nvcc>
    [PTX highest|all|none]     # default highest
    [MIN <cc>]                 # drop targets older than this (8.0 or 80)
    [EXACT]                    # take a list literally (a user's CMAKE_CUDA_ARCHITECTURES)
    [NVIDIA_SMI <path>]        # default: nvidia-smi on PATH
    [CACHE_DIR <dir>]          # where nvcc and GPU answers are cached ("" = no cache)
    [PREFIX <prefix>]          # result prefix, default CudaArchGuard
    [WHO <text>])              # how errors name the setting (default ARCH_POLICY=<policy>)

Policies:

``native``
  SASS for every distinct visible GPU (``CUDA_VISIBLE_DEVICES`` respected) + PTX for the
  highest. No GPU is a fatal error that suggests ``all-major`` or a list.
``auto`` (the default)
  Safe to ship from any machine. With a GPU visible: SASS for the visible GPUs (as ``native``)
  plus PTX of the lowest architecture this nvcc supports, so that every other GPU it supports
  runs by JIT (first launch slower) instead of failing with error 209; ``ARCH_PTX=highest``
  adds PTX of the highest SASS as well. With no GPU visible: ``all-major``. The summary's
  ``runs:`` line says on which GPUs the result runs natively, by JIT, or not at all.
``all``, ``all-major``
  nvcc's own meaning, made explicit from ``nvcc --list-gpu-code``: every SASS target, or the
  ``X0`` ones plus the earliest; PTX of the highest ``X0`` target.
``fleet:<file>``
  SASS for each distinct capability in a file of ``nvidia-smi --query-gpu=name,compute_cap
  --format=csv`` output (headers may repeat) + PTX for the highest. A relative path is
  resolved against the top-level source directory (``CMAKE_SOURCE_DIR``; in script mode the
  current directory), so the automatic re-configure of ``cmake --build`` finds it again. With
  ``ARCH_MIN``, GPUs below it are left out with a warning.
``<list>``
  Any dialect ``CudaArchGuardTokens`` reads (``80;90a;120``, ``8.0;9.0+PTX``,
  ``sm_80,sm_90``; nvcc flags such as ``-gencode arch=compute_80,code=sm_80`` through the
  archguard tool). A bare number names a GPU to cover: SASS, with PTX decided by ``ARCH_PTX``;
  explicit PTX (``compute_90``, ``90-virtual``, ``+PTX``) is kept. With ``EXACT`` the list is
  taken literally in CMake's meaning (``90`` = SASS + PTX) and ``PTX``/``MIN`` do not apply.

Every target is checked against nvcc; an unsupported one is a fatal error that lists what
this nvcc supports and the nearest valid choice. A GPU newer than the toolkit is clamped to PTX
of the highest supported architecture with a warning naming the CUDA release to install.

Results (``<prefix>_<NAME>``, in the caller's scope):

``ARCHITECTURES``       CMake syntax, e.g. ``75-real;80-real;90-real;100-real;110-real;120``
``GENCODE_FLAGS``       ``-gencode=arch=compute_80,code=sm_80;...``
``TORCH_ARCH_LIST``     ``7.5;8.0;...;12.0+PTX``
``TF_COMPUTE_CAPABILITIES`` ``sm_75,...,sm_120,compute_120``
``SASS`` / ``PTX``      the architectures with SASS / with PTX (``80;90a``)
``ITEMS``               ``sass:80;ptx:90`` (internal form)
``POLICY_USED``         the policy after ``auto`` was decided
``GPUS``                detected or fleet GPUs (``NVIDIA H200 (9.0)``)
``TOOLKIT``             ``CUDA 13.0 (/usr/local/cuda/bin/nvcc)``
``RUNS``                ``native:89;jit:75;...;none:50`` (internal form of the ``runs:`` line)
``SUMMARY``             the configure summary, one line per list item

Script mode (no project, nothing compiled), in ``CudaArchGuard/policy-script.cmake``; ``-P`` on
this file runs the same:

.. code-block:: console

  cmake -DARCH_POLICY=all-major -DFORMAT=gencode -P CudaArchGuardPolicy.cmake
  cmake -DARCH_POLICY="80;90a" -DNVCC=/opt/cuda/bin/nvcc -DFORMAT=cmake -P CudaArchGuardPolicy.cmake

``FORMAT`` is ``cmake`` (default), ``gencode``, ``torch``, ``tf`` or ``summary``; ``ARCH_PTX``,
``ARCH_MIN``, ``EXACT``, ``NVCC`` (default: nvcc on ``PATH``, then ``$CUDA_PATH/bin``,
``/usr/local/cuda/bin``), ``NVIDIA_SMI``, ``CACHE_DIR`` and ``QUIET`` may be given. The result
goes to stdout, the summary and warnings to stderr. ``NORMALIZE=<list>`` instead prints the
canonical CMake form of a token list (or ``ERROR: <why>``) without asking nvcc. A list in nvcc
flag syntax is read by the archguard tool: ``ARCHGUARD=<archguard or archguard-verify>``, else
archguard-verify built once from the module's sources (``CudaArchGuardVerifier``; kept under
``$XDG_CACHE_HOME`` or ``~/.cache``, or ``CudaArchGuard_VERIFIER_DIR``).
#]=======================================================================]
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE AND NOT _CAG_SCRIPT)
  include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuard/policy-script.cmake")  # the script mode lives there
  return()
endif()
include_guard(GLOBAL)
cmake_policy(VERSION 3.18...4.4)  # this file's own policy scope (include() pushes one)
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardTokens.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardToolkit.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardDetect.cmake")

# The answer of `<tool> arch plan --request <req_file>` for the request text <req>, in <out_text>
# (stdout; "" with <out_err> when there is none). With a <cache_dir> the answer is kept there and
# re-used while every input is unchanged: the request (policy, ARCH_PTX, ARCH_MIN, the nvcc's path,
# release and lists, the GPUs found, the fleet base), the tool (path, size, mtime), the module's
# table, and each file the engine says it read (`input=` lines: the fleet file, by content). Only
# an ok answer of a tool that lists its inputs (`inputs=N`) is kept. The rules stay in the tool:
# this is its answer, replayed, never one computed here.
function(_cag_plan_answer tool req req_file cache_dir out_text out_err)
  set(_entry "")
  if(cache_dir AND EXISTS "${tool}")
    file(TIMESTAMP "${tool}" _mtime "%Y-%m-%dT%H:%M:%S" UTC)
    file(SIZE "${tool}" _size)
    set(_table "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/architectures.txt")
    file(TIMESTAMP "${_table}" _tmtime "%Y-%m-%dT%H:%M:%S" UTC)
    file(SIZE "${_table}" _tsize)
    string(MD5 _h "plan-cache-1\n${tool}\n${_size}\n${_mtime}\n${_tsize}\n${_tmtime}\n${req}")
    set(_entry "${cache_dir}/plan-${_h}.txt")
    if(EXISTS "${_entry}")
      file(READ "${_entry}" _text)
      string(FIND "${_text}" "\n--\n" _at)
      if(_at GREATER -1)
        string(SUBSTRING "${_text}" 0 ${_at} _head)
        math(EXPR _at "${_at} + 4")
        string(SUBSTRING "${_text}" ${_at} -1 _out)
        set(_same ON)
        string(REPLACE "\n" ";" _head "${_head}")
        foreach(_l IN LISTS _head)  # "<md5> <path>" per input; the first line is the format
          if(_l MATCHES "^([0-9a-f]+) (.+)$")
            set(_f "${CMAKE_MATCH_2}")
            set(_want "${CMAKE_MATCH_1}")
            if(NOT EXISTS "${_f}")
              set(_same OFF)
              break()
            endif()
            file(MD5 "${_f}" _got)
            if(NOT _got STREQUAL _want)
              set(_same OFF)
              break()
            endif()
          elseif(NOT _l STREQUAL "cag-plan 1")
            set(_same OFF)
            break()
          endif()
        endforeach()
        if(_same)
          set_property(GLOBAL APPEND PROPERTY _CAG_PLAN_CACHE_HITS "${_entry}")
          set(${out_text} "${_out}" PARENT_SCOPE)
          set(${out_err} "" PARENT_SCOPE)
          return()
        endif()
      endif()
    endif()
  endif()
  file(WRITE "${req_file}" "${req}")
  execute_process(COMMAND "${tool}" arch plan --request "${req_file}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  set(${out_text} "${_out}" PARENT_SCOPE)
  set(${out_err} "(exit ${_rc}): ${_err}" PARENT_SCOPE)
  # Kept only when complete: an ok answer whose inputs are all listed and readable.
  if(_entry AND _rc EQUAL 0 AND _out MATCHES "^format=1\nstatus=ok\n" AND _out MATCHES "\ninputs=([0-9]+)\n")
    set(_n "${CMAKE_MATCH_1}")
    string(REGEX MATCHALL "\ninput=[^\n]*" _inputs "\n${_out}")
    list(LENGTH _inputs _count)
    set(_head "cag-plan 1\n")
    set(_ok ON)
    if(NOT _count EQUAL _n)
      set(_ok OFF)
    endif()
    foreach(_i IN LISTS _inputs)
      string(REGEX REPLACE "^\ninput=" "" _f "${_i}")
      if(_f MATCHES "\\\\" OR NOT IS_ABSOLUTE "${_f}" OR NOT EXISTS "${_f}")  # escaped or relative: not kept
        set(_ok OFF)
        break()
      endif()
      file(MD5 "${_f}" _m)
      string(APPEND _head "${_m} ${_f}\n")
    endforeach()
    if(_ok)
      string(RANDOM LENGTH 8 _r)
      file(WRITE "${_entry}.${_r}.tmp" "${_head}--\n${_out}")
      file(RENAME "${_entry}.${_r}.tmp" "${_entry}")
    endif()
  endif()
endfunction()

# Parses an `arch plan` answer (<text>, or none, with <err> saying why) and sets <prefix>_STATUS,
# _ERROR, _MODE, _ITEMS, _SASS, _PTX, _GPUS, _GPU_SMS, _RUNS, _RUNS_TEXT and _SUMMARY (lines joined
# by "\n") in the caller's scope; the warnings are shown as they come. The format is documented in
# docs/policy.md ("The plan format").
function(_cag_plan_parse tool text err out_prefix)
  set(_out "${text}")
  foreach(_k STATUS ERROR MODE ITEMS SASS PTX GPUS GPU_SMS RUNS RUNS_TEXT SUMMARY)
    set(_${_k} "")
  endforeach()
  if(NOT _out MATCHES "^format=1\n")
    set(_STATUS error)
    set(_ERROR "the policy engine (${tool} arch plan) gave no plan ${err}${_out}")
  endif()
  set(_bs "\\")
  string(ASCII 1 _m)
  while(_out MATCHES "^([^\n]*)\n(.*)$")
    set(_line "${CMAKE_MATCH_1}")
    set(_out "${CMAKE_MATCH_2}")
    if(NOT _line MATCHES "^([a-z_]+)=(.*)$")
      continue()
    endif()
    set(_key "${CMAKE_MATCH_1}")
    set(_v "${CMAKE_MATCH_2}")
    string(REPLACE "\\\\" "${_m}" _v "${_v}")
    string(REPLACE "\\n" "\n" _v "${_v}")
    string(REPLACE "${_m}" "${_bs}" _v "${_v}")
    string(TOUPPER "${_key}" _k)
    if(_key STREQUAL "warning")
      message(WARNING "${_v}")  # said here, in the engine's order (a warning may hold ';')
    elseif(_key STREQUAL "summary")
      string(APPEND _SUMMARY "${_v}\n")
    elseif(_key STREQUAL "gpu")
      string(REPLACE ";" "," _v "${_v}")
      list(APPEND _GPUS "${_v}")
    elseif(_key MATCHES "^(status|error|mode|items|sass|ptx|gpu_sms|runs|runs_text)$")
      set(_${_k} "${_v}")
    endif()
  endwhile()
  string(REGEX REPLACE "\n$" "" _SUMMARY "${_SUMMARY}")
  foreach(_k STATUS ERROR MODE ITEMS SASS PTX GPUS GPU_SMS RUNS RUNS_TEXT SUMMARY)
    set(${out_prefix}_${_k} "${_${_k}}" PARENT_SCOPE)
  endforeach()
endfunction()

# Appends "name=value\n" to the request in <io_var>, with "\" and newlines escaped.
function(_cag_plan_line io_var name value)
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\n" "\\n" value "${value}")
  set(${io_var} "${${io_var}}${name}=${value}\n" PARENT_SCOPE)
endfunction()

# No tool can run: a list in CMake's syntax is applied as CMake reads it, unchecked; anything
# else stops with what to set. Sets <out_items> (and stops on error).
function(_cag_plan_without_tool policy exact who why out_items)
  string(TOLOWER "${policy}" _lc)
  if(_lc MATCHES "^(auto|native|all|all-major|fleet:.*)$")
    message(FATAL_ERROR "${who}: resolving '${policy}' needs the policy engine (archguard arch plan or archguard-verify), "
                        "which cannot run here (${why}); name the archguard tool with CudaArchGuard_EXECUTABLE, leave "
                        "CudaArchGuard_BUILTIN_VERIFIER ON, or write the architectures as CMake does (e.g. 80-real;90)")
  endif()
  _cag_tokens_parse("${policy}" _items _err)
  if(_err)
    message(FATAL_ERROR "${who}: ${_err}.")
  endif()
  message(WARNING "${who}: the policy engine cannot run here (${why}): the list is applied as CMake reads it "
                  "(a bare number is SASS + PTX), not checked against nvcc, ARCH_PTX and ARCH_MIN unused")
  set(${out_items} "${_items}" PARENT_SCOPE)
endfunction()

function(cuda_arch_guard_resolve_policy)
  cmake_parse_arguments(PARSE_ARGV 0 arg "EXACT" "POLICY;NVCC;PTX;MIN;NVIDIA_SMI;CACHE_DIR;PREFIX;WHO" "")
  set(_who "cuda_arch_guard_resolve_policy")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${_who}: unknown arguments '${arg_UNPARSED_ARGUMENTS}'")
  endif()
  if(NOT arg_PREFIX)
    set(arg_PREFIX CudaArchGuard)
  endif()
  if(NOT arg_NVCC)
    message(FATAL_ERROR "${_who}: NVCC <path> is required")
  endif()
  if(NOT arg_PTX)
    set(arg_PTX highest)
  endif()
  string(STRIP "${arg_POLICY}" _policy)
  if(_policy STREQUAL "")
    set(_policy auto)
  endif()
  set(_who "ARCH_POLICY=${_policy}")
  if(arg_EXACT)
    set(_who "CMAKE_CUDA_ARCHITECTURES=${_policy}")
  endif()
  if(arg_WHO)
    set(_who "${arg_WHO}")
  endif()
  list(APPEND CMAKE_MESSAGE_CONTEXT "policy")

  # The toolkit's answers (cached per nvcc) and, for auto / native, the GPUs of this host.
  _cag_nvcc_query("${arg_NVCC}" "${arg_CACHE_DIR}" _CAG_NVCC)
  # The request, one "name=value" line per option of `arch plan` (a file: a CMake list could
  # not carry a ';' or an empty value through execute_process).
  set(_req "")
  set(_v_policy "${_policy}")
  set(_v_ptx "${arg_PTX}")
  set(_v_min "${arg_MIN}")
  set(_v_who "${_who}")
  set(_v_nvcc-path "${arg_NVCC}")
  set(_v_nvcc-release "${_CAG_NVCC_VERSION}")
  string(REPLACE ";" " " _v_nvcc-sass "${_CAG_NVCC_SASS}")
  string(REPLACE ";" " " _v_nvcc-ptx "${_CAG_NVCC_PTX}")
  string(REPLACE ";" " " _v_nvcc-variants "${_CAG_NVCC_VARIANTS}")
  set(_v_fleet-base "${CMAKE_SOURCE_DIR}")
  foreach(_k policy ptx min who nvcc-path nvcc-release nvcc-sass nvcc-ptx nvcc-variants fleet-base)
    _cag_plan_line(_req "${_k}" "${_v_${_k}}")
  endforeach()
  if(arg_EXACT)
    string(APPEND _req "exact\n")
  endif()
  string(TOLOWER "${_policy}" _lc)
  if(_lc STREQUAL "auto" OR _lc STREQUAL "native")
    set(_smi "${arg_NVIDIA_SMI}")
    if(NOT _smi)
      find_program(_cag_smi_found nvidia-smi)
      set(_smi "${_cag_smi_found}")
    endif()
    _cag_detect_gpus("${_smi}" "${arg_NVCC}" "${arg_CACHE_DIR}" _gpu)
    foreach(_g IN LISTS _gpu_NAMES)
      _cag_plan_line(_req gpu "${_g}")
    endforeach()
    string(REPLACE ";" "; " _gw "${_gpu_WHY}")
    _cag_plan_line(_req gpu-source "${_gpu_SOURCE}")
    _cag_plan_line(_req gpu-why "${_gw}")
  endif()
  if(arg_CACHE_DIR)
    set(_req_file "${arg_CACHE_DIR}/plan-request.txt")
  else()
    string(RANDOM LENGTH 12 _r)
    set(_req_file "${CMAKE_CURRENT_BINARY_DIR}/cag-plan-${_r}.txt")
    if(CMAKE_SCRIPT_MODE_FILE)
      set(_tmp "$ENV{TMPDIR}")
      if(NOT _tmp)
        set(_tmp /tmp)
      endif()
      set(_req_file "${_tmp}/cag-plan-${_r}.txt")
    endif()
  endif()

  _cag_arch_tool(_tool _tool_why)
  set(_toolkit "CUDA ${_CAG_NVCC_VERSION} (${arg_NVCC})")
  if(_tool)
    _cag_plan_answer("${_tool}" "${_req}" "${_req_file}" "${arg_CACHE_DIR}" _answer _answer_err)
    _cag_plan_parse("${_tool}" "${_answer}" "${_answer_err}" _plan)
    if(NOT arg_CACHE_DIR)
      file(REMOVE "${_req_file}")
    endif()
    if(NOT _plan_STATUS STREQUAL "ok")
      message(FATAL_ERROR "${_plan_ERROR}")
    endif()
    set(_items "${_plan_ITEMS}")
    set(_mode "${_plan_MODE}")
    set(_summary "${_plan_SUMMARY}")
  else()
    _cag_plan_without_tool("${_policy}" "${arg_EXACT}" "${_who}" "${_tool_why}" _items)
    foreach(_k SASS PTX GPUS GPU_SMS RUNS)
      set(_plan_${_k} "")
    endforeach()
    foreach(_it IN LISTS _items)
      string(REGEX REPLACE "^(sass|ptx):" "" _a "${_it}")
      if(_it MATCHES "^sass:")
        list(APPEND _plan_SASS "${_a}")
      elseif(_it MATCHES "^ptx:")
        list(APPEND _plan_PTX "${_a}")
      endif()
    endforeach()
    set(_mode list)
    set(_plan_RUNS_TEXT "unknown: the policy engine cannot run here (${_tool_why})")
    string(REPLACE ";" " " _s "${_plan_SASS}")
    string(REPLACE ";" " " _p "${_plan_PTX}")
    set(_summary "policy: ${_policy} -> list (taken as CMake's own list)\ntoolkit: ${_toolkit}\nGPUs: none used\nSASS: ${_s}\nPTX: ${_p}\nruns: ${_plan_RUNS_TEXT}")
  endif()

  _cag_tokens_format("${_items}" cmake _cmake)
  _cag_tokens_format("${_items}" gencode _gencode)
  _cag_tokens_format("${_items}" torch _torch)
  _cag_tokens_format("${_items}" tf _tf)
  set(${arg_PREFIX}_ARCHITECTURES "${_cmake}" PARENT_SCOPE)
  set(${arg_PREFIX}_GENCODE_FLAGS "${_gencode}" PARENT_SCOPE)
  set(${arg_PREFIX}_TORCH_ARCH_LIST "${_torch}" PARENT_SCOPE)
  set(${arg_PREFIX}_TORCH_NOTE "${_torch_NOTE}" PARENT_SCOPE)  # what TORCH_CUDA_ARCH_LIST cannot say
  set(${arg_PREFIX}_TF_COMPUTE_CAPABILITIES "${_tf}" PARENT_SCOPE)
  set(${arg_PREFIX}_SASS "${_plan_SASS}" PARENT_SCOPE)
  set(${arg_PREFIX}_PTX "${_plan_PTX}" PARENT_SCOPE)
  set(${arg_PREFIX}_ITEMS "${_items}" PARENT_SCOPE)
  set(${arg_PREFIX}_POLICY_USED "${_mode}" PARENT_SCOPE)
  set(${arg_PREFIX}_GPUS "${_plan_GPUS}" PARENT_SCOPE)
  set(${arg_PREFIX}_GPU_SMS "${_plan_GPU_SMS}" PARENT_SCOPE)
  set(${arg_PREFIX}_TOOLKIT "${_toolkit}" PARENT_SCOPE)
  set(${arg_PREFIX}_RUNS "${_plan_RUNS}" PARENT_SCOPE)
  set(${arg_PREFIX}_RUNS_TEXT "${_plan_RUNS_TEXT}" PARENT_SCOPE)
  set(${arg_PREFIX}_SUMMARY "${_summary}" PARENT_SCOPE)
endfunction()
