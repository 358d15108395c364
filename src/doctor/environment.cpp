// SPDX-License-Identifier: Apache-2.0
// Step 4: environment variables that change which image the driver loads, or how it fails.
#include <archguard/doctor.hpp>

#include "common/driver_env.hpp"

#include <algorithm>

#include <sys/statvfs.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

namespace archguard::doctor {
namespace {

namespace fs = std::filesystem;

using common::driver_switch_on;

std::string mib(std::uint64_t bytes) {
  return std::to_string((bytes + (1u << 19)) >> 20) + " MiB";
}

/// Bytes under a directory, stopping after `limit_files` files so that a huge cache cannot
/// make doctor slow (the count is then a lower bound).
struct DirUsage {
  std::uint64_t bytes = 0;
  std::uint64_t files = 0;
  bool truncated = false;
};
DirUsage dir_usage(const fs::path& dir, std::uint64_t limit_files = 200000) {
  DirUsage u;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2)) {
      const auto size = it->file_size(ec2);
      if (!ec2) u.bytes += size;
      if (++u.files >= limit_files) {
        u.truncated = true;
        break;
      }
    }
  }
  return u;
}

/// The JIT cache: where it is, whether the driver can write it, how full it is.
void check_cache(const EnvLookup& env, const common::DriverEnv& driver, Step& step) {
  const auto& disable = driver.cache_disable;
  if (driver_switch_on(disable)) {
    step.findings.push_back({Level::warn, "CUDA_CACHE_DISABLE",
                             "set to '" + *disable + "': every PTX JIT compile is repeated in each new process",
                             "unset CUDA_CACHE_DISABLE unless you are testing CUDA_DISABLE_PTX_JIT", FixKind::environment});
  } else {
    step.findings.push_back({Level::pass, "CUDA_CACHE_DISABLE", "not set: JIT results are cached", ""});
  }

  // CUDA_CACHE_MAXSIZE: the CUDA programming guide gives 1 GiB as the default on desktop and
  // server platforms (256 MiB on embedded ones) and 4 GiB as the maximum.
  std::uint64_t max_size = std::uint64_t{1} << 30;
  if (const auto& v = driver.cache_maxsize) {
    std::uint64_t parsed = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), parsed);
    if (ec != std::errc() || p != v->data() + v->size()) {
      step.findings.push_back({Level::warn, "CUDA_CACHE_MAXSIZE",
                               "'" + *v + "' is not a byte count; the driver ignores it",
                               "set CUDA_CACHE_MAXSIZE to a number of bytes (at most 4294967296) or unset it", FixKind::environment});
    } else {
      max_size = parsed;
      if (parsed == 0)
        step.findings.push_back({Level::warn, "CUDA_CACHE_MAXSIZE",
                                 "0: nothing fits in the JIT cache", "unset CUDA_CACHE_MAXSIZE", FixKind::environment});
    }
  }

  fs::path path;
  std::string origin;
  if (const auto& v = driver.cache_path; v && !v->empty()) {
    path = *v;
    origin = "CUDA_CACHE_PATH";
  } else if (auto home = env("HOME"); home && !home->empty()) {
    path = fs::path(*home) / ".nv" / "ComputeCache";
    origin = "default cache";
  } else {
    step.findings.push_back({Level::warn, "CUDA_CACHE_PATH",
                             "neither CUDA_CACHE_PATH nor HOME is set: the driver has nowhere to keep JIT results",
                             "set CUDA_CACHE_PATH to a writable directory", FixKind::environment});
    return;
  }
  if (driver_switch_on(disable)) return;

  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  fs::path probe = path;
  if (!exists) {
    // The driver creates the directory: what matters is that the nearest existing parent is
    // writable.
    while (!probe.empty() && !fs::exists(probe, ec)) {
      const auto parent = probe.parent_path();
      if (parent == probe) break;
      probe = parent;
    }
  } else if (!fs::is_directory(path, ec)) {
    step.findings.push_back({Level::fail, origin, path.string() + " exists but is not a directory",
                             "remove it or point CUDA_CACHE_PATH at a directory", FixKind::environment});
    return;
  }
  if (probe.empty() || ::access(probe.c_str(), W_OK | X_OK) != 0) {
    step.findings.push_back({Level::warn, origin,
                             path.string() + " is not writable: JIT results cannot be cached, every process JIT-compiles again",
                             "point CUDA_CACHE_PATH at a writable directory", FixKind::environment});
    return;
  }
  std::string msg = path.string() + (exists ? "" : " (created on first use)") + ", writable";
  Level status = Level::pass;
  std::string fix;
  if (exists) {
    const DirUsage u = dir_usage(path);
    msg += ", " + mib(u.bytes) + (u.truncated ? "+" : "") + " in " + std::to_string(u.files) +
           " files of " + mib(max_size);
    if (max_size > 0 && u.bytes * 10 >= max_size * 9) {
      status = Level::warn;
      msg += ": nearly full, older JIT results are being evicted";
      fix = "raise CUDA_CACHE_MAXSIZE (at most 4294967296) or build SASS for this GPU so nothing needs JIT";
    }
  }
  struct statvfs st {};
  if (::statvfs(probe.c_str(), &st) == 0) {
    const std::uint64_t free_bytes = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
    msg += ", " + mib(free_bytes) + " free on its file system";
    if (free_bytes < (std::uint64_t{64} << 20)) {
      status = Level::warn;
      fix = "free space on the file system holding " + path.string() + " or move CUDA_CACHE_PATH";
    }
  }
  step.findings.push_back({status, origin, msg, fix, FixKind::environment});
}

