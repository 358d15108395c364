// SPDX-License-Identifier: Apache-2.0
#pragma once
// Small helpers shared by the jit tests: a temporary directory and a scoped environment variable.

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = std::filesystem::temp_directory_path().string() + "/archguard-jit-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* v = ::getenv(n)) old = v;
    if (value != nullptr) {
      ::setenv(n, value, 1);
    } else {
      ::unsetenv(n);
    }
  }
  ~ScopedEnv() {
    if (old) {
      ::setenv(name.c_str(), old->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}
