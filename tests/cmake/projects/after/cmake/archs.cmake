# SPDX-License-Identifier: Apache-2.0
# The project's list, computed in a helper after the include (xgboost's compute_cmake_cuda_archs).
function(after_compute_archs archs)
  set(CMAKE_CUDA_ARCHITECTURES ${archs} PARENT_SCOPE)
endfunction()
