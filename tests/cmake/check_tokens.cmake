# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
check_tokens
------------

Runs the CMake-side token normalizer (``CudaArchGuardTokens``) over a corpus of
``<input>|<canonical CMake form or ERROR>`` lines (``#`` starts a comment) and fails on the first
disagreement. The C++ ``archguard arch normalize`` is tested against the same corpus, so the two
parsers cannot drift apart.

.. code-block:: console

  cmake -DCORPUS=tests/data/tokens.txt -DMODULE_DIR=cmake/Modules -P check_tokens.cmake
#]=======================================================================]
cmake_policy(VERSION 3.18)
include("${MODULE_DIR}/CudaArchGuardTokens.cmake")
if(NOT EXISTS "${CORPUS}")
  message(FATAL_ERROR "check_tokens: corpus '${CORPUS}' does not exist")
endif()
file(READ "${CORPUS}" _text)
string(REPLACE ";" "@SEMI@" _text "${_text}")
string(REPLACE "\n" ";" _lines "${_text}")
set(_n 0)
set(_bad "")
set(_lineno 0)
foreach(_l IN LISTS _lines)
  math(EXPR _lineno "${_lineno} + 1")
  string(REPLACE "@SEMI@" ";" _l "${_l}")
  if(_l MATCHES "^[ \t]*(#|$)")
    continue()
  endif()
  string(FIND "${_l}" "|" _bar REVERSE)
  if(_bar LESS 0)
    message(FATAL_ERROR "check_tokens: ${CORPUS}:${_lineno}: '${_l}' has no '|'")
  endif()
  string(SUBSTRING "${_l}" 0 ${_bar} _input)
  math(EXPR _from "${_bar} + 1")
  string(SUBSTRING "${_l}" ${_from} -1 _want)
  _cag_tokens_parse("${_input}" _items _err)
  if(_err)
    set(_got "ERROR")
  else()
    _cag_tokens_format("${_items}" cmake _got)
  endif()
  math(EXPR _n "${_n} + 1")
  if(NOT _got STREQUAL _want)
    list(APPEND _bad "${CORPUS}:${_lineno}: '${_input}' gives '${_got}', the corpus says '${_want}' (${_err})")
  endif()
endforeach()
if(_bad)
  string(REPLACE ";" "\n" _bad "${_bad}")
  message(FATAL_ERROR "check_tokens: the CMake normalizer disagrees with the corpus:\n${_bad}")
endif()
message(STATUS "check_tokens: ${_n} tokens agree")
