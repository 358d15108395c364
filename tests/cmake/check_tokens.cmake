# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
check_tokens
------------

Runs the CMake-side token normalizer (``CudaArchGuardTokens``) over the corpus shared with the
C++ parser (``tests/data/tokens.txt``: ``<dialect>|<input>|<expected>[|<message fragment>]``,
``expected`` being the canonical CMake form joined by ``,`` or ``ERROR``) and fails on every
disagreement, including an error message that lacks the corpus's fragment. The C++
``archguard arch normalize`` is tested against the same lines, so the two parsers cannot drift.

.. code-block:: console

  cmake -DCORPUS=tests/data/tokens.txt -DMODULE_DIR=cmake/Modules [-DARCHGUARD=<tool>] -P check_tokens.cmake
#]=======================================================================]
cmake_policy(VERSION 3.18)
include("${MODULE_DIR}/CudaArchGuardTokens.cmake")
# nvcc flag syntax goes to the C++ grammar: ARCHGUARD names the tool that reads it (archguard or
# archguard-verify), as in the policy's script mode.
if(ARCHGUARD)
  set(CudaArchGuard_EXECUTABLE "${ARCHGUARD}")
endif()
include("${CMAKE_CURRENT_LIST_DIR}/corpus_lines.cmake")
_cag_corpus_lines("${CORPUS}" _lines)  # the corpus has unbalanced '[' and ']'
set(_n 0)
set(_bad "")
foreach(_l IN LISTS _lines)
  _cag_corpus_unescape(_l)
  if(_l MATCHES "^[ \t]*(#|$)")
    continue()
  endif()
  if(NOT _l MATCHES "^([a-z]+)\\|([^|]*)\\|([^|]*)(\\|(.*))?$")
    message(FATAL_ERROR "check_tokens: ${CORPUS}: '${_l}' is not <dialect>|<input>|<expected>[|<message>]")
  endif()
  set(_input "${CMAKE_MATCH_2}")
  set(_want "${CMAKE_MATCH_3}")
  set(_frag "${CMAKE_MATCH_5}")
  _cag_tokens_parse("${_input}" _items _err)
  if(_err)
    set(_got "ERROR")
  else()
    _cag_tokens_format("${_items}" cmake _got)
    string(REPLACE ";" "," _got "${_got}")
  endif()
  math(EXPR _n "${_n} + 1")
  if(_want STREQUAL "INFERRED")  # the C++ side infers it; without an nvcc listing it, CMake rejects it
    set(_want "ERROR")
  endif()
  if(NOT _got STREQUAL _want)
    string(APPEND _bad "\n  '${_input}' gives '${_got}', the corpus says '${_want}' ${_err}")
  elseif(_err AND NOT "${_frag}" STREQUAL "")
    string(FIND "${_err}" "${_frag}" _at)
    if(_at LESS 0)
      string(APPEND _bad "\n  '${_input}': the message '${_err}' lacks '${_frag}'")
    endif()
  endif()
endforeach()
if(_bad)
  message(FATAL_ERROR "check_tokens: the CMake normalizer disagrees with ${CORPUS}:${_bad}")
endif()
message(STATUS "check_tokens: ${_n} corpus lines agree")
