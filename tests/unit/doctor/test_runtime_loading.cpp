// SPDX-License-Identifier: Apache-2.0
// Step 3's note on what static analysis cannot see: a program that loads code at run time
// (dlopen, cuModuleLoad*, NVRTC, a Python interpreter) is named with the command that watches it,
// and the note changes no status. Fixtures: host programs built at build time (CMakeLists.txt),
// this machine's python3, and nvcc's static-runtime executable when nvcc is there.
#include <archguard/doctor.hpp>

#include <catch2/catch.hpp>

#include "doctor_test_util.hpp"
#include "skip.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

using namespace archguard;
using namespace archguard::doctor;

namespace {
const std::string kFixtures = ARCHGUARD_DOCTOR_HOST_FIXTURE_DIR;

Report judge(const std::string& file) { return run(file_options(file)); }

const Step& binaries(const Report& r) {
  for (const auto& s : r.steps)
    if (s.number == 3) return s;
  FAIL("no step 3");
  return r.steps.front();
}

bool contains(const std::vector<std::string>& v, std::string_view s) { return std::find(v.begin(), v.end(), s) != v.end(); }

/// This machine's Python interpreter, symlinks resolved; empty when there is none.
std::string python_executable() {
  FILE* p = popen("python3 -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null", "r");
  if (p == nullptr) return "";
  char buf[4096] = {};
  std::string out;
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}
}  // namespace

TEST_CASE("a program that calls dlopen loads code at run time", "[doctor][runtime]") {
  auto l = runtime_loading(kFixtures + "/loader_dlopen");
  REQUIRE(l.ok());
  CHECK(l->elf);
  CHECK(contains(l->imports, "dlopen"));
  CHECK(l->python.empty());
  CHECK_FALSE(l->cuda_runtime);
  REQUIRE(l->loads_at_run_time());
  CHECK(l->reasons == std::vector<std::string>{"imports dlopen"});
}

TEST_CASE("a program that loads nothing at run time is not flagged", "[doctor][runtime]") {
  auto l = runtime_loading(kFixtures + "/loader_none");
  REQUIRE(l.ok());
  CHECK(l->elf);
  CHECK(l->imports.empty());
  CHECK(l->nvrtc.empty());
  CHECK(l->python.empty());
  CHECK_FALSE(l->loads_at_run_time());
}

TEST_CASE("not an elf executable or library: nothing to say", "[doctor][runtime]") {
  auto text = runtime_loading(ARCHGUARD_SOURCE_DIR "/tests/unit/doctor/CMakeLists.txt");
  REQUIRE(text.ok());
  CHECK_FALSE(text->elf);
  CHECK_FALSE(text->loads_at_run_time());
  auto missing = runtime_loading("/nonexistent/prog");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message().find("/nonexistent/prog") == 0);
}

TEST_CASE("the real python interpreter is a python interpreter", "[doctor][runtime]") {
  const std::string python = python_executable();
  if (python.empty() || !std::filesystem::is_regular_file(python)) {
    ARCHGUARD_SKIP("no python3 on this machine");
  }
  INFO(python);
  auto l = runtime_loading(python);
  REQUIRE(l.ok());
  REQUIRE(l->elf);
  CHECK_FALSE(l->python.empty());
  REQUIRE_FALSE(l->reasons.empty());
  CHECK(l->reasons.front().rfind("is a python interpreter (", 0) == 0);
}

TEST_CASE("step 3 notes a dlopen program with a pass and the command that watches it", "[doctor][runtime]") {
  const std::string file = kFixtures + "/loader_dlopen";
  const Report with = judge(file);
  const Report without = judge(kFixtures + "/loader_none");
  const Step& step = binaries(with);
  const Finding* note = nullptr;
  for (const auto& f : step.findings)
    if (f.message.find("archguard run") != std::string::npos) note = &f;
  REQUIRE(note != nullptr);
  CHECK(note->status == Level::pass);
  CHECK(note->subject == file);
  CHECK(note->fix.empty());
  CHECK(note->message == "imports dlopen: device code it loads at run time is not judged here; run `archguard run -- " +
                             file + " [its arguments]` to watch its launches");
  REQUIRE(with.runtime_loading.size() == 1);
  CHECK(with.runtime_loading.front().path == file);
  // A note, not a problem: the statuses and the verdict are those of a program that loads nothing.
  CHECK(step.status() == binaries(without).status());
  CHECK(with.overall() == without.overall());
  CHECK(with.fixes.size() == without.fixes.size());
  CHECK(without.runtime_loading.empty());
  for (const auto& f : binaries(without).findings) CHECK(f.message.find("archguard run") == std::string::npos);
}

TEST_CASE("the command to run quotes a path the shell would split", "[doctor][runtime]") {
  CHECK(run_command("./app") == "archguard run -- ./app [its arguments]");
  CHECK(run_command("/opt/my app/bin") == "archguard run -- '/opt/my app/bin' [its arguments]");
}

#ifdef ARCHGUARD_DOCTOR_FIXTURE_DIR
// nvcc links the CUDA runtime statically by default, and that runtime dlopen()s libcuda.so.1:
// every such program imports dlopen, which alone must not mark it as loading code at run time.
TEST_CASE("an nvcc-built program's own dlopen (the static cuda runtime's) is no reason", "[doctor][runtime]") {
  auto l = runtime_loading(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_exe_ptx80");
  REQUIRE(l.ok());
  CHECK(l->elf);
  CHECK(l->cuda_runtime);
  CHECK(contains(l->imports, "dlopen"));
  CHECK_FALSE(l->loads_at_run_time());
}
#else
TEST_CASE("an nvcc-built program's own dlopen (the static cuda runtime's) is no reason", "[doctor][runtime]") {
  ARCHGUARD_SKIP("built without nvcc: no fixture executables");
}
#endif
