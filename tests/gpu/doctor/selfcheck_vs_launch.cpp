// SPDX-License-Identifier: Apache-2.0
// The self-check's prediction against reality: for libraries built by nvcc for known targets,
// load each one, ask the self-check whether its kernel can run on device 0, then launch it
// through the CUDA runtime and compare. Exit 77 without a GPU, 1 on any disagreement.
#include <archguard/device.hpp>
#include <archguard/selfcheck.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <fixture dir>\n", argv[0]);
    return 2;
  }
  auto driver = archguard::device::Driver::shared();
  if (!driver || !(*driver)->init_status().ok() || !(*driver)->device_count().ok() || *(*driver)->device_count() == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  auto info = (*driver)->device(0);
  if (!info) {
    std::printf("device 0: %s\n", info.message().c_str());
    return 1;
  }
  std::printf("device 0: %s, cc %u.%u\n", info->name.c_str(), info->cc.major, info->cc.minor);
  archguard::Device dev = archguard::device_for_cc(info->cc);
  int failures = 0;
  for (const char* name : {"sm75", "sm75_ptx", "sm80", "sm90", "sm90a", "sm100_ptx", "sm80_sm90_ptx90"}) {
    const std::string file = std::string("gpu_fixture_") + name + ".so";
    const std::string path = std::string(argv[1]) + "/" + file;
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::printf("%-12s cannot load: %s\n", name, ::dlerror());
      ++failures;
      continue;
    }
    auto r = archguard::selfcheck::check_current_process(dev, {}, file);
    int predicted = -1;
    std::string how = "?";
    if (r) {
      for (const auto& o : r->objects) {
        if (o.path.find(file) == std::string::npos) continue;
        predicted = o.outcome == archguard::Outcome::fail ? o.cuda_error : 0;
        how = o.outcome == archguard::Outcome::native ? "native" : o.outcome == archguard::Outcome::jit ? "jit"
                                                                                                        : "fail";
      }
    }
    using Launch = int (*)();
    auto launch = reinterpret_cast<Launch>(::dlsym(lib, "ag_fixture_launch"));  // NOLINT: dlsym
    const int actual = launch != nullptr ? launch() : -2;
    const bool agree = predicted == actual;
    std::printf("%-12s self-check: %-6s (%3d)  launch: %3d  %s\n", name, how.c_str(), predicted, actual,
                agree ? "agree" : "DISAGREE");
    if (!agree) ++failures;
    // Libraries stay loaded: unloading one that registered with the CUDA runtime is not needed here.
  }
  return failures == 0 ? 0 : 1;
}
