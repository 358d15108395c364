# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
Install
-------

Install rules (included by the top-level CMakeLists.txt): the CMake modules with the
architecture table, the ``archguard`` tool, the libraries with their headers and an export set
(``CudaArchGuard::jit``, ``CudaArchGuard::selfcheck``, ``CudaArchGuard::lib`` for every layer,
and each layer as ``CudaArchGuard::<layer>``), and ``CudaArchGuardConfig.cmake`` +
``CudaArchGuardConfigVersion.cmake`` (SameMinorVersion while the major version is 0,
SameMajorVersion from 1.0), so that ``find_package(CudaArchGuard)``
works from the install prefix.

.. code-block:: console

  cmake --install build/default --prefix /opt/cudaarchguard --strip
  cmake -B app-build -DCMAKE_PREFIX_PATH=/opt/cudaarchguard
#]=======================================================================]
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(CAG_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/CudaArchGuard"
    CACHE STRING "Where CudaArchGuardConfig.cmake is installed (relative to the prefix)")
set(CAG_INSTALL_MODULEDIR "${CAG_INSTALL_CMAKEDIR}/Modules")
set(CAG_INSTALL_TOOL "${CMAKE_INSTALL_BINDIR}/archguard")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/cmake/Modules/"
        DESTINATION "${CAG_INSTALL_MODULEDIR}"
        COMPONENT cmake
        FILES_MATCHING PATTERN "*.cmake" PATTERN "*.txt")
if(TARGET archguard)
  install(TARGETS archguard RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT tool)
endif()
if(TARGET archguard_verify_tool)
  # The dependency-free verifier, for a verify step run outside CMake (archguard-verify FILE...).
  install(TARGETS archguard_verify_tool RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT tool)
endif()
if(TARGET archguard_docs)
  # Generated from the tool's own CLI definitions (tools/archguard/CMakeLists.txt).
  install(FILES "${PROJECT_BINARY_DIR}/share/man/man1/archguard.1" DESTINATION "${CMAKE_INSTALL_MANDIR}/man1" COMPONENT tool)
  install(FILES "${PROJECT_BINARY_DIR}/share/bash-completion/completions/archguard"
          DESTINATION "${CMAKE_INSTALL_DATADIR}/bash-completion/completions" COMPONENT tool)
  install(FILES "${PROJECT_BINARY_DIR}/share/zsh/site-functions/_archguard"
          DESTINATION "${CMAKE_INSTALL_DATADIR}/zsh/site-functions" COMPONENT tool)
endif()
if(TARGET archguard_inject)
  # archguard run looks for it in <bindir>/../<libdir>
  install(TARGETS archguard_inject LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT tool)
endif()

# The libraries: static, one per layer, plus the INTERFACE targets that name the API groups.
set(_cag_export_targets)
# archguard_common, the internal base layer, is installed as an archive only (its headers stay in
# src/common): every layer links it, so the export set must hold it.
foreach(_cag_layer IN ITEMS common arch toolkit fatbin coverage policy device jit doctor run fleet)
  if(TARGET archguard_${_cag_layer})
    list(APPEND _cag_export_targets archguard_${_cag_layer})
  endif()
endforeach()
foreach(_cag_t IN ITEMS archguard_selfcheck archguard_lib)
  if(TARGET ${_cag_t})
    list(APPEND _cag_export_targets ${_cag_t})
  endif()
endforeach()
set(CAG_INSTALL_EXPORT OFF)
if(_cag_export_targets)
  set(CAG_INSTALL_EXPORT ON)
  install(TARGETS ${_cag_export_targets} EXPORT CudaArchGuardTargets
          ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT devel
          INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/archguard"
          DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT devel
          FILES_MATCHING PATTERN "*.hpp")
  install(EXPORT CudaArchGuardTargets NAMESPACE CudaArchGuard::
          DESTINATION "${CAG_INSTALL_CMAKEDIR}" COMPONENT devel)
endif()

# Debug information stays in the build tree: the installed archives, tool and injection library
# are stripped of it (a RelWithDebInfo install was 189 MB, nearly all DWARF), unless asked to keep it.
option(ARCHGUARD_INSTALL_DEBUG_INFO "Keep debug information in the installed tool and libraries" OFF)
if(NOT ARCHGUARD_INSTALL_DEBUG_INFO AND CMAKE_STRIP)
  foreach(_cag_t IN LISTS _cag_export_targets ITEMS archguard archguard_verify_tool archguard_inject)
    if(NOT TARGET ${_cag_t})
      continue()
    endif()
    get_target_property(_cag_type ${_cag_t} TYPE)
    if(_cag_type STREQUAL "STATIC_LIBRARY")
      set(_cag_f "${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:${_cag_t}>")
      set(_cag_c devel)
    elseif(_cag_type STREQUAL "MODULE_LIBRARY")
      set(_cag_f "${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:${_cag_t}>")
      set(_cag_c tool)
    elseif(_cag_type STREQUAL "EXECUTABLE")
      set(_cag_f "${CMAKE_INSTALL_BINDIR}/$<TARGET_FILE_NAME:${_cag_t}>")
      set(_cag_c tool)
    else()
      continue()
    endif()
    install(CODE "set(_f \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${_cag_f}\")
if(EXISTS \"\${_f}\")
  execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug \"\${_f}\" RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR \"cannot strip the debug information of \${_f}\")
  endif()
endif()" COMPONENT ${_cag_c})
  endforeach()
endif()

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/CudaArchGuardConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cmake-install/CudaArchGuardConfig.cmake"
  INSTALL_DESTINATION "${CAG_INSTALL_CMAKEDIR}"
  PATH_VARS CAG_INSTALL_MODULEDIR CAG_INSTALL_TOOL)
# Generated under cmake-install/, not at the top of the build tree: find_package() treats the
# parent of every PATH entry ending in bin/ as a prefix, so with <build>/bin on PATH a config at
# <build>/ would be found, and it only works from an install.
# Before 1.0 a minor release may break its users: find_package(CudaArchGuard 0.1) must not accept 0.2.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_cag_compat SameMinorVersion)
else()
  set(_cag_compat SameMajorVersion)
endif()
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/cmake-install/CudaArchGuardConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY ${_cag_compat})  # not ARCH_INDEPENDENT: the libraries are built for this target
install(FILES "${PROJECT_BINARY_DIR}/cmake-install/CudaArchGuardConfig.cmake"
              "${PROJECT_BINARY_DIR}/cmake-install/CudaArchGuardConfigVersion.cmake"
        DESTINATION "${CAG_INSTALL_CMAKEDIR}"
        COMPONENT cmake)

# The sources of archguard-verify, so that an installed module can build its verify tool
# without the archguard tool (see CudaArchGuardVerify.cmake).
file(STRINGS "${PROJECT_SOURCE_DIR}/cmake/Modules/CudaArchGuard/verifier-sources.txt" _cag_verifier_files REGEX "^[^#]")
# An edited list reconfigures, so the install rules never name a file that has gone.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             "${PROJECT_SOURCE_DIR}/cmake/Modules/CudaArchGuard/verifier-sources.txt")
foreach(_cag_f IN LISTS _cag_verifier_files)
  get_filename_component(_cag_d "${_cag_f}" DIRECTORY)
  install(FILES "${PROJECT_SOURCE_DIR}/${_cag_f}"
          DESTINATION "${CAG_INSTALL_MODULEDIR}/CudaArchGuard/verifier/${_cag_d}" COMPONENT cmake)
endforeach()

if(_cag_top_level)
  include("${CMAKE_CURRENT_LIST_DIR}/Packaging.cmake")
endif()
