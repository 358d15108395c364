# SPDX-License-Identifier: Apache-2.0
# bench_jit: archguard::jit against raw NVRTC in the same run (docs/benchmarks-jit.md).
add_executable(bench_jit "${CMAKE_CURRENT_LIST_DIR}/bench_jit.cpp")
target_link_libraries(bench_jit PRIVATE archguard_jit archguard_build_flags nlohmann_json::nlohmann_json)
set_target_properties(bench_jit PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bin")
