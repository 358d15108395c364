// SPDX-License-Identifier: Apache-2.0
// The smoke test's failures are attributed to what caused them: an environment variable is
// named when it is the cause, and the driver is never blamed for a failure it did not cause.
#include "doctor/steps.hpp"

#include <catch2/catch.hpp>

#include "skip.hpp"

using namespace archguard;
using namespace archguard::doctor::detail;

TEST_CASE("smoke-test failures name the environment variable that caused them", "[doctor]") {
  const JitEnv none{}, force{true, false}, disable{false, true}, both{true, true};
  const auto blames_driver = [](const std::string& fix) {
    return fix.find("driver") != std::string::npos && fix.find("install") != std::string::npos;
  };
  // CUDA_FORCE_PTX_JIT: 209 (no ptx the driver can use) is the variable's doing.
  CHECK(smoke_fix(device::kCuErrorNoBinaryForGpu, force).find("unset CUDA_FORCE_PTX_JIT") == 0);
  CHECK_FALSE(blames_driver(smoke_fix(device::kCuErrorNoBinaryForGpu, force)));
  CHECK(smoke_fix(device::kCuErrorNoBinaryForGpu, both).find("CUDA_DISABLE_PTX_JIT") != std::string::npos);
  // Without a variable, 209 on a fatbin with every sass and the oldest ptx: a gpu newer than the
  // toolkit that built archguard; not the driver.
  CHECK_FALSE(blames_driver(smoke_fix(device::kCuErrorNoBinaryForGpu, none)));
  CHECK(smoke_fix(device::kCuErrorNoBinaryForGpu, none).find("rebuild archguard") != std::string::npos);
  // A ptx isa the driver does not accept: the driver, unless a forced jit made the ptx matter.
  CHECK(blames_driver(smoke_fix(device::kCuErrorUnsupportedPtxVersion, none)));
  CHECK(smoke_fix(device::kCuErrorUnsupportedPtxVersion, force).find("unset CUDA_FORCE_PTX_JIT") == 0);
  CHECK(smoke_fix(device::kCuErrorJitCompilationDisabled, disable) == "unset CUDA_DISABLE_PTX_JIT");
}

TEST_CASE("the smoke fatbin carries ptx every supported gpu can jit", "[doctor]") {
  const std::string_view targets = smoke_fatbin_targets();
  if (targets.empty()) ARCHGUARD_SKIP("built without nvcc: there is no smoke fatbin to check");
  // The oldest sass of the toolkit has its ptx too (compute_75 for CUDA 13), so that
  // CUDA_FORCE_PTX_JIT=1 finds ptx at or below every gpu's capability.
  const std::size_t first_sm = targets.find("sm_");
  REQUIRE(first_sm != std::string_view::npos);
  std::size_t end = first_sm + 3;
  while (end < targets.size() && targets[end] >= '0' && targets[end] <= '9') ++end;
  const std::string oldest(targets.substr(first_sm + 3, end - first_sm - 3));
  INFO(targets);
  CHECK(targets.find("compute_" + oldest) != std::string_view::npos);
}
