// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shared by the doctor tests that judge files (test_binaries.cpp, test_runtime_loading.cpp).

#include <archguard/doctor.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

/// The options of a doctor run on `file` alone: no driver, NVML or nvidia-smi is found, no
/// smoke test runs, and the environment holds only HOME (the temporary directory).
inline archguard::doctor::Options file_options(const std::string& file) {
  archguard::doctor::Options o;
  o.libcuda = "/nonexistent/libcuda.so.1";
  o.libnvml = "";
  o.nvidia_smi = "";
  o.smoke = false;
  o.files = {file};
  o.env = [](std::string_view name) -> std::optional<std::string> {
    if (name == "HOME") return std::filesystem::temp_directory_path().string();
    return std::nullopt;
  };
  return o;
}
