// SPDX-License-Identifier: Apache-2.0
#pragma once
// The environment variables that change what the CUDA driver loads, read in one place with one
// rule. Internal to the library (src/common).
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace archguard::common {

/// Reads one variable: its value, or nothing when it is not set. The same shape as
/// archguard::doctor::EnvLookup, so that tests can hand in a made-up environment.
using EnvGet = std::function<std::optional<std::string>(std::string_view)>;

/// The process environment (getenv).
std::optional<std::string> process_env(std::string_view name);

/// Whether a driver switch such as CUDA_FORCE_PTX_JIT counts as set. NVIDIA documents these
/// switches with the value 1 only ("when set to 1, ..."); the rule here is: present, not
/// empty and not "0". So CUDA_FORCE_PTX_JIT=1 or =yes is on; unset, "" or "0" is off. It errs
/// towards "on": a value the driver might read as off is still reported, so a diagnosis names
/// the variable instead of passing over it (docs/troubleshooting.md says the same).
bool driver_switch_on(const std::optional<std::string>& value);

/// The driver settings of one environment.
struct DriverEnv {
  std::optional<std::string> force_ptx_jit;    ///< CUDA_FORCE_PTX_JIT: ignore SASS, JIT the PTX
  std::optional<std::string> disable_ptx_jit;  ///< CUDA_DISABLE_PTX_JIT: never JIT PTX
  std::optional<std::string> visible_devices;  ///< CUDA_VISIBLE_DEVICES (set but empty hides every GPU)
  std::optional<std::string> module_loading;   ///< CUDA_MODULE_LOADING: LAZY or EAGER
  std::optional<std::string> launch_blocking;  ///< CUDA_LAUNCH_BLOCKING: synchronous launches
  std::optional<std::string> cache_disable;    ///< CUDA_CACHE_DISABLE: no JIT cache
  std::optional<std::string> cache_path;       ///< CUDA_CACHE_PATH: where the JIT cache lives
  std::optional<std::string> cache_maxsize;    ///< CUDA_CACHE_MAXSIZE: its bound in bytes

  bool force_ptx_jit_on() const { return driver_switch_on(force_ptx_jit); }
  bool disable_ptx_jit_on() const { return driver_switch_on(disable_ptx_jit); }
  bool launch_blocking_on() const { return driver_switch_on(launch_blocking); }
  bool cache_disable_on() const { return driver_switch_on(cache_disable); }
};

/// Reads the settings through `get` (the process environment when empty).
DriverEnv read_driver_env(const EnvGet& get = {});

}  // namespace archguard::common
