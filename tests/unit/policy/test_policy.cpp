// SPDX-License-Identifier: Apache-2.0
// The policy engine (plan_policy, the arch plan command) and the verify output of both tools.
#include <archguard/policy.hpp>
#include <archguard/verify_output.hpp>

#include <catch2/catch.hpp>

#include <algorithm>

#include <string>
#include <vector>

using namespace archguard;

namespace {

PlanToolkit cuda13() {
  PlanToolkit t;
  t.path = "/usr/local/cuda/bin/nvcc";
  t.release = {13, 0};
  t.sass = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
  t.ptx = t.sass;
  t.variants = {{90, Suffix::a}, {100, Suffix::a}, {100, Suffix::f}, {103, Suffix::a}, {103, Suffix::f}, {110, Suffix::a}, {110, Suffix::f}, {120, Suffix::a}, {120, Suffix::f}, {121, Suffix::a}, {121, Suffix::f}};
  return t;
}

bool has(const std::vector<unsigned>& v, unsigned x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST_CASE("plan: Tegra SASS runs only on its own CC (87-real is not 8.8 or 8.9)", "[policy]") {
  PlanRequest r;
  r.policy = "87-real";
  r.ptx = "none";
  r.toolkit = cuda13();
  auto p = plan_policy(r);
  REQUIRE(p);
  CHECK(p->runs.native == std::vector<unsigned>{87});
  CHECK(has(p->runs.none, 88));
  CHECK(has(p->runs.none, 89));
  CHECK(p->runs.text.rfind("natively on CC 8.7; not at all", 0) == 0);
}

TEST_CASE("plan: a bare number is SASS, ARCH_PTX adds the highest PTX", "[policy]") {
  PlanRequest r;
  r.policy = "80;90a";
  r.toolkit = cuda13();
  auto p = plan_policy(r);
  REQUIRE(p);
  std::vector<std::string> items;
  for (const Target& t : p->targets) items.push_back(plan_item(t));
  CHECK(items == std::vector<std::string>{"sass:80", "ptx:90", "sass:90a"});
  CHECK(has(p->runs.native, 90));
  CHECK(has(p->runs.jit, 100));
}

TEST_CASE("plan: errors name the setting and the nearest choice", "[policy]") {
  PlanRequest r;
  r.toolkit = cuda13();
  r.policy = "50";
  auto removed = plan_policy(r);
  REQUIRE_FALSE(removed);
  CHECK(removed.message().find("ARCH_POLICY=50: sm_50: sm_50 was removed in CUDA 13.0") == 0);
  r.policy = "100;100f";
  auto same = plan_policy(r);
  REQUIRE_FALSE(same);
  CHECK(same.message().find("sm_100 and sm_100f are the same GPU code") != std::string::npos);
  r.policy = "native";
  r.gpu_why = "nvidia-smi lists no GPU";
  auto none = plan_policy(r);
  REQUIRE_FALSE(none);
  CHECK(none.message().find("no GPU is visible on this host (nvidia-smi lists no GPU)") != std::string::npos);
}

TEST_CASE("plan: auto with GPUs adds the lowest PTX; all-major is nvcc's list", "[policy]") {
  PlanRequest r;
  r.toolkit = cuda13();
  r.gpus = {{"NVIDIA A100", {8, 0}}, {"NVIDIA GeForce RTX 5090", {12, 0}}};
  r.gpu_source = "nvidia-smi";
  auto p = plan_policy(r);
  REQUIRE(p);
  CHECK(p->mode == "native");
  CHECK(plan_item(p->targets.front()) == "ptx:75");
  r.policy = "all-major";
  auto m = plan_policy(r);
  REQUIRE(m);
  std::vector<std::string> sass;
  for (const Target& t : m->targets)
    if (t.kind == CodeKind::sass) sass.push_back(arch_number(t.arch));
  CHECK(sass == std::vector<std::string>{"75", "80", "90", "100", "110", "120"});
}

TEST_CASE("arch plan: the line format, and errors in it", "[policy]") {
  auto ok = run_plan_command({"--policy=80", "--nvcc-release=13.0", "--nvcc-sass=75 80 90", "--nvcc-ptx=75 80 90", "--min="});
  CHECK(ok.exit_code == 0);
  CHECK(ok.text.rfind("format=1\nstatus=ok\nmode=list\nitems=sass:80;ptx:80\n", 0) == 0);
  auto bad = run_plan_command({"--policy=80", "--nvcc-release=13.0", "--nvcc-sass=75 80 90", "--nvcc-ptx=75 80 90", "--ptx=sometimes"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.text == "format=1\nstatus=error\nerror=ARCH_PTX='sometimes': unknown value; use highest (default), all or none\n");
  // a misspelt value or keyword gets the nearest one
  auto typo = run_plan_command({"--policy=80", "--nvcc-release=13.0", "--nvcc-sass=75 80 90", "--nvcc-ptx=75 80 90", "--ptx=hihgest"});
  CHECK(typo.exit_code == 2);
  CHECK(typo.text.find("ARCH_PTX='hihgest': unknown value; did you mean 'highest'?") != std::string::npos);
  auto keyword = run_plan_command({"--policy=allmajor", "--nvcc-release=13.0", "--nvcc-sass=75 80 90", "--nvcc-ptx=75 80 90"});
  CHECK(keyword.exit_code == 2);
  CHECK(keyword.text.find("'allmajor' is no architecture or keyword; did you mean 'all-major'?") != std::string::npos);
  auto unknown = run_plan_command({"--bogus=1"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.text.find("unknown option '--bogus'") != std::string::npos);
}

TEST_CASE("verify output: control characters never reach a line", "[policy][verify]") {
  VerifyReport report;
  UnitFinding u;
  u.object = "evil\nverify: ok";
  u.status = UnitStatus::missing;
  u.message = "evil\nverify: ok: translation unit a.cu (fatbin 0) has no SASS for sm_90; add 90 to ARCH_POLICY";
  report.units.push_back(u);
  report.objects = 1;
  const std::string lines = verify_lines(report, {"bad\x1b[2Jname: cannot open"});
  CHECK(lines ==
        "format=1\nstatus=error\n"
        "missing=evil\\x0averify: ok: translation unit a.cu (fatbin 0) has no SASS for sm_90\n"
        "fix=add 90 to ARCH_POLICY\n"
        "error=bad\\x1b[2Jname: cannot open\n"
        "counts=1 1 1\n");
  const std::string text = verify_text(report, true, true);
  CHECK(text.find('\x0a') == text.find("\n"));  // the first newline ends the finding's line
  CHECK(text.rfind("evil\\x0averify: ok", 0) == 0);
}