/// A JIT switch of the driver: what it does when set (a warning), what holds when not.
void jit_switch_finding(const char* name, const std::optional<std::string>& value, const char* when_set,
                        const char* when_unset, Step& step) {
  if (driver_switch_on(value)) {
    step.findings.push_back({Level::warn, name, "set to '" + *value + "': " + when_set, std::string("unset ") + name,
                             FixKind::environment});
  } else {
    step.findings.push_back({Level::pass, name, std::string("not set: ") + when_unset, ""});
  }
}

void check_jit_switches(const common::DriverEnv& driver, Step& step) {
  const auto& disable = driver.disable_ptx_jit;
  const auto& force = driver.force_ptx_jit;
  jit_switch_finding("CUDA_DISABLE_PTX_JIT", disable,
                     "binaries without sass for this gpu fail instead of jit-compiling their ptx "
                     "(cudaErrorJitCompilationDisabled, 223)",
                     "ptx can be jit-compiled", step);
  jit_switch_finding("CUDA_FORCE_PTX_JIT", force,
                     "embedded sass is ignored, every kernel is jit-compiled from ptx, and binaries "
                     "without ptx fail with 209 (no kernel image is available)",
                     "sass is used when it matches", step);
  if (driver_switch_on(disable) && driver_switch_on(force)) {
    step.findings.push_back({Level::fail, "CUDA_FORCE_PTX_JIT + CUDA_DISABLE_PTX_JIT",
                             "both set: nothing can load (sass ignored, jit disabled)",
                             "unset both CUDA_FORCE_PTX_JIT and CUDA_DISABLE_PTX_JIT", FixKind::environment});
  }
}

