# SPDX-License-Identifier: Apache-2.0
# Included by the script-mode (cmake -P) runners of the tests and samples/quickstart/run.cmake.
#   cag_script_require(<script> <variable>...): stops, naming the first variable that was not given
#   on the command line: "<script>: -D<variable>= is required"
function(cag_script_require script)
  foreach(_v IN LISTS ARGN)
    if(NOT DEFINED ${_v})
      message(FATAL_ERROR "${script}: -D${_v}= is required")
    endif()
  endforeach()
endfunction()
