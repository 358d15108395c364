# SPDX-License-Identifier: Apache-2.0
# The lines of a test corpus shared with the C++ tests (tests/data/tokens.txt,
# tests/data/fleet/EXPECTED.txt), read by hand: as a CMake list, '[' ... ']' would be one element,
# ';' would split a line and '\' would escape. Used by check_tokens.cmake and check_fleet.cmake.

# Sets <out_var> to the lines of <file>, '\', '[', ']' and ';' in them written @BS@, @LB@, @RB@
# and @SC@; _cag_corpus_unescape(<var>) gives one back its characters.
function(_cag_corpus_lines file out_var)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "${CMAKE_CURRENT_LIST_FILE}: corpus '${file}' does not exist")
  endif()
  file(READ "${file}" _text)
  string(REPLACE "\\" "@BS@" _text "${_text}")
  string(REPLACE "[" "@LB@" _text "${_text}")
  string(REPLACE "]" "@RB@" _text "${_text}")
  string(REPLACE ";" "@SC@" _text "${_text}")
  string(REPLACE "\n" ";" _lines "${_text}")
  set(${out_var} "${_lines}" PARENT_SCOPE)
endfunction()

macro(_cag_corpus_unescape var)
  string(REPLACE "@LB@" "[" ${var} "${${var}}")
  string(REPLACE "@RB@" "]" ${var} "${${var}}")
  string(REPLACE "@SC@" ";" ${var} "${${var}}")
  string(REPLACE "@BS@" "\\" ${var} "${${var}}")
endmacro()
