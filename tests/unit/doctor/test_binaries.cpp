// SPDX-License-Identifier: Apache-2.0
// Step 3 on nvcc-built executables, with the outcomes the H200 showed (docs/gpu-validation.md):
// a PTX-only program runs on 9.0 through the JIT (its empty device-link fatbin decides nothing),
// a SASS-only -rdc program built for sm_80 fails with 500, not 209.
#include <archguard/doctor.hpp>

#include <catch2/catch.hpp>

#include "doctor_test_util.hpp"
#include "skip.hpp"

#include <filesystem>
#include <string>
#include <vector>

using namespace archguard;
using namespace archguard::doctor;

#ifdef ARCHGUARD_DOCTOR_FIXTURE_DIR
namespace {
Report judge(const std::string& file) {
  Options o = file_options(file);
  o.assume_cc = {{9, 0}};
  return run(o);
}
const Finding* binary_finding(const Report& r) {
  for (const auto& s : r.steps)
    if (s.number == 3 && !s.findings.empty()) return &s.findings.front();
  return nullptr;
}
// Judges `file`: step 3's first finding has `status` and every one of `fragments` in its message.
Report check_binary_finding(const std::string& file, Level status, const std::vector<std::string>& fragments) {
  Report r = judge(file);
  const Finding* f = binary_finding(r);
  REQUIRE(f != nullptr);
  INFO(f->message);
  CHECK(f->status == status);
  for (const auto& fragment : fragments) CHECK(f->message.find(fragment) != std::string::npos);
  return r;
}
}  // namespace

TEST_CASE("a ptx-only executable runs on 9.0 through the jit", "[doctor][binaries]") {
  check_binary_finding(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_exe_ptx80", Level::warn,
                       {"0 native, 1 through ptx jit, 0 without a usable image, 0 with some kernels without an image"});
}

TEST_CASE("a sass-only -rdc executable for sm_80 fails on 9.0 with 500", "[doctor][binaries]") {
  const Report r = check_binary_finding(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_exe_rdc_sm80", Level::fail,
                                        {"(error 500 at first launch)", "ag_fixture_main_kernel"});
  bool rebuild = false;
  for (const auto& fix : r.fixes) rebuild = rebuild || (fix.kind == FixKind::rebuild && fix.text.find("9.0") != std::string::npos);
  CHECK(rebuild);
}
#else
// Built without nvcc: the same test cases, reported as skipped rather than left out.
TEST_CASE("a ptx-only executable runs on 9.0 through the jit", "[doctor][binaries]") {
  ARCHGUARD_SKIP("built without nvcc: no fixture executables");
}
TEST_CASE("a sass-only -rdc executable for sm_80 fails on 9.0 with 500", "[doctor][binaries]") {
  ARCHGUARD_SKIP("built without nvcc: no fixture executables");
}
#endif
