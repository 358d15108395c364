# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
CudaArchGuardTokens
-------------------

Parses the architecture tokens users write into *items*, and formats items back into CMake,
nvcc, PyTorch and TensorFlow syntax. The token grammar has one owner, the C++ parser
(``src/arch/tokens.cpp``: ``archguard::parse_list``, ``archguard arch normalize``). This module
reads itself only the dialects people type in ``ARCH_POLICY`` and ``CUDA_ARCHITECTURES``, which
configure time needs without any tool; nvcc flag syntax goes to the C++ grammar through
``archguard arch normalize --format codes`` (or ``archguard-verify arch normalize``, built from
the sources shipped with the module, see ``CudaArchGuardVerifier``), which gives it back as nvcc
names (``sm_80;compute_80;lto_80``).
A scenario test runs both over the same corpus. Table facts (which SMs exist, which have
``a``/``f`` variants, codenames) come from ``CudaArchGuardTable``; nothing here knows an
architecture by heart.

An *item* is ``<kind>:<sm><suffix>`` with kind ``sass``, ``ptx`` or ``lto``: ``sass:90a``,
``ptx:120``, ``lto:80`` (LTO-IR, which has no CMake spelling and no policy use).

.. code-block:: cmake

  _cag_tokens_parse(<text> <out_items> <out_error>)
  _cag_tokens_format(<items> <format> <out_var>)   # format: cmake gencode torch tf

Read here (words separated by blanks or ``;``; ``,`` separates TensorFlow items):

``90``, ``90-real``, ``90-virtual``, ``90a-real``, ``100f``
  CMake: a bare number is SASS + PTX, ``-real`` SASS, ``-virtual`` PTX.
``sm_90a``, ``compute_120f``, ``lto_80``
  nvcc names: SASS, PTX, LTO-IR.
``8.6``, ``9.0a``, ``12.0+PTX``
  PyTorch / TensorFlow capabilities: SASS, ``+PTX`` adds PTX.
``Hopper``, ``Ampere+Tegra``
  Family names from the table's codename column: the non-Tegra capabilities (or, with
  ``+Tegra`` or for a Tegra-only family, the integrated ones), PTX for the highest non-Tegra one.

Read by the C++ grammar (a list holding a word that starts with ``-`` and a letter, or with
``arch=``, or any quote or bracket):

``-arch=sm_86``, ``-arch compute_80 -code sm_80,compute_80``, ``-gencode arch=compute_80,code=[sm_80,compute_80]``, ``arch=compute_80,code=sm_80``
  nvcc flags, with nvcc's rules: ``-arch=sm_XY`` alone is ``sm_XY`` + ``compute_XY`` (+ plain
  ``compute_XY`` for a suffixed ``sm_XYa``), a code must be compatible with its virtual arch.
  Without the tool (``CudaArchGuard_BUILTIN_VERIFIER=OFF`` and no archguard, or no C++
  compiler) such a list is an error that says so. The tool's answer is then read here, so an
  architecture nvcc lists but the table lacks is accepted the same way in both paths.

Errors name the token and say why, listing valid neighbours in the token's own spelling
(``86a: no 'a' variant below 9.0; valid 8.x targets: 80, 86, 87, 88, 89``), worded as the C++
parser words them.

Example:

.. code-block:: cmake

  _cag_tokens_parse("8.0;9.0+PTX" items err)   # items = sass:80;sass:90;ptx:90
  _cag_tokens_format("${items}" cmake out)      # out = 80-real;90
#]=======================================================================]
include_guard(GLOBAL)
cmake_policy(VERSION 3.18...4.4)  # this file's own policy scope (include() pushes one)
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardTable.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuardVerifier.cmake")  # _cag_arch_tool

# How a token was spelled decides how neighbours are written in its error message.
# style: cmake (90a), sass (sm_90a), ptx (compute_90a), lto (lto_90a), capability (9.0a).
function(_cag_tok_styled sm sfx style out_var)
  if(style STREQUAL "cmake")
    set(_o "${sm}${sfx}")
  elseif(style STREQUAL "sass")
    set(_o "sm_${sm}${sfx}")
  elseif(style STREQUAL "ptx")
    set(_o "compute_${sm}${sfx}")
  elseif(style STREQUAL "lto")
    set(_o "lto_${sm}${sfx}")
  elseif(style STREQUAL "capability")
    math(EXPR _maj "${sm} / 10")
    math(EXPR _min "${sm} % 10")
    set(_o "${_maj}.${_min}${sfx}")
  else()
    message(FATAL_ERROR "CudaArchGuard: internal error: unknown token style '${style}'")
  endif()
  set(${out_var} "${_o}" PARENT_SCOPE)
