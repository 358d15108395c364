# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
CudaArchGuardTable
------------------

Reads the architecture table ``CudaArchGuard/architectures.txt`` (the single source of truth
for architectures, suffix variants, families and CUDA releases) for the CMake modules, and
generates the C++ header the ``archguard`` library compiles in.

.. code-block:: cmake

  cuda_arch_guard_load_table()

The table is read once per CMake run into GLOBAL properties (one per result variable below), so
every directory and every function sees the same table wherever the module was included;
``cuda_arch_guard_load_table()`` copies it into the caller's scope as these result variables:

``CudaArchGuard_TABLE_SMS``
  SM numbers in table order (``35;37;...;121``).
``CudaArchGuard_ARCH_<sm>_{CC,CODENAME,PRODUCTS,TEGRA,A_SINCE,F_SINCE,FIRST,REMOVED,FAMILY}``
  One variable per column; ``-`` means none.
``CudaArchGuard_TABLE_RENAMES``
  ``old>new@cuda`` items, e.g. ``101>110@13.0``.
``CudaArchGuard_TABLE_RELEASES``
  CUDA releases in table order (``11.0;...;13.1``).
``CudaArchGuard_RELEASE_<major>_<minor>_{PTX_ISA,MIN_DRIVER}``
  PTX ISA version and minimum Linux driver of a release.

Script mode (used by the build and the tests), in ``CudaArchGuard/table-script.cmake``; ``-P``
on this file runs the same:

.. code-block:: console

  cmake -DEMIT=cxx -DOUTPUT=<header> -P CudaArchGuard/table-script.cmake
  cmake -DEMIT=rows -P CudaArchGuard/table-script.cmake     # canonical rows on stdout

``rows`` prints one ``arch|...``, ``rename|...`` or ``release|...`` line per entry in a
canonical form; ``archguard arch list --rows`` prints the same from the compiled-in table,
and a test compares the two.
#]=======================================================================]

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE AND NOT _CAG_SCRIPT)
  include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuard/table-script.cmake")  # the script mode lives there
  return()
endif()
include_guard(GLOBAL)
include("${CMAKE_CURRENT_LIST_DIR}/CudaArchGuard/write-if-changed.cmake")

function(cuda_arch_guard_load_table)
  if(ARGN)
    message(FATAL_ERROR "cuda_arch_guard_load_table: takes no arguments, got '${ARGN}'")
  endif()
  get_property(_names GLOBAL PROPERTY _CAG_TABLE_VARIABLES)
  if(NOT _names)
    _cag_table_read("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CudaArchGuard/architectures.txt")
    get_property(_names GLOBAL PROPERTY _CAG_TABLE_VARIABLES)
  endif()
  foreach(_v IN LISTS _names)
    get_property(_val GLOBAL PROPERTY ${_v})
    set(${_v} "${_val}" PARENT_SCOPE)
  endforeach()
endfunction()

# The table in the calling function's scope, unless an enclosing scope has it already: every
# function that reads CudaArchGuard_TABLE_* / CudaArchGuard_ARCH_* starts with this line.
macro(_cag_table_import)
  if(NOT DEFINED CudaArchGuard_TABLE_SMS)
    cuda_arch_guard_load_table()
  endif()
endmacro()

