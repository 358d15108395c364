// SPDX-License-Identifier: Apache-2.0
#include "common/driver_env.hpp"

#include <cstdlib>

namespace archguard::common {

std::optional<std::string> process_env(std::string_view name) {
  const std::string key(name);
  const char* v = std::getenv(key.c_str());  // NOLINT(concurrency-mt-unsafe): read only
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

bool driver_switch_on(const std::optional<std::string>& value) {
  return value.has_value() && !value->empty() && *value != "0";
}

DriverEnv read_driver_env(const EnvGet& get) {
  const EnvGet& env = get ? get : EnvGet(process_env);
  DriverEnv d;
  d.force_ptx_jit = env("CUDA_FORCE_PTX_JIT");
  d.disable_ptx_jit = env("CUDA_DISABLE_PTX_JIT");
  d.visible_devices = env("CUDA_VISIBLE_DEVICES");
  d.module_loading = env("CUDA_MODULE_LOADING");
  d.launch_blocking = env("CUDA_LAUNCH_BLOCKING");
  d.cache_disable = env("CUDA_CACHE_DISABLE");
  d.cache_path = env("CUDA_CACHE_PATH");
  d.cache_maxsize = env("CUDA_CACHE_MAXSIZE");
  return d;
}

}  // namespace archguard::common