endfunction()

# Checks an SM + suffix against the table; <out_err> says why and lists the valid neighbours.
function(_cag_tok_validate who sm sfx style out_err)
  _cag_table_import()
  set(${out_err} "" PARENT_SCOPE)
  # nvcc is the authority on what it builds: an architecture it lists (or an a/f variant its
  # --help names) is accepted although the table lacks it, with one warning per configure.
  if(NOT sm IN_LIST CudaArchGuard_TABLE_SMS AND (sm IN_LIST _CAG_NVCC_SASS OR sm IN_LIST _CAG_NVCC_PTX)
     AND (sfx STREQUAL "" OR "${sm}${sfx}" IN_LIST _CAG_NVCC_VARIANTS))
    get_property(_warned GLOBAL PROPERTY _CAG_INFERRED_WARNED)
    if(NOT sm IN_LIST _warned)
      set_property(GLOBAL APPEND PROPERTY _CAG_INFERRED_WARNED ${sm})
      math(EXPR _maj "${sm} / 10")
      math(EXPR _min "${sm} % 10")
      message(WARNING "CudaArchGuard: sm_${sm} is listed by nvcc ${_CAG_NVCC_VERSION} but not in the architecture "
                      "table: assuming CC ${_maj}.${_min} (its SASS runs on CC ${_maj}.${_min} only, its PTX on CC "
                      "${_maj}.${_min} and later; Tegra and family unknown); add an 'arch|${sm}|${_maj}.${_min}|...' "
                      "row to cmake/Modules/CudaArchGuard/architectures.txt (see docs/architectures.md)")
    endif()
    return()
  endif()
  if(NOT sm IN_LIST CudaArchGuard_TABLE_SMS)
    set(_below "")
    set(_above "")
    foreach(_s IN LISTS CudaArchGuard_TABLE_SMS)
      if(_s LESS sm)
        set(_below ${_s})
      elseif(_s GREATER sm AND _above STREQUAL "")
        set(_above ${_s})
      endif()
    endforeach()
    set(_near "")
    foreach(_n ${_below} ${_above})
      _cag_tok_styled(${_n} "" ${style} _t)
      list(APPEND _near "${_t}")
    endforeach()
    string(REPLACE ";" ", " _near "${_near}")
    _cag_tok_styled(${sm} "" capability _cap)
    set(${out_err} "${who}: unknown architecture: there is no compute capability ${_cap}; nearest valid targets: ${_near}" PARENT_SCOPE)
    return()
  endif()
  if(sfx STREQUAL "" OR (sfx STREQUAL "a" AND NOT CudaArchGuard_ARCH_${sm}_A_SINCE STREQUAL "-")
     OR (sfx STREQUAL "f" AND NOT CudaArchGuard_ARCH_${sm}_F_SINCE STREQUAL "-"))
    return()
  endif()
  string(REGEX REPLACE "\\..*" "" _major "${CudaArchGuard_ARCH_${sm}_CC}")
  set(_valid "")
  set(_lowest "")
  foreach(_s IN LISTS CudaArchGuard_TABLE_SMS)
    if(_lowest STREQUAL "" AND ((sfx STREQUAL "a" AND NOT CudaArchGuard_ARCH_${_s}_A_SINCE STREQUAL "-")
                                OR (sfx STREQUAL "f" AND NOT CudaArchGuard_ARCH_${_s}_F_SINCE STREQUAL "-")))
      set(_lowest ${_s})
    endif()
    string(REGEX REPLACE "\\..*" "" _m "${CudaArchGuard_ARCH_${_s}_CC}")
    if(_m EQUAL _major)
      _cag_tok_styled(${_s} "" ${style} _t)
      list(APPEND _valid "${_t}")
      if(NOT CudaArchGuard_ARCH_${_s}_A_SINCE STREQUAL "-")
        _cag_tok_styled(${_s} a ${style} _t)
        list(APPEND _valid "${_t}")
      endif()
      if(NOT CudaArchGuard_ARCH_${_s}_F_SINCE STREQUAL "-")
        _cag_tok_styled(${_s} f ${style} _t)
        list(APPEND _valid "${_t}")
      endif()
    endif()
  endforeach()
  string(REPLACE ";" ", " _valid "${_valid}")
  set(_list "valid ${_major}.x targets: ${_valid}")
  if(NOT _lowest STREQUAL "" AND sm LESS _lowest)
    _cag_tok_styled(${_lowest} "" capability _cap)
    set(${out_err} "${who}: no '${sfx}' variant below ${_cap}; ${_list}" PARENT_SCOPE)
  else()
    _cag_tok_styled(${sm} "" ${style} _plain)
    set(${out_err} "${who}: ${_plain} has no '${sfx}' variant; ${_list}" PARENT_SCOPE)
  endif()