# Parses <file> into GLOBAL properties named as the result variables, and lists their names in
# the GLOBAL property _CAG_TABLE_VARIABLES.
function(_cag_table_read file)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "cuda_arch_guard_load_table: the architecture table '${file}' is missing; reinstall CudaArchGuard")
  endif()
  file(STRINGS "${file}" _lines REGEX "^(arch|rename|release|gpu)\\|")
  set(_sms "")
  set(_releases "")
  set(_renames "")
  set(_gpus "")
  set(_fields_arch CC CODENAME PRODUCTS TEGRA A_SINCE F_SINCE FIRST REMOVED FAMILY)
  foreach(_line IN LISTS _lines)
    # Products hold commas, never ';' or '|': turn the row into a CMake list.
    string(REPLACE "|" ";" _row "${_line}")
    list(GET _row 0 _kind)
    list(LENGTH _row _n)
    if(_kind STREQUAL "arch")
      if(NOT _n EQUAL 11)
        message(FATAL_ERROR "cuda_arch_guard_load_table: ${file}: row '${_line}' has ${_n} fields, expected 11")
      endif()
      list(GET _row 1 _sm)
      list(APPEND _sms ${_sm})
      set(_i 2)
      foreach(_f IN LISTS _fields_arch)
        list(GET _row ${_i} _v)
        _cag_table_set(CudaArchGuard_ARCH_${_sm}_${_f} "${_v}")
        math(EXPR _i "${_i} + 1")
      endforeach()
    elseif(_kind STREQUAL "rename")
      if(NOT _n EQUAL 4)
        message(FATAL_ERROR "cuda_arch_guard_load_table: ${file}: row '${_line}' has ${_n} fields, expected 4")
      endif()
      list(GET _row 1 _old)
      list(GET _row 2 _new)
      list(GET _row 3 _at)
      list(APPEND _renames "${_old}>${_new}@${_at}")
    elseif(_kind STREQUAL "release")
      if(NOT _n EQUAL 4)
        message(FATAL_ERROR "cuda_arch_guard_load_table: ${file}: row '${_line}' has ${_n} fields, expected 4")
      endif()
      list(GET _row 1 _rel)
      list(GET _row 2 _isa)
      list(GET _row 3 _drv)
      list(APPEND _releases ${_rel})
      string(REPLACE "." "_" _relid "${_rel}")
      _cag_table_set(CudaArchGuard_RELEASE_${_relid}_PTX_ISA "${_isa}")
      _cag_table_set(CudaArchGuard_RELEASE_${_relid}_MIN_DRIVER "${_drv}")
    elseif(_kind STREQUAL "gpu")
      if(NOT _n EQUAL 3)
        message(FATAL_ERROR "cuda_arch_guard_load_table: ${file}: row '${_line}' has ${_n} fields, expected 3")
      endif()
      list(GET _row 1 _gsm)
      list(GET _row 2 _gnames)
      list(APPEND _gpus "${_gsm}>${_gnames}")
    else()
      message(FATAL_ERROR "cuda_arch_guard_load_table: ${file}: unknown row kind '${_kind}'")
    endif()
  endforeach()
  _cag_table_set(CudaArchGuard_TABLE_RELEASES "${_releases}")
  _cag_table_set(CudaArchGuard_TABLE_RENAMES "${_renames}")
  _cag_table_set(CudaArchGuard_TABLE_GPU_NAMES "${_gpus}")
  _cag_table_set(CudaArchGuard_TABLE_SMS "${_sms}")  # last: its presence marks a complete table
endfunction()

function(_cag_table_set name value)
  set_property(GLOBAL PROPERTY ${name} "${value}")
  set_property(GLOBAL APPEND PROPERTY _CAG_TABLE_VARIABLES ${name})
endfunction()

# Splits "12.9" into major and minor; "-" gives 0 0.
function(_cag_table_version_parts version out_major out_minor)
  if(version STREQUAL "-")
    set(${out_major} 0 PARENT_SCOPE)
    set(${out_minor} 0 PARENT_SCOPE)
  elseif(version MATCHES "^([0-9]+)\\.([0-9]+)$")
    set(${out_major} ${CMAKE_MATCH_1} PARENT_SCOPE)
    set(${out_minor} ${CMAKE_MATCH_2} PARENT_SCOPE)
  else()
    message(FATAL_ERROR "CudaArchGuard: architectures.txt: bad version '${version}', expected MAJOR.MINOR or '-'")
  endif()
endfunction()

function(_cag_table_emit_rows out_var)
  _cag_table_import()
  set(_out "")
  foreach(_sm IN LISTS CudaArchGuard_TABLE_SMS)
    set(_l "arch|${_sm}")
    foreach(_f CC CODENAME PRODUCTS TEGRA A_SINCE F_SINCE FIRST REMOVED FAMILY)
      string(APPEND _l "|${CudaArchGuard_ARCH_${_sm}_${_f}}")
    endforeach()
    string(APPEND _out "${_l}\n")
  endforeach()
  foreach(_r IN LISTS CudaArchGuard_TABLE_RENAMES)
    string(REGEX REPLACE "^([0-9]+)>([0-9]+)@(.*)$" "rename|\\1|\\2|\\3" _l "${_r}")
    string(APPEND _out "${_l}\n")
  endforeach()
  foreach(_rel IN LISTS CudaArchGuard_TABLE_RELEASES)
    string(REPLACE "." "_" _relid "${_rel}")
    string(APPEND _out "release|${_rel}|${CudaArchGuard_RELEASE_${_relid}_PTX_ISA}|${CudaArchGuard_RELEASE_${_relid}_MIN_DRIVER}\n")
  endforeach()
  set(${out_var} "${_out}" PARENT_SCOPE)
endfunction()

