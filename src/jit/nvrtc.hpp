// SPDX-License-Identifier: Apache-2.0
#pragma once
// NVRTC through dlopen: the entry points, the library's identity, and one compilation.

#include <archguard/jit.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace archguard::jit {

struct NvrtcApi {
  using Program = void*;
  int (*nvrtcVersion)(int*, int*) = nullptr;
  int (*nvrtcGetNumSupportedArchs)(int*) = nullptr;
  int (*nvrtcGetSupportedArchs)(int*) = nullptr;
  const char* (*nvrtcGetErrorString)(int) = nullptr;
  int (*nvrtcCreateProgram)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*nvrtcDestroyProgram)(Program*) = nullptr;
  int (*nvrtcCompileProgram)(Program, int, const char* const*) = nullptr;
  int (*nvrtcGetPTXSize)(Program, std::size_t*) = nullptr;
  int (*nvrtcGetPTX)(Program, char*) = nullptr;
  int (*nvrtcGetCUBINSize)(Program, std::size_t*) = nullptr;
  int (*nvrtcGetCUBIN)(Program, char*) = nullptr;
  int (*nvrtcGetLTOIRSize)(Program, std::size_t*) = nullptr;  // optional (NVRTC >= 12.0)
  int (*nvrtcGetLTOIR)(Program, char*) = nullptr;
  int (*nvrtcGetProgramLogSize)(Program, std::size_t*) = nullptr;
  int (*nvrtcGetProgramLog)(Program, char*) = nullptr;
  int (*nvrtcAddNameExpression)(Program, const char*) = nullptr;
  int (*nvrtcGetLoweredName)(Program, const char*, const char**) = nullptr;
};

class Nvrtc {
 public:
  const NvrtcInfo& info() const { return info_; }
  const NvrtcApi& api() const { return api_; }
  /// "NVRTC_ERROR_COMPILATION (6)".
  std::string describe(int result) const;

  struct Output {
    std::vector<std::byte> image;
    std::vector<std::pair<std::string, std::string>> lowered;
    std::string log;
    double ms = 0;
  };
  /// Runs NVRTC. `options` are the final options (arch included). Errors carry the log, the
  /// options and the numbered source lines the log points at.
  Result<Output> compile(const CompileRequest& request, const std::vector<std::string>& options) const;

 private:
  friend Result<NvrtcPtr> load_nvrtc(const std::string& library);
  friend Result<NvrtcInfo> read_nvrtc_info(const std::string& library);
  NvrtcApi api_;
  NvrtcInfo info_;
  void* handle_ = nullptr;
};

/// The -arch value for a target: "sm_90", "compute_90" (PTX and LTO-IR).
std::string arch_option(const Target& target);

}  // namespace archguard::jit