endfunction()

function(_cag_tok_not_a_token word out_err)
  set(${out_err} "${word}: not an architecture token; expected e.g. 90, 90-real, 100f-virtual, sm_90a, compute_80, 8.6, 12.0+PTX, -arch=sm_86, -gencode arch=compute_80,code=sm_80 or a family name such as Hopper" PARENT_SCOPE)
endfunction()

# Ends the calling function, setting <out_var> in its caller to "<value of word_var>: not an
# architecture token". Takes the variable's name, so that the token is never re-read as code.
macro(_cag_tok_reject word_var out_var)
  _cag_tok_not_a_token("${${word_var}}" _cag_rejected)
  set(${out_var} "${_cag_rejected}" PARENT_SCOPE)
  return()
endmacro()

# The end of a reader of one dialect: <sm><sfx> checked against the table (an error goes to
# <out_err> of the reader's caller and ends the reader), then <out_items> there: an item of
# each of <kinds> (sass, ptx or both) for it.
macro(_cag_tok_items word sm sfx style kinds out_items out_err)
  _cag_tok_validate("${word}" ${sm} "${sfx}" ${style} _e)
  set(${out_err} "${_e}" PARENT_SCOPE)
  if(_e)
    return()
  endif()
  set(_items "")
  foreach(_kind IN ITEMS ${kinds})
    list(APPEND _items "${_kind}:${sm}${sfx}")
  endforeach()
  set(${out_items} "${_items}" PARENT_SCOPE)
endmacro()

# nvcc names: sm_90a, compute_120f, lto_80 (prefix in any case). Sets <out>_KIND/_SM/_SFX, <out>_ERR.
function(_cag_tok_nvcc_name word out)
  set(${out}_ERR "" PARENT_SCOPE)
  string(TOLOWER "${word}" _lc)
  if(_lc MATCHES "^sm_(.*)$")
    set(_kind sass)
  elseif(_lc MATCHES "^compute_(.*)$")
    set(_kind ptx)
  elseif(_lc MATCHES "^lto_(.*)$")
    set(_kind lto)
  else()
    _cag_tok_reject(word ${out}_ERR)
  endif()
  if(NOT CMAKE_MATCH_1 MATCHES "^([1-9][0-9][0-9]?)([af]?)$")
    _cag_tok_reject(word ${out}_ERR)
  endif()
  set(_sm ${CMAKE_MATCH_1})
  set(_sfx "${CMAKE_MATCH_2}")
  _cag_tok_validate("${word}" ${_sm} "${_sfx}" ${_kind} _e)
  set(${out}_ERR "${_e}" PARENT_SCOPE)
  set(${out}_KIND ${_kind} PARENT_SCOPE)
  set(${out}_SM ${_sm} PARENT_SCOPE)
  set(${out}_SFX "${_sfx}" PARENT_SCOPE)
endfunction()

# "9.0a", "12.0+PTX", "8.6" (PyTorch, TensorFlow).
function(_cag_tok_capability word out_items out_err)
  set(${out_items} "" PARENT_SCOPE)
  string(TOLOWER "${word}" _lc)
  if(NOT _lc MATCHES "^([0-9][0-9]?)\\.([0-9])(.*)$")
    _cag_tok_reject(word ${out_err})
  endif()
  set(_maj ${CMAKE_MATCH_1})
  set(_min ${CMAKE_MATCH_2})
  set(_rest "${CMAKE_MATCH_3}")
  if(_rest MATCHES "^[0-9]")
    set(${out_err} "${word}: the minor version of a compute capability is one digit" PARENT_SCOPE)
    return()
  endif()
  math(EXPR _maj "${_maj}")  # "08" -> 8
  if(_maj EQUAL 0)
    _cag_tok_reject(word ${out_err})
  endif()
  math(EXPR _sm "${_maj} * 10 + ${_min}")
  set(_sfx "")
  if(_rest MATCHES "^([af])(.*)$")
    set(_sfx ${CMAKE_MATCH_1})
    set(_rest "${CMAKE_MATCH_2}")
  endif()
  set(_kinds sass)
  if(_rest STREQUAL "+ptx")
    list(APPEND _kinds ptx)
  elseif(NOT _rest STREQUAL "")
    _cag_tok_reject(word ${out_err})
  endif()
  _cag_tok_items("${word}" ${_sm} "${_sfx}" capability "${_kinds}" ${out_items} ${out_err})