void check_module_loading(const common::DriverEnv& driver, Step& step) {
  if (const auto& v = driver.module_loading) {
    if (*v == "LAZY") {
      step.findings.push_back({Level::pass, "CUDA_MODULE_LOADING",
                               "LAZY (the default since CUDA 12.2): modules load, and a missing image shows, at "
                               "a kernel's first launch",
                               ""});
    } else if (*v == "EAGER") {
      step.findings.push_back({Level::pass, "CUDA_MODULE_LOADING",
                               "EAGER: every module loads at context creation; start-up is slower and a jit "
                               "of unused kernels is paid up front",
                               ""});
    } else {
      step.findings.push_back({Level::warn, "CUDA_MODULE_LOADING",
                               "'" + *v + "' is neither LAZY nor EAGER; the driver falls back to its default",
                               "set CUDA_MODULE_LOADING=LAZY or EAGER, or unset it", FixKind::environment});
    }
  } else {
    step.findings.push_back({Level::pass, "CUDA_MODULE_LOADING", "not set: LAZY on Linux since CUDA 12.2", ""});
  }
}

void check_launch_blocking(const common::DriverEnv& driver, Step& step) {
  if (const auto& v = driver.launch_blocking; driver_switch_on(v)) {
    step.findings.push_back({Level::warn, "CUDA_LAUNCH_BLOCKING",
                             "set to '" + *v + "': every launch is synchronous (fine for finding the failing "
                                               "call, slow for real work)",
                             "unset CUDA_LAUNCH_BLOCKING once the failing launch is found", FixKind::environment});
  } else {
    step.findings.push_back({Level::pass, "CUDA_LAUNCH_BLOCKING",
                             "not set: errors of asynchronous launches surface at a later call; set it to 1 "
                             "to see them at the real call site",
                             ""});
  }
}

void check_visible_devices(const common::DriverEnv& driver, Step& step) {
  if (const auto& v = driver.visible_devices) {
    if (v->empty()) {
      step.findings.push_back({Level::fail, "CUDA_VISIBLE_DEVICES", "set but empty: the process sees no gpu",
                               "unset CUDA_VISIBLE_DEVICES or list the gpus to use (e.g. 0)", FixKind::environment});
    } else {
      // The driver reads the list up to its first entry that is neither an index nor a GPU-/MIG-
      // UUID and ignores the rest; "-1" and "none" are the usual ways to hide every gpu.
      std::size_t good = 0;
      std::string bad;
      for (std::size_t start = 0; start <= v->size();) {
        std::size_t end = v->find(',', start);
        if (end == std::string::npos) end = v->size();
        std::string_view e = std::string_view(*v).substr(start, end - start);
        while (!e.empty() && e.front() == ' ') e.remove_prefix(1);
        while (!e.empty() && e.back() == ' ') e.remove_suffix(1);
        const bool index = !e.empty() && e.size() <= 4 &&
                           std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; });
        const bool uuid = e.rfind("GPU-", 0) == 0 || e.rfind("MIG-", 0) == 0;
        if (!index && !uuid) {
          bad = std::string(e);
          break;
        }
        ++good;
        start = end + 1;
      }
      const std::string fix = "unset CUDA_VISIBLE_DEVICES or list the gpus to use (e.g. 0)";
      if (good == 0)
        step.findings.push_back({Level::fail, "CUDA_VISIBLE_DEVICES",
                                 "'" + *v + "' names no gpu ('" + bad + "' is neither an index nor a GPU-/MIG- uuid): "
                                                                        "the process sees no gpu",
                                 fix, FixKind::environment});
      else if (!bad.empty())
        step.findings.push_back({Level::warn, "CUDA_VISIBLE_DEVICES",
                                 "'" + *v + "': the driver stops at '" + bad + "' and ignores the entries from there on",
                                 fix, FixKind::environment});
      else
        step.findings.push_back({Level::pass, "CUDA_VISIBLE_DEVICES", "'" + *v + "': only these gpus are visible", ""});
    }
  }
}

}  // namespace

Step check_environment(const EnvLookup& env) {
  Step step;
  step.number = 4;
  step.name = "environment";

  const common::DriverEnv driver = common::read_driver_env(env);
  check_jit_switches(driver, step);
  check_cache(env, driver, step);
  check_module_loading(driver, step);
  check_launch_blocking(driver, step);
  check_visible_devices(driver, step);
  return step;
}

}  // namespace archguard::doctor
