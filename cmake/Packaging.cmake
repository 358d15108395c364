# SPDX-License-Identifier: Apache-2.0
#[=======================================================================[.rst:
Packaging
---------

CPack settings (included by cmake/Install.cmake for the top-level project): a Debian package and
a ``.tar.gz`` of the install tree, both made from the install rules.

.. code-block:: console

  cmake --preset default -DARCHGUARD_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release
  cmake --build build/default
  (cd build/default && cpack -G DEB && cpack -G TGZ)

The ``.deb`` installs under ``/usr``: ``archguard``, ``archguard-verify``, the man page, the bash
and zsh completions, the CMake package (``find_package(CudaArchGuard)``) and the static libraries
with their headers. Its run-time dependencies (libarchive, libzstd, liblz4, libdeflate, libcrypto, the C++
runtime) come from ``dpkg-shlibdeps`` reading the installed tool, so they follow what the tool
really links. Building against the libraries needs the ``-dev`` packages, which the package
suggests (a project that only uses the modules and the tool needs none of them).
#]=======================================================================]
include_guard(GLOBAL)

set(CPACK_PACKAGE_NAME "cudaarchguard")
set(CPACK_PACKAGE_VENDOR "CudaArchGuard")
set(CPACK_PACKAGE_CONTACT "CudaArchGuard maintainers <cudaarchguard@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGE_FILE_NAME "${CPACK_PACKAGE_NAME}-${PROJECT_VERSION}-${CMAKE_SYSTEM_NAME}-${CMAKE_SYSTEM_PROCESSOR}")
set(CPACK_GENERATOR "TGZ;DEB")
# One tree in the archive, named like the file: tar xf, then <dir>/bin/archguard.
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY ON)
set(CPACK_STRIP_FILES OFF)  # the install rules strip debug information themselves (Install.cmake)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/;/build.*/;/\\\\.venv/;/\\\\.tools/;/\\\\.cache/")

# Debian
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "devel")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
    "cmake (>= 3.18), pkg-config, libarchive-dev, libzstd-dev, liblz4-dev, libdeflate-dev, libssl-dev, nlohmann-json3-dev")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "${PROJECT_DESCRIPTION}\n archguard reads CUDA fatbins in executables, libraries, wheels and archives and\n predicts which GPUs can run them; the CMake modules set and verify the architectures\n a project builds for.")

include(CPack)
