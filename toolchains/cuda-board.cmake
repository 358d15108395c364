# SPDX-License-Identifier: Apache-2.0
# Shared by the board toolchain files (jetson-orin.cmake, jetson-thor.cmake, grace-hopper.cmake,
# grace-blackwell.cmake); not a toolchain file itself. It
#   - points CMake at an aarch64 cross build: Debian's aarch64-linux-gnu-gcc/g++ (also nvcc's host
#     compiler), the arm64 sysroot /usr/aarch64-linux-gnu, qemu-aarch64 as the emulator;
#   - finds nvcc: CMAKE_CUDA_COMPILER, else $CUDACXX, else <CUDAToolkit_ROOT>/bin/nvcc, else
#     /usr/local/cuda/bin/nvcc;
#   - refuses, with the fix, a toolkit that cannot build the board's images (asking nvcc what it
#     supports, and the architecture table of CudaArchGuard when and where the board's targets
#     appeared) or that has no aarch64 target directory;
#   - pins the board's policy as the default of CudaArchGuard's ARCH_POLICY / ARCH_PTX cache
#     entries (a -DARCH_POLICY=... on the command line still wins, with a warning).
#
#   _cag_board(NAME <board> CC <x.y> POLICY <items> PTX <highest|none> CUDA <first release>
#              NOTE <release requirement>)
cmake_policy(VERSION 3.18...4.4)
include("${CMAKE_CURRENT_LIST_DIR}/../cmake/Modules/CudaArchGuardTable.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/../cmake/Modules/CudaArchGuardToolkit.cmake")

include("${CMAKE_CURRENT_LIST_DIR}/aarch64-common.cmake")
if(NOT DEFINED CMAKE_C_COMPILER)
  set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
endif()
if(NOT DEFINED CMAKE_CXX_COMPILER)
  set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
endif()
if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
  set(CMAKE_CUDA_HOST_COMPILER aarch64-linux-gnu-g++)
endif()