endfunction()

# CMake: "90", "90-real", "90a-virtual", "100f" (suffix letter in any case).
function(_cag_tok_cmake word out_items out_err)
  set(${out_items} "" PARENT_SCOPE)
  if(NOT word MATCHES "^([1-9][0-9][0-9]?)([aAfF]?)(-real|-virtual)?$")
    _cag_tok_reject(word ${out_err})
  endif()
  set(_sm ${CMAKE_MATCH_1})
  string(TOLOWER "${CMAKE_MATCH_2}" _sfx)
  set(_mode "${CMAKE_MATCH_3}")
  set(_kinds sass ptx)
  if(_mode STREQUAL "-real")
    set(_kinds sass)
  elseif(_mode STREQUAL "-virtual")
    set(_kinds ptx)
  endif()
  _cag_tok_items("${word}" ${_sm} "${_sfx}" cmake "${_kinds}" ${out_items} ${out_err})
endfunction()

# Family names as PyTorch spells them ("Ampere", "Ampere+Tegra"), from the table's codename
# column: every row whose codename starts with the name, Tegra rows only with "+Tegra" (or when
# the family has only Tegra rows, e.g. Thor), renamed rows under their new SM; SASS for each,
# plus PTX of the highest for a non-Tegra expansion.
function(_cag_tok_family word out_items out_err)
  _cag_table_import()
  set(${out_items} "" PARENT_SCOPE)
  set(${out_err} "" PARENT_SCOPE)
  string(TOLOWER "${word}" _name)
  set(_tegra OFF)
  string(LENGTH "${_name}" _len)
  if(_len GREATER 6 AND _name MATCHES "^(.*)\\+tegra$")
    set(_tegra ON)
    set(_name "${CMAKE_MATCH_1}")
  endif()
  set(_plain "")
  set(_integrated "")
  set(_known "")
  foreach(_s IN LISTS CudaArchGuard_TABLE_SMS)
    set(_cn "${CudaArchGuard_ARCH_${_s}_CODENAME}")
    if(NOT _cn MATCHES "^([A-Za-z]+)")
      continue()
    endif()
    set(_display "${CMAKE_MATCH_1}")
    string(TOLOWER "${_display}" _first)
    if(NOT _display IN_LIST _known)
      list(APPEND _known "${_display}")
    endif()
    if(NOT _first STREQUAL _name)
      continue()
    endif()
    if(CudaArchGuard_ARCH_${_s}_TEGRA STREQUAL "1")
      list(APPEND _integrated ${_s})
    else()
      list(APPEND _plain ${_s})
    endif()
  endforeach()
  if(NOT _plain AND NOT _integrated)
    string(REPLACE ";" ", " _known "${_known}")
    set(${out_err} "${word}: unknown architecture family name; known: ${_known} (add +Tegra for the integrated parts)" PARENT_SCOPE)
    return()
  endif()
  if(_tegra AND NOT _integrated)
    string(LENGTH "${word}" _wl)
    math(EXPR _wl "${_wl} - 6")
    string(SUBSTRING "${word}" 0 ${_wl} _fam)
    set(${out_err} "${word}: the ${_fam} family has no Tegra parts in the table" PARENT_SCOPE)
    return()
  endif()
  set(_use_tegra OFF)
  set(_rows "${_plain}")
  if(_tegra OR NOT _plain)
    set(_use_tegra ON)
    set(_rows "${_integrated}")
  endif()
  set(_items "")
  set(_highest 0)
  foreach(_s IN LISTS _rows)
    foreach(_r IN LISTS CudaArchGuard_TABLE_RENAMES)
      if(_r MATCHES "^${_s}>([0-9]+)@")
        set(_s ${CMAKE_MATCH_1})
      endif()
    endforeach()
    list(APPEND _items "sass:${_s}")
    if(_s GREATER _highest)
      set(_highest ${_s})
    endif()
  endforeach()
  if(NOT _use_tegra)
    list(APPEND _items "ptx:${_highest}")
  endif()
  set(${out_items} "${_items}" PARENT_SCOPE)
