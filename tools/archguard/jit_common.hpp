// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers shared by the jit and cache verbs: compiler set-up, target parsing, rendering.

#include <archguard/arch.hpp>
#include <archguard/compat.hpp>
#include <archguard/device.hpp>
#include <archguard/jit.hpp>

#include <nlohmann/json.hpp>

#include "cli.hpp"

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace archguard::cli::jit_common {

inline int fail(int code, const std::string& message) {
  std::cerr << "archguard: " << cli::shown(message) << "\n";
  return code;
}

inline std::string target_name(const Target& t) { return nvcc_name(t.arch, t.kind); }

/// The compiler with the cache at `cache_dir` (empty: from the environment), or none.
inline Result<std::unique_ptr<jit::Compiler>> make_compiler(const std::string& cache_dir, bool no_cache) {
  jit::CompilerOptions o;
  o.use_cache = !no_cache;
  if (!no_cache) {
    // A bad cache setting is left to Compiler::create, which compiles without the cache and
    // says why (the warning "cache unusable"): the cache never fails a compile.
    auto env = jit::CacheOptions::from_environment();
    if (!cache_dir.empty()) {
      jit::CacheOptions given = env ? *env : jit::CacheOptions{};
      given.dir = cache_dir;
      given.disabled = false;
      o.cache = given;
    } else if (env) {
      o.cache = *env;
    }
  }
  return jit::Compiler::create(o);
}

struct TargetChoice {
  Target target;
  std::optional<Version2> driver_cuda;
  std::string note;  ///< how 'auto' chose it
};

/// --arch values: any target token (sm_90, compute_90, 90, 90a-real ...) or "auto" (the clamp
/// rule for GPU 0 through the driver). Each target must be one NVRTC supports.
inline Result<std::vector<TargetChoice>> parse_targets(const std::vector<std::string>& archs,
                                                       const jit::Compiler& compiler) {
  std::vector<TargetChoice> out;
  const auto& supported = compiler.nvrtc().supported;
  for (const std::string& a : archs) {
    if (a == "auto") {
      auto drv = device::Driver::shared();
      if (!drv) return rewrap(drv.error(), "--arch auto: " + drv.message());
      auto info = (*drv)->device(0);
      if (!info) return rewrap(info.error(), "--arch auto: " + info.message());
      std::optional<Version2> cuda;
      if (auto v = (*drv)->cuda_version(); v) cuda = *v;
      auto t = compiler.target_for(device_for_cc(info->cc), cuda);
      if (!t) return rewrap(t.error(), "--arch auto: " + t.message());
      out.push_back({*t, cuda,
                     "auto: " + info->name + " (cc " + version_or_dash(info->cc) + ", driver cuda " + (cuda ? version_or_dash(*cuda) : "?") +
                         ") -> " + target_name(*t)});
      continue;
    }
    auto parsed = parse_token(a);
    if (!parsed) return rewrap(parsed.error(), "--arch " + a + ": " + parsed.message());
    for (const Target& t : *parsed) {
      if (std::find(supported.begin(), supported.end(), t.arch.sm) == supported.end()) {
        std::string list;
        for (unsigned s : supported) list += (list.empty() ? "" : " ") + std::to_string(s);
        return make_error(ErrorKind::unsupported, "--arch " + a + ": nvrtc " + version_or_dash(compiler.nvrtc().version) + " does not support " +
                                                      target_name(t) + " (it supports " + list + ")");
      }
      out.push_back({t, std::nullopt, ""});
    }
  }
  return out;
}

inline std::string cache_column(const jit::Compiled& c) {
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f ms", c.compile_ms);
  if (c.from_cache) return "cache hit " + c.key.substr(0, 16);
  if (!c.key.empty()) return std::string("compiled in ") + ms + ", stored as " + c.key.substr(0, 16);
  return std::string("compiled in ") + ms + " (not cached: " + c.cache_note + ")";
}

inline nlohmann::json compiled_json(const jit::Compiled& c) {
  nlohmann::json names = nlohmann::json::object();
  for (const auto& [e, l] : c.lowered_names) names[e] = l;
  return {{"target", target_name(c.target)},
          {"bytes", c.image.size()},
          {"from_cache", c.from_cache},
          {"key", c.key},
          {"compile_ms", c.compile_ms},
          {"cache_note", c.cache_note},
          {"lowered_names", names},
          {"log", c.log}};
}

}  // namespace archguard::cli::jit_common