function(_cag_board)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;CC;PTX;CUDA;NOTE" "POLICY")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "_cag_board: unknown arguments '${arg_UNPARSED_ARGUMENTS}'")
  endif()
  set(who "${CMAKE_CURRENT_LIST_FILE}")  # the board's toolchain file
  get_filename_component(who "${who}" NAME)

  # The board must be a row of the architecture table.
  cuda_arch_guard_load_table()
  string(REPLACE "." "" board_sm "${arg_CC}")
  if(NOT board_sm IN_LIST CudaArchGuard_TABLE_SMS OR NOT CudaArchGuard_ARCH_${board_sm}_CC STREQUAL arg_CC)
    message(FATAL_ERROR "${who}: CC ${arg_CC} of ${arg_NAME} is not in the architecture table; update CudaArchGuard")
  endif()

  # The nvcc that will build the project.
  if(CMAKE_CUDA_COMPILER)
    set(nvcc "${CMAKE_CUDA_COMPILER}")
  elseif(NOT "$ENV{CUDACXX}" STREQUAL "")
    set(nvcc "$ENV{CUDACXX}")
  elseif(CUDAToolkit_ROOT)
    set(nvcc "${CUDAToolkit_ROOT}/bin/nvcc")
  else()
    set(nvcc "/usr/local/cuda/bin/nvcc")
  endif()
  if(NOT EXISTS "${nvcc}")
    message(FATAL_ERROR "${who}: no nvcc at '${nvcc}'; set CMAKE_CUDA_COMPILER to the nvcc of a CUDA >= ${arg_CUDA} "
                        "toolkit with the aarch64 target (on Debian/Ubuntu x86-64: scripts/setup-cross.sh in the CudaArchGuard "
                        "tree lays one out in .tools/cuda-cross)")
  endif()
  set(CMAKE_CUDA_COMPILER "${nvcc}" CACHE FILEPATH "nvcc (set by ${who})")

  # try_compile projects re-read this file; the checks ran in the real project already.
  if(CMAKE_PROJECT_NAME STREQUAL "CMAKE_TRY_COMPILE")
    return()
  endif()

  # CMake reads a toolchain file more than once while it sets up the languages: check once.
  get_property(checked GLOBAL PROPERTY _CAG_BOARD_CHECKED)
  if(checked STREQUAL "${nvcc}")
    return()
  endif()
  _cag_nvcc_query("${nvcc}" "" _CAG_NVCC)
  if(NOT _CAG_NVCC_VERSION)
    message(FATAL_ERROR "${who}: '${nvcc} --version' names no CUDA release; set CMAKE_CUDA_COMPILER to nvcc")
  endif()
  # Every pinned image: nvcc must list it (plain SASS in --list-gpu-code, a/f in --help).
  foreach(item IN LISTS arg_POLICY)
    if(NOT item MATCHES "^([0-9]+)([af]?)$")
      message(FATAL_ERROR "_cag_board: bad POLICY item '${item}'")
    endif()
    set(sm "${CMAKE_MATCH_1}")
    set(sfx "${CMAKE_MATCH_2}")
    if(sfx STREQUAL "")
      set(ok OFF)
      if(sm IN_LIST _CAG_NVCC_SASS)
        set(ok ON)
      endif()
      set(since "${CudaArchGuard_ARCH_${sm}_FIRST}")
    else()
      set(ok OFF)
      if(item IN_LIST _CAG_NVCC_VARIANTS)
        set(ok ON)
      endif()
      string(TOUPPER "${sfx}" up)
      set(since "${CudaArchGuard_ARCH_${sm}_${up}_SINCE}")
    endif()
    if(NOT ok)
      set(why "")
      foreach(rn IN LISTS CudaArchGuard_TABLE_RENAMES)
        if(rn MATCHES "^([0-9]+)>${sm}@(.*)$")
          set(why " (CUDA before ${CMAKE_MATCH_2} names this GPU sm_${CMAKE_MATCH_1}; a binary built for it does not load under the ${CMAKE_MATCH_2} driver)")
        endif()
      endforeach()
      message(FATAL_ERROR "${who}: nvcc ${_CAG_NVCC_VERSION} at '${nvcc}' cannot build sm_${item} for ${arg_NAME} "
                          "(CC ${arg_CC})${why}; sm_${item} needs CUDA >= ${since}: ${arg_NOTE}. "
                          "Set CMAKE_CUDA_COMPILER to the nvcc of such a toolkit")
    endif()
  endforeach()
  if(_CAG_NVCC_VERSION VERSION_LESS arg_CUDA)
    message(FATAL_ERROR "${who}: nvcc ${_CAG_NVCC_VERSION} at '${nvcc}' is older than CUDA ${arg_CUDA}, "
                        "which ${arg_NAME} needs: ${arg_NOTE}. Set CMAKE_CUDA_COMPILER to the nvcc of such a toolkit")
  endif()

  # The aarch64 target: CUDA 13 has one for every Arm platform (sbsa-linux); JetPack 6 and older
  # cross toolkits name it aarch64-linux.
  get_filename_component(bin "${nvcc}" DIRECTORY)
  get_filename_component(top "${bin}" DIRECTORY)
  set(target_dir "")
  foreach(t sbsa-linux aarch64-linux)
    if(NOT target_dir AND EXISTS "${top}/targets/${t}/lib")
      set(target_dir "${top}/targets/${t}")
    endif()
  endforeach()
  if(NOT target_dir)
    string(REPLACE "." "-" pkg "${_CAG_NVCC_VERSION}")
    message(FATAL_ERROR "${who}: the toolkit at '${top}' has no aarch64 target (targets/sbsa-linux or targets/aarch64-linux): "
                        "nvcc can compile device code but not link for Arm. Install NVIDIA's cross package "
                        "(cuda-cross-sbsa-${pkg}, or cuda-cross-aarch64-<release> of JetPack's CUDA release) or run "
                        "scripts/setup-cross.sh, which lays one out in .tools/cuda-cross")
  endif()
  if(NOT EXISTS "${target_dir}/lib/libcudart_static.a" AND NOT DEFINED CMAKE_CUDA_RUNTIME_LIBRARY)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared PARENT_SCOPE)
  endif()
  set(CUDAToolkit_ROOT "${top}" CACHE PATH "CUDA toolkit (set by ${who})")

  set(tegra "")
  if(CudaArchGuard_ARCH_${board_sm}_TEGRA STREQUAL "1")
    set(tegra ", Tegra: SASS has no minor-version compatibility")
  endif()
  # The board's policy, as the default of the module's cache entries.
  string(REPLACE ";" " + " shown "${arg_POLICY}")
  set(ARCH_POLICY "${arg_POLICY}" CACHE STRING "CudaArchGuard: pinned by ${who} for ${arg_NAME}")
  set(ARCH_PTX "${arg_PTX}" CACHE STRING "CudaArchGuard: pinned by ${who} for ${arg_NAME}")
  if(NOT "${ARCH_POLICY}" STREQUAL "${arg_POLICY}" OR NOT "${ARCH_PTX}" STREQUAL "${arg_PTX}")
    message(WARNING "${who}: ARCH_POLICY=${ARCH_POLICY} ARCH_PTX=${ARCH_PTX} replaces the pinned policy of ${arg_NAME} "
                    "(ARCH_POLICY=${arg_POLICY} ARCH_PTX=${arg_PTX})")
  endif()
  set_property(GLOBAL PROPERTY _CAG_BOARD_CHECKED "${nvcc}")
  message(STATUS "${who}: ${arg_NAME} (CC ${arg_CC}${tegra}), nvcc ${_CAG_NVCC_VERSION}, target ${target_dir}; ${arg_NOTE}")
endfunction()
