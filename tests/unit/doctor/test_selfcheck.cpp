// SPDX-License-Identifier: Apache-2.0
#include <archguard/selfcheck.hpp>

#include <catch2/catch.hpp>

#include "skip.hpp"

#include <dlfcn.h>

using namespace archguard;

TEST_CASE("the self-check of a process without device code finds nothing to fail", "[doctor][selfcheck]") {
  auto r = selfcheck::check_current_process(device_for_cc({9, 0}), {}, "test_doctor");
  REQUIRE(r.ok());
  CHECK(r->can_run());
  CHECK_FALSE(r->needs_jit());
  CHECK(r->kernels_without_image().empty());
}

#ifdef ARCHGUARD_DOCTOR_FIXTURE_DIR
namespace {
const selfcheck::ObjectResult* find(const selfcheck::Report& r, std::string_view name) {
  for (const auto& o : r.objects)
    if (o.path.find(name) != std::string::npos) return &o;
  return nullptr;
}
}  // namespace

TEST_CASE("the self-check sees a loaded library's fatbins and names its kernels", "[doctor][selfcheck]") {
  void* sass_only = ::dlopen(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_sm75.so", RTLD_NOW | RTLD_LOCAL);
  void* with_ptx = ::dlopen(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_sm75_ptx.so", RTLD_NOW | RTLD_LOCAL);
  INFO((sass_only == nullptr || with_ptx == nullptr ? ::dlerror() : ""));
  REQUIRE(sass_only != nullptr);
  REQUIRE(with_ptx != nullptr);

  SECTION("sm_75 sass only, on 9.0: fails with 209, kernel named") {
    auto r = selfcheck::check_current_process(device_for_cc({9, 0}), {}, "fixture_sm75");
    REQUIRE(r.ok());
    const auto* o = find(*r, "fixture_sm75.so");
    REQUIRE(o != nullptr);
    CHECK(o->outcome == Outcome::fail);
    CHECK(o->cuda_error == kErrNoKernelImage);
    REQUIRE(o->kernels_without_image.size() == 1);
    CHECK(o->kernels_without_image[0] == "ag_fixture_kernel");
    CHECK_FALSE(r->can_run());
    const auto* p = find(*r, "fixture_sm75_ptx.so");
    REQUIRE(p != nullptr);
    CHECK(p->outcome == Outcome::jit);
    CHECK(r->needs_jit());
  }
  SECTION("on 7.5 both run natively; on 8.6 the sass-only one fails (no cross-major sass)") {
    auto r75 = selfcheck::check_current_process(device_for_cc({7, 5}), {}, "fixture_sm75");
    REQUIRE(r75.ok());
    CHECK(r75->can_run());
    CHECK_FALSE(r75->needs_jit());
    auto r86 = selfcheck::check_current_process(device_for_cc({8, 6}), {}, "fixture_sm75");
    REQUIRE(r86.ok());
    CHECK(find(*r86, "fixture_sm75.so")->outcome == Outcome::fail);
  }
  SECTION("driver settings: CUDA_DISABLE_PTX_JIT turns the jit into 223") {
    DriverSettings s;
    s.disable_ptx_jit = true;
    auto r = selfcheck::check_current_process(device_for_cc({9, 0}), s, "fixture_sm75_ptx");
    REQUIRE(r.ok());
    const auto* p = find(*r, "fixture_sm75_ptx.so");
    REQUIRE(p != nullptr);
    CHECK(p->outcome == Outcome::fail);
    CHECK(p->cuda_error == kErrJitDisabled);
  }
  ::dlclose(with_ptx);
  ::dlclose(sass_only);
}
#else
// Built without nvcc: the same test cases, reported as skipped rather than left out.
TEST_CASE("the self-check sees a loaded library's fatbins and names its kernels", "[doctor][selfcheck]") {
  ARCHGUARD_SKIP("built without nvcc: no fixture libraries");
}
#endif