function(_cag_table_emit_cxx output)
  _cag_table_import()
  set(_h "// Generated by cmake/Modules/CudaArchGuardTable.cmake from CudaArchGuard/architectures.txt.\n")
  string(APPEND _h "// Do not edit: edit the table and rebuild.\n#pragma once\n\n#include <archguard/table_types.hpp>\n\n")
  string(APPEND _h "namespace archguard::generated {\n\n")
  string(APPEND _h "inline constexpr ArchRow kArchRows[] = {\n")
  foreach(_sm IN LISTS CudaArchGuard_TABLE_SMS)
    set(_p "CudaArchGuard_ARCH_${_sm}")
    _cag_table_version_parts("${${_p}_CC}" _ccmaj _ccmin)
    _cag_table_version_parts("${${_p}_A_SINCE}" _amaj _amin)
    _cag_table_version_parts("${${_p}_F_SINCE}" _fmaj _fmin)
    _cag_table_version_parts("${${_p}_FIRST}" _firstmaj _firstmin)
    _cag_table_version_parts("${${_p}_REMOVED}" _remmaj _remmin)
    set(_fam "${${_p}_FAMILY}")
    if(_fam STREQUAL "-")
      set(_fam 0)
    endif()
    set(_prod "${${_p}_PRODUCTS}")
    if(_prod STREQUAL "-")
      set(_prod "")
    endif()
    if(${_p}_TEGRA)
      set(_tegra true)
    else()
      set(_tegra false)
    endif()
    string(APPEND _h "    {${_sm}, {${_ccmaj}, ${_ccmin}}, \"${${_p}_CODENAME}\", \"${_prod}\", ${_tegra}, "
                     "{${_amaj}, ${_amin}}, {${_fmaj}, ${_fmin}}, {${_firstmaj}, ${_firstmin}}, {${_remmaj}, ${_remmin}}, ${_fam}},\n")
  endforeach()
  string(APPEND _h "};\n\ninline constexpr RenameRow kRenameRows[] = {\n")
  foreach(_r IN LISTS CudaArchGuard_TABLE_RENAMES)
    string(REGEX MATCH "^([0-9]+)>([0-9]+)@(.*)$" _m "${_r}")
    set(_old ${CMAKE_MATCH_1})
    set(_new ${CMAKE_MATCH_2})
    _cag_table_version_parts("${CMAKE_MATCH_3}" _rmaj _rmin)
    string(APPEND _h "    {${_old}, ${_new}, {${_rmaj}, ${_rmin}}},\n")
  endforeach()
  string(APPEND _h "};\n\ninline constexpr ReleaseRow kReleaseRows[] = {\n")
  foreach(_rel IN LISTS CudaArchGuard_TABLE_RELEASES)
    string(REPLACE "." "_" _relid "${_rel}")
    _cag_table_version_parts("${_rel}" _cmaj _cmin)
    _cag_table_version_parts("${CudaArchGuard_RELEASE_${_relid}_PTX_ISA}" _imaj _imin)
    set(_drv "${CudaArchGuard_RELEASE_${_relid}_MIN_DRIVER}")
    if(_drv STREQUAL "-")
      set(_drv "")
    endif()
    string(APPEND _h "    {{${_cmaj}, ${_cmin}}, {${_imaj}, ${_imin}}, \"${_drv}\"},\n")
  endforeach()
  string(APPEND _h "};\n\ninline constexpr GpuNameRow kGpuNameRows[] = {\n")
  foreach(_g IN LISTS CudaArchGuard_TABLE_GPU_NAMES)
    string(REGEX MATCH "^([0-9]+)>(.*)$" _m "${_g}")
    string(APPEND _h "    {${CMAKE_MATCH_1}, \"${CMAKE_MATCH_2}\"},\n")
  endforeach()
  string(APPEND _h "    {0, \"\"},  // keeps the array non-empty\n")
  string(APPEND _h "};\n\n}  // namespace archguard::generated\n")
  # Write only on change so that a re-run does not rebuild the library.
  _cag_write_if_changed("${output}" "${_h}")
endfunction()

# "120" -> "12.0" (table CC when known, else SM / 10).
function(_cag_sm_to_cc sm out_var)
  _cag_table_import()
  if(sm IN_LIST CudaArchGuard_TABLE_SMS)
    set(${out_var} "${CudaArchGuard_ARCH_${sm}_CC}" PARENT_SCOPE)
  else()
    math(EXPR _maj "${sm} / 10")
    math(EXPR _min "${sm} % 10")
    set(${out_var} "${_maj}.${_min}" PARENT_SCOPE)
  endif()
endfunction()
