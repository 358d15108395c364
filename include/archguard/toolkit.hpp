// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// The installed CUDA toolkit, as its nvcc describes itself: the release and the targets it
/// accepts. nvcc runs through the library's one process runner (posix_spawn, no shell, killed
/// after a timeout), as does doctor's `nvcc --version`.

#include <archguard/arch.hpp>
#include <archguard/result.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace archguard {

/// What one nvcc says about itself.
struct NvccInfo {
  std::string path;         ///< the nvcc that answered
  Version2 release;         ///< "release 13.0" of `nvcc --version`
  std::string build;        ///< "13.0.88" from "V13.0.88", "" when absent
  std::vector<Arch> sass;   ///< sm_* it accepts: --list-gpu-code plus the a/f values of --help
  std::vector<Arch> ptx;    ///< compute_* it accepts: --list-gpu-arch plus the a/f values of --help
  std::vector<Arch> ltoir;  ///< lto_* values of --help (empty for an nvcc without them)

  /// Whether this nvcc accepts the target (LTO-IR by its lto_ value).
  bool supports(Target target) const;
};

/// Locates nvcc: `explicit_path` when not empty (it must be an executable file), else the
/// first nvcc on PATH, else /usr/local/cuda/bin/nvcc. The error says where it looked.
Result<std::string> find_nvcc(std::string_view explicit_path = {});

/// Runs `nvcc --version`, `--list-gpu-code`, `--list-gpu-arch` and `--help` (for the a/f
/// values of --gpu-architecture) and collects the answers. `nvcc_path` as for find_nvcc.
/// Each run is bounded by `timeout`; a hung nvcc is killed and reported.
Result<NvccInfo> query_nvcc(std::string_view nvcc_path = {},
                            std::chrono::milliseconds timeout = std::chrono::seconds(60));

// ---- the parsers query_nvcc uses (pure, exposed for tests) --------------------------------

/// "Cuda compilation tools, release 13.0, V13.0.88" -> {13, 0}, build "13.0.88".
Result<Version2> parse_nvcc_version(std::string_view version_output, std::string* build = nullptr);
/// One name per line ("sm_75\nsm_80\n..."), each with the given prefix; sorted, unique.
/// Architectures missing from the table are kept: a newer nvcc knows more than the table.
Result<std::vector<Arch>> parse_nvcc_list(std::string_view list_output, CodeKind kind);
/// The "Allowed values" of the --gpu-architecture section of `nvcc --help`, as targets
/// (sm_ -> SASS, compute_ -> PTX, lto_ -> LTO-IR; 'all', 'native' and the like skipped).
Result<std::vector<Target>> parse_nvcc_help_arch_values(std::string_view help_output);

}  // namespace archguard
