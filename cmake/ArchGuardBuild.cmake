# SPDX-License-Identifier: Apache-2.0
# Build settings for the archguard library and tool (not part of the installed modules).
include_guard(GLOBAL)

add_library(archguard_build_flags INTERFACE)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(archguard_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
      -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough>)
  if(ARCHGUARD_WERROR)
    target_compile_options(archguard_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endif()
if(ARCHGUARD_SANITIZE)
  set(_cag_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  # Quoted: the flags are a list, and an unquoted generator expression would be split at its ";".
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_cag_san}>")
  add_link_options(${_cag_san})
endif()

# --- third-party dependencies (Debian packages; scripts/setup.sh installs them) -------------
find_package(Threads REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3 CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(ARCHIVE REQUIRED IMPORTED_TARGET libarchive)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(LZ4 REQUIRED IMPORTED_TARGET liblz4)
pkg_check_modules(DEFLATE REQUIRED IMPORTED_TARGET libdeflate)  # zip members inflated in one pass
# The wheel links libarchive, libzstd, liblz4, libdeflate and libcrypto statically (their .a files come with
# the -dev packages): only the code the tool calls is linked, and the shared libraries libarchive
# would otherwise load (libxml2 and its 30 MB ICU data, for formats the tool never reads) are
# dropped by --as-needed instead of being bundled by auditwheel. The installed libraries then name
# the archives by path: this is for the tool, not for an install that exports the libraries.
option(ARCHGUARD_STATIC_DEPS "Link libarchive, libzstd, liblz4, libdeflate, libcrypto and, in the executables, the C++ runtime statically (the wheel)" OFF)
if(ARCHGUARD_STATIC_DEPS)
  set(OPENSSL_USE_STATIC_LIBS TRUE)
  foreach(_cag_lib IN ITEMS archive zstd lz4 deflate)
    find_library(ARCHGUARD_STATIC_${_cag_lib} NAMES lib${_cag_lib}.a
                 HINTS ${ARCHIVE_STATIC_LIBRARY_DIRS} ${ZSTD_STATIC_LIBRARY_DIRS} ${LZ4_STATIC_LIBRARY_DIRS} ${DEFLATE_STATIC_LIBRARY_DIRS})
    if(NOT ARCHGUARD_STATIC_${_cag_lib})
      message(FATAL_ERROR "ARCHGUARD_STATIC_DEPS: lib${_cag_lib}.a not found (its -dev package has it)")
    endif()
  endforeach()
  foreach(_cag_pc IN ITEMS ARCHIVE ZSTD LZ4 DEFLATE)
    # the four as archives, what they need in turn (nettle, lzma, bz2, z, xml2...) as shared libraries
    set(_cag_static_libs)
    foreach(_cag_lib IN LISTS ${_cag_pc}_STATIC_LIBRARIES)
      if(ARCHGUARD_STATIC_${_cag_lib})
        list(APPEND _cag_static_libs "${ARCHGUARD_STATIC_${_cag_lib}}")
      else()
        # Only those present: a library only libarchive's disk code needs (libacl, whose -dev
        # package is not installed) is not linked, and the link fails loudly if the tool needs it.
        find_library(ARCHGUARD_DEP_${_cag_lib} NAMES ${_cag_lib} HINTS ${ARCHIVE_STATIC_LIBRARY_DIRS})
        if(ARCHGUARD_DEP_${_cag_lib})
          list(APPEND _cag_static_libs "${ARCHGUARD_DEP_${_cag_lib}}")
        endif()
      endif()
    endforeach()
    set_property(TARGET PkgConfig::${_cag_pc} PROPERTY INTERFACE_LINK_LIBRARIES "${_cag_static_libs}")
  endforeach()
  add_link_options(LINKER:--as-needed)
  # The C++ runtime too, in the executables (not in the injection library, which shares the
  # watched program's): with libarchive static, nothing loads the shared one any more, and the
  # tool starts in 1.6 ms instead of 2.2 ms (3.1 ms with every dependency shared).
  add_link_options("$<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-static-libstdc++;-static-libgcc>")
endif()
find_package(OpenSSL REQUIRED)          # SHA-256 for the JIT cache keys
find_package(CUDAToolkit QUIET)         # headers only (nvrtc.h, cuda.h); libraries are dlopen()ed

# --- the generated architecture table header ------------------------------------------------
set(ARCHGUARD_TABLE_FILE "${PROJECT_SOURCE_DIR}/cmake/Modules/CudaArchGuard/architectures.txt")
set(ARCHGUARD_GENERATED_DIR "${PROJECT_BINARY_DIR}/generated")
set(ARCHGUARD_TABLE_HEADER "${ARCHGUARD_GENERATED_DIR}/archguard/generated/arch_table.hpp")
add_custom_command(
  OUTPUT "${ARCHGUARD_TABLE_HEADER}"
  COMMAND "${CMAKE_COMMAND}" -DEMIT=cxx "-DOUTPUT=${ARCHGUARD_TABLE_HEADER}"
          -P "${PROJECT_SOURCE_DIR}/cmake/Modules/CudaArchGuardTable.cmake"
  DEPENDS "${ARCHGUARD_TABLE_FILE}" "${PROJECT_SOURCE_DIR}/cmake/Modules/CudaArchGuardTable.cmake"
  COMMENT "Generating the architecture table header from architectures.txt"
  VERBATIM)
add_custom_target(archguard_generated_table DEPENDS "${ARCHGUARD_TABLE_HEADER}")

# archguard_component(<layer> SOURCES ... [DEPENDS <layers or targets>...])
# Declares the static library archguard_<layer> with the project's include dirs and flags.
function(archguard_component layer)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;DEPENDS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "archguard_component(${layer}): unknown arguments '${arg_UNPARSED_ARGUMENTS}'")
  endif()
  add_library(archguard_${layer} STATIC ${arg_SOURCES})
  add_dependencies(archguard_${layer} archguard_generated_table)
  target_include_directories(archguard_${layer}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<BUILD_INTERFACE:${ARCHGUARD_GENERATED_DIR}>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  # The build flags stay in the build tree: the installed export set must not name them.
  target_link_libraries(archguard_${layer} PRIVATE $<BUILD_INTERFACE:archguard_build_flags>
                        PUBLIC ${arg_DEPENDS})
  # The headers use C++20 (std::span, <bit>): a consumer of the installed targets gets the
  # requirement with them, whatever its own CMAKE_CXX_STANDARD (or its compiler's default) is.
  target_compile_features(archguard_${layer} PUBLIC cxx_std_20)
  # Installed as CudaArchGuard::<layer> (cmake/Install.cmake); the same name works in the tree.
  set_target_properties(archguard_${layer} PROPERTIES POSITION_INDEPENDENT_CODE ON EXPORT_NAME ${layer})
  add_library(CudaArchGuard::${layer} ALIAS archguard_${layer})
endfunction()