endfunction()

# One word without flags.
function(_cag_tok_word word out_items out_err)
  set(${out_items} "" PARENT_SCOPE)
  set(${out_err} "" PARENT_SCOPE)
  string(TOLOWER "${word}" _lc)
  if(word STREQUAL "")
    set(${out_err} "empty architecture token" PARENT_SCOPE)
  elseif(_lc MATCHES "^(all|all-major|native)$")
    set(${out_err} "${word}: depends on the nvcc release (all, all-major) or on the GPUs present (native); list explicit targets, see 'archguard arch list'" PARENT_SCOPE)
  elseif(_lc MATCHES "^(sm|compute|lto)_")
    _cag_tok_nvcc_name("${word}" _n)
    set(${out_err} "${_n_ERR}" PARENT_SCOPE)
    if(NOT _n_ERR)
      set(${out_items} "${_n_KIND}:${_n_SM}${_n_SFX}" PARENT_SCOPE)
    endif()
  elseif(word MATCHES "^[0-9]")
    if(word MATCHES "\\.")
      _cag_tok_capability("${word}" _i _e)
    else()
      _cag_tok_cmake("${word}" _i _e)
    endif()
    set(${out_items} "${_i}" PARENT_SCOPE)
    set(${out_err} "${_e}" PARENT_SCOPE)
  elseif(word MATCHES "^[A-Za-z][A-Za-z+]*$")
    _cag_tok_family("${word}" _i _e)
    set(${out_items} "${_i}" PARENT_SCOPE)
    set(${out_err} "${_e}" PARENT_SCOPE)
  else()
    _cag_tok_reject(word ${out_err})
  endif()
endfunction()

