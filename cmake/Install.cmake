# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
Install
-------

Install rules (included by the top-level CMakeLists.txt): the CMake modules with the
architecture table, the ``archguard`` tool, and ``CudaArchGuardConfig.cmake`` +
``CudaArchGuardConfigVersion.cmake`` (SameMajorVersion), so that ``find_package(CudaArchGuard)``
works from the install prefix.

.. code-block:: console

  cmake --install build --prefix /opt/cudaarchguard
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

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/CudaArchGuardConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/CudaArchGuardConfig.cmake"
  INSTALL_DESTINATION "${CAG_INSTALL_CMAKEDIR}"
  PATH_VARS CAG_INSTALL_MODULEDIR CAG_INSTALL_TOOL)
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/CudaArchGuardConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion
  ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/CudaArchGuardConfig.cmake"
              "${PROJECT_BINARY_DIR}/CudaArchGuardConfigVersion.cmake"
        DESTINATION "${CAG_INSTALL_CMAKEDIR}"
        COMPONENT cmake)

# The sources of archguard-verify, so that an installed module can build its verify tool
# without the archguard tool (see CudaArchGuardVerify.cmake).
file(STRINGS "${PROJECT_SOURCE_DIR}/cmake/Modules/CudaArchGuard/verifier-sources.txt" _cag_verifier_files REGEX "^[^#]")
foreach(_cag_f IN LISTS _cag_verifier_files)
  get_filename_component(_cag_d "${_cag_f}" DIRECTORY)
  install(FILES "${PROJECT_SOURCE_DIR}/${_cag_f}"
          DESTINATION "${CAG_INSTALL_MODULEDIR}/CudaArchGuard/verifier/${_cag_d}" COMPONENT cmake)
endforeach()
