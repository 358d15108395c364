# SPDX-License-Identifier: Apache-2.0
# _cag_write_if_changed(<path> <content>): writes <content> to <path> unless the file already
# holds exactly that, so that a re-run rebuilds nothing that depends on it. Shared by the
# modules and by the build's own scripts (cmake -P) that generate headers and sources.
include_guard(GLOBAL)

function(_cag_write_if_changed path content)
  if(EXISTS "${path}")
    file(READ "${path}" _old)
    if(_old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${content}")
endfunction()
