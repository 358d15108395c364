// SPDX-License-Identifier: Apache-2.0
// An application of the installed libraries: the self-check for GPU 0 and the JIT target choice.
// Without a CUDA driver (the documented no-GPU path of check_current_process(ordinal)) it judges
// itself for a given device instead, which needs no driver. Exit 0 when every call behaved as
// documented, 1 otherwise.
#include <archguard/jit.hpp>
#include <archguard/selfcheck.hpp>

#include <cstdio>
#include <vector>

int main() {
  namespace ag = archguard;
  auto here = ag::selfcheck::check_current_process(0);
  if (!here) {
    std::printf("selfcheck: no GPU 0 here (%s); judging for sm_80 instead\n", here.message().c_str());
    here = ag::selfcheck::check_current_process(ag::Device{{8, 0}}, ag::DriverSettings{});
    if (!here) {
      std::printf("selfcheck failed: %s\n", here.message().c_str());
      return 1;
    }
  }
  // This program carries no device code, so nothing in it can fail to launch.
  std::printf("selfcheck: %zu object(s) with device code, can_run=%d\n", here->objects.size(),
              here->can_run() ? 1 : 0);
  if (!here->can_run()) return 1;

  // The clamp rule (no NVRTC needed): an 8.6 GPU with NVRTC able to emit 75, 80 and 90 gets 80.
  const std::vector<unsigned> supported{75, 80, 90};
  auto t = ag::jit::choose_target(ag::Device{{8, 6}}, supported, ag::Version2{8, 8}, ag::Version2{});
  if (!t) {
    std::printf("jit: choose_target failed: %s\n", t.message().c_str());
    return 1;
  }
  const std::string name = ag::nvcc_name(t->arch, t->kind);
  std::printf("jit: target for an 8.6 GPU: %s\n", name.c_str());
  return name == "sm_80" ? 0 : 1;
}
