// SPDX-License-Identifier: Apache-2.0
// Step 3 on nvcc-built executables, with the outcomes the H200 showed (docs/gpu-validation.md):
// a PTX-only program runs on 9.0 through the JIT (its empty device-link fatbin decides nothing),
// a SASS-only -rdc program built for sm_80 fails with 500, not 209.
#include <archguard/doctor.hpp>

#include <catch2/catch.hpp>

#include "skip.hpp"

#include <filesystem>

using namespace archguard;
using namespace archguard::doctor;

#ifdef ARCHGUARD_DOCTOR_FIXTURE_DIR
namespace {
Report judge(const std::string& file) {
  Options o;
  o.libcuda = "/nonexistent/libcuda.so.1";
  o.libnvml = "";
  o.nvidia_smi = "";
  o.smoke = false;
  o.files = {file};
  o.assume_cc = {{9, 0}};
  o.env = [](std::string_view name) -> std::optional<std::string> {
    if (name == "HOME") return std::filesystem::temp_directory_path().string();
    return std::nullopt;
  };
  return run(o);
}
const Finding* binary_finding(const Report& r) {
  for (const auto& s : r.steps)
    if (s.number == 3 && !s.findings.empty()) return &s.findings.front();
  return nullptr;
}
}  // namespace

TEST_CASE("a ptx-only executable runs on 9.0 through the jit", "[doctor][binaries]") {
  const Report r = judge(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_exe_ptx80");
  const Finding* f = binary_finding(r);
  REQUIRE(f != nullptr);
  INFO(f->message);
  CHECK(f->status == Level::warn);
  CHECK(f->message.find("0 native, 1 through ptx jit, 0 without a usable image, 0 with some kernels without an image") != std::string::npos);
}

TEST_CASE("a sass-only -rdc executable for sm_80 fails on 9.0 with 500", "[doctor][binaries]") {
  const Report r = judge(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_exe_rdc_sm80");
  const Finding* f = binary_finding(r);
  REQUIRE(f != nullptr);
  INFO(f->message);
  CHECK(f->status == Level::fail);
  CHECK(f->message.find("(error 500 at first launch)") != std::string::npos);
  CHECK(f->message.find("ag_fixture_main_kernel") != std::string::npos);
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