# <text> holding nvcc flags, read by the archguard tool's grammar (src/arch/tokens.cpp) and
# given back as nvcc names, sm_80;compute_80;lto_80 (<out_text>), or <out_err>. Memoised per text.
function(_cag_tokens_from_tool text out_text out_err)
  set(${out_text} "" PARENT_SCOPE)
  set(${out_err} "" PARENT_SCOPE)
  string(MD5 _key "${text}")
  get_property(_memo GLOBAL PROPERTY _CAG_TOKENS_TOOL_${_key} SET)
  if(_memo)
    get_property(_t GLOBAL PROPERTY _CAG_TOKENS_TOOL_${_key})
    get_property(_e GLOBAL PROPERTY _CAG_TOKENS_TOOL_ERR_${_key})
    set(${out_text} "${_t}" PARENT_SCOPE)
    set(${out_err} "${_e}" PARENT_SCOPE)
    return()
  endif()
  _cag_arch_tool(_cmd _why)
  set(_t "")
  set(_e "")
  if(NOT _cmd)
    string(CONCAT _e "nvcc flag syntax (-gencode, -arch, -code) is read by the archguard tool, which is "
           "not available here (${_why}); write the list as CMake does (e.g. 80-real;90) or name the tool with "
           "CudaArchGuard_EXECUTABLE")
  else()
    execute_process(COMMAND "${_cmd}" arch normalize --format codes "${text}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _t ERROR_VARIABLE _e
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
    if(_rc EQUAL 0 AND NOT _t STREQUAL "")
      set(_e "")
    elseif(_rc EQUAL 2 AND _e MATCHES "^archguard(-verify)?: ([^\n]*)")
      set(_t "")
      set(_e "${CMAKE_MATCH_2}")  # the grammar's own message
    else()
      set(_e "${text}: the archguard tool failed to read it (${_cmd} arch normalize: exit ${_rc}): ${_t}${_e}")
      set(_t "")
    endif()
  endif()
  set_property(GLOBAL PROPERTY _CAG_TOKENS_TOOL_${_key} "${_t}")
  set_property(GLOBAL PROPERTY _CAG_TOKENS_TOOL_ERR_${_key} "${_e}")
  set(${out_text} "${_t}" PARENT_SCOPE)
  set(${out_err} "${_e}" PARENT_SCOPE)
endfunction()

# Sorts and de-duplicates items: by SM, then plain < a < f, then sass < ptx < lto.
function(_cag_items_sort items out_var)
  set(_suffixes - -a -f)
  set(_kinds sass ptx lto)
  set(_keyed "")
  foreach(_it IN LISTS items)
    if(NOT _it MATCHES "^(sass|ptx|lto):([0-9]+)([af]?)$")
      message(FATAL_ERROR "CudaArchGuard: internal error: bad item '${_it}'")
    endif()
    set(_k "${CMAKE_MATCH_1}")
    set(_sfx "${CMAKE_MATCH_3}")
    # Zero-padded key so that a string sort is a numeric sort.
    string(LENGTH "${CMAKE_MATCH_2}" _len)
    set(_pad "${CMAKE_MATCH_2}")
    while(_len LESS 5)
      set(_pad "0${_pad}")
      math(EXPR _len "${_len} + 1")
    endwhile()
    # Ranks by position (the regex admits nothing else): plain < a < f, sass < ptx < lto.
    list(FIND _suffixes "-${_sfx}" _sk)
    list(FIND _kinds "${_k}" _kk)
    list(APPEND _keyed "${_pad}${_sk}${_kk}#${_it}")
  endforeach()
  list(SORT _keyed)
  list(REMOVE_DUPLICATES _keyed)
  list(TRANSFORM _keyed REPLACE "^[^#]*#" "")
  set(${out_var} "${_keyed}" PARENT_SCOPE)
endfunction()

# Parses a whole list (see the dialects above). On error <out_error> says which token and why,
# and the items are empty.
function(_cag_tokens_parse text out_items out_error)
  set(${out_items} "" PARENT_SCOPE)
  string(STRIP "${text}" text)
  if(text STREQUAL "")
    set(${out_error} "empty architecture token" PARENT_SCOPE)
    return()
  endif()
  set(_read_from "")
  # nvcc flag syntax (-gencode arch=compute_80,code=[sm_80,compute_80], -arch=sm_90 -code ...,
  # arch=compute_80,code=sm_80), quotes and brackets go to the C++ grammar. (Written here, not in
  # a variable: the module is included once, functions run in every directory.)
  if(text MATCHES "(^|[ \t\r\n;])(-[^0-9]|[aA][rR][cC][hH]=)|[][\"']")
    _cag_tokens_from_tool("${text}" _normal _err)
    if(_err)
      set(${out_error} "${_err}" PARENT_SCOPE)
      return()
    endif()
    set(_read_from " (read from '${text}')")
    set(text "${_normal}")
  endif()
  string(REGEX REPLACE "[ \t\r\n;]+" ";" _words "${text}")
  set(_out "")
  foreach(_word IN LISTS _words)
    string(REPLACE "," ";" _pieces "${_word}")  # TensorFlow writes "sm_80,compute_90"
    foreach(_p IN LISTS _pieces)
      if(_p STREQUAL "")
        continue()
      endif()
      _cag_tok_word("${_p}" _wi _err)
      if(_err)
        set(${out_error} "${_err}${_read_from}" PARENT_SCOPE)
        return()
      endif()
      list(APPEND _out ${_wi})
    endforeach()
  endforeach()
  if(NOT _out)
    set(${out_error} "no architecture targets in '${text}'" PARENT_SCOPE)
    return()
  endif()
  _cag_items_sort("${_out}" _out)
  set(${out_items} "${_out}" PARENT_SCOPE)
  set(${out_error} "" PARENT_SCOPE)
endfunction()

# The highest SM with SASS among items ("" when none): PTX "for the highest" is its plain
# compute_XY, since an 'a'/'f' PTX does not run forward.
function(_cag_items_highest_sass items out_var)
  set(_hi "")
  foreach(_it IN LISTS items)
    if(_it MATCHES "^sass:([0-9]+)")
      if(_hi STREQUAL "" OR CMAKE_MATCH_1 GREATER _hi)
        set(_hi ${CMAKE_MATCH_1})
      endif()
    endif()
  endforeach()
  set(${out_var} "${_hi}" PARENT_SCOPE)
endfunction()

# Formats items. <format>: cmake (80-real;90; LTO-IR as lto_80, which CMake cannot spell),
# gencode (-gencode=arch=compute_80,code=sm_80;...), torch (8.0;9.0+PTX; a PTX-only arch
# becomes X+PTX, PyTorch having no PTX-only spelling), tf (sm_80,sm_90,compute_90).
function(_cag_tokens_format items format out_var)
  # What torch.utils.cpp_extension._get_cuda_arch_flags accepts in TORCH_CUDA_ARCH_LIST (PyTorch
  # 2.8/2.9; each optionally with +PTX; every entry builds SASS): no 'f', no 10.3, 11.0 or 12.1.
  set(_CAG_TORCH_ACCEPTS 3.5 3.7 5.0 5.2 5.3 6.0 6.1 6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.9 9.0 9.0a
                         10.0 10.0a 10.1 10.1a 12.0 12.0a)
  _cag_items_sort("${items}" items)
  set(_torch_note "")
  set(_archs "")
  foreach(_it IN LISTS items)
    string(REGEX REPLACE "^[a-z]+:" "" _a "${_it}")
    if(NOT _a IN_LIST _archs)
      list(APPEND _archs ${_a})
    endif()
  endforeach()
  set(_out "")
  foreach(_a IN LISTS _archs)
    set(_s OFF)
    set(_p OFF)
    set(_l OFF)
    if("sass:${_a}" IN_LIST items)
      set(_s ON)
    endif()
    if("ptx:${_a}" IN_LIST items)
      set(_p ON)
    endif()
    if("lto:${_a}" IN_LIST items)
      set(_l ON)
    endif()
    set(_codes "")  # nvcc's names of its SASS and PTX (TensorFlow's entries, gencode's codes)
    if(_s)
      list(APPEND _codes "sm_${_a}")
    endif()
    if(_p)
      list(APPEND _codes "compute_${_a}")
    endif()
    string(REGEX MATCH "^([0-9]+)([af]?)$" _m "${_a}")
    set(_sm ${CMAKE_MATCH_1})
    set(_sfx "${CMAKE_MATCH_2}")
    if(format STREQUAL "cmake")
      if(_s AND _p)
        list(APPEND _out "${_a}")
      elseif(_s)
        list(APPEND _out "${_a}-real")
      elseif(_p)
        list(APPEND _out "${_a}-virtual")
      endif()
      if(_l)
        list(APPEND _out "lto_${_a}")
      endif()
    elseif(format STREQUAL "gencode")
      if(_l)
        list(APPEND _codes "lto_${_a}")
      endif()
      list(LENGTH _codes _nc)
      string(REPLACE ";" "," _codes "${_codes}")
      if(_nc GREATER 1)
        set(_codes "[${_codes}]")
      endif()
      list(APPEND _out "-gencode=arch=compute_${_a},code=${_codes}")
    elseif(format STREQUAL "torch")
      # Only what PyTorch's cpp_extension accepts (_CAG_TORCH_ACCEPTS): 'f' is written as the
      # plain architecture, the rest is left out; both are said in <out_var>_NOTE.
      _cag_sm_to_cc(${_sm} _cc)
      set(_t "${_cc}${_sfx}")
      if(_sfx STREQUAL "f" AND "${_cc}" IN_LIST _CAG_TORCH_ACCEPTS)
        list(APPEND _torch_note "${_a} as ${_cc} (no family-specific spelling, sm_${_sm} runs on ${_cc} GPUs only)")
        set(_t "${_cc}")
      endif()
      if(NOT _t IN_LIST _CAG_TORCH_ACCEPTS)
        list(APPEND _torch_note "${_a} left out (cpp_extension rejects ${_t})")
      elseif(_p)
        list(APPEND _out "${_t}+PTX")
      elseif(_s)
        list(APPEND _out "${_t}")
      endif()
    elseif(format STREQUAL "tf")
      list(APPEND _out ${_codes})
    else()
      message(FATAL_ERROR "CudaArchGuard: unknown format '${format}'; use cmake, gencode, torch or tf")
    endif()
  endforeach()
  if(format STREQUAL "tf")
    string(REPLACE ";" "," _out "${_out}")
  endif()
  set(${out_var} "${_out}" PARENT_SCOPE)
  if(format STREQUAL "torch")
    foreach(_e IN LISTS _out)  # 120f written as 12.0 beside PTX 120's 12.0+PTX: one entry
      if("${_e}+PTX" IN_LIST _out)
        list(REMOVE_ITEM _out "${_e}")
      endif()
    endforeach()
    set(${out_var} "${_out}" PARENT_SCOPE)
    string(REPLACE ";" "; " _torch_note "${_torch_note}")
    set(${out_var}_NOTE "${_torch_note}" PARENT_SCOPE)
  endif()
endfunction()
