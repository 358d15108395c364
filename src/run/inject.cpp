// SPDX-License-Identifier: Apache-2.0
// libarchguard_inject.so: the library `archguard run` names in CUDA_INJECTION64_PATH. The CUDA
// driver loads it during cuInit and calls InitializeInjection(); it starts the recorder
// (recorder.hpp) with what `archguard run` put in the environment:
//   ARCHGUARD_RUN_DIR        where the event files go (required; without it nothing happens)
//   ARCHGUARD_CUPTI          the libcupti to load first
//   ARCHGUARD_RUN_PREDICT=1  record every launched kernel and copy images held in memory
//   ARCHGUARD_RUN_MAX_COPY   bytes of such copies per process (default 256M)
//   ARCHGUARD_RUN_CHAIN      an injection library that was already set (another tool's): it is
//                            loaded and initialised first, so that tool keeps CUPTI if it wants it
// Only InitializeInjection is exported; everything else is hidden and the C++ runtime is linked
// statically, so nothing here can clash with the program's own symbols.
#include "run/recorder.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace {

std::uint64_t parse_size(const char* text, std::uint64_t fallback) {
  if (text == nullptr || *text == 0) return fallback;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) return fallback;
  std::uint64_t mult = 1;
  switch (*end) {
    case 'k':
    case 'K':
      mult = 1ull << 10;
      break;
    case 'm':
    case 'M':
      mult = 1ull << 20;
      break;
    case 'g':
    case 'G':
      mult = 1ull << 30;
      break;
    case 0:
      break;
    default:
      return fallback;
  }
  return static_cast<std::uint64_t>(v) * mult;
}

void chain_previous() noexcept {
  const char* prev = std::getenv("ARCHGUARD_RUN_CHAIN");
  if (prev == nullptr || *prev == 0) return;
  void* lib = ::dlopen(prev, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return;
  using Init = int (*)();
  if (auto init = reinterpret_cast<Init>(::dlsym(lib, "InitializeInjection"))) init();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  const char* dir = std::getenv("ARCHGUARD_RUN_DIR");
  chain_previous();
  if (dir == nullptr || *dir == 0) return 1;
  archguard::run::detail::RecorderConfig config;
  config.dir = dir;
  config.cupti = std::getenv("ARCHGUARD_CUPTI");
  const char* predict = std::getenv("ARCHGUARD_RUN_PREDICT");
  config.predict = predict != nullptr && *predict != 0 && std::strcmp(predict, "0") != 0;
  config.max_copy_bytes = parse_size(std::getenv("ARCHGUARD_RUN_MAX_COPY"), config.max_copy_bytes);
  config.origin = "injection";
  // ARCHGUARD_RUN_LAUNCHES: none (default), runtime, driver, all: which launch calls are watched.
  // Every launch that cannot run fails first at a load or a kernel lookup, which are always
  // watched; watching launches adds their counts and the runtime's host function, at CUPTI's
  // cost per launch (docs/run.md, "Cost"). Measurement only:
  // ARCHGUARD_RUN_EMPTY_CALLBACK=1 subscribes and does nothing (CUPTI's own cost).
  config.runtime_launches = false;
  config.driver_launches = false;
  if (const char* w = std::getenv("ARCHGUARD_RUN_LAUNCHES")) {
    config.runtime_launches = std::strcmp(w, "all") == 0 || std::strcmp(w, "runtime") == 0;
    config.driver_launches = std::strcmp(w, "all") == 0 || std::strcmp(w, "driver") == 0;
  }
  const char* empty = std::getenv("ARCHGUARD_RUN_EMPTY_CALLBACK");
  config.empty_callback = empty != nullptr && std::strcmp(empty, "1") == 0;
  char why[512];
  archguard::run::detail::start(config, why, sizeof why);
  return 1;  // the driver goes on whatever the recorder made of it
}
