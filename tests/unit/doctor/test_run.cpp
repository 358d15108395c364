// SPDX-License-Identifier: Apache-2.0
#include <archguard/doctor.hpp>

#include <catch2/catch.hpp>

#include "doctor/steps.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

using namespace archguard::doctor;

namespace {
Options no_driver_options() {
  Options o;
  o.libcuda = "/nonexistent/libcuda.so.1";
  o.libnvml = "";
  o.nvidia_smi = "";
  o.env = [](std::string_view name) -> std::optional<std::string> {
    if (name == "HOME") return std::filesystem::temp_directory_path().string();
    if (name == "CUDA_FORCE_PTX_JIT") return std::string("1");
    return std::nullopt;
  };
  return o;
}
}  // namespace

TEST_CASE("without a driver doctor still runs steps 2-4 and says so", "[doctor]") {
  const Report r = run(no_driver_options());
  CHECK_FALSE(r.driver_found);
  CHECK(r.driver_problem.find("libcuda.so.1") != std::string::npos);
  REQUIRE(r.steps.size() == 5);
  CHECK(r.steps[0].number == 1);
  CHECK(r.steps[0].status() == Level::fail);
  CHECK(r.steps[0].findings[0].message.find("no cuda driver found") == 0);
  CHECK(r.steps[1].name == "versions");
  CHECK_FALSE(r.steps[1].findings.empty());
  CHECK(r.steps[2].name == "binaries");
  CHECK(r.steps[3].name == "environment");
  CHECK(r.steps[4].name == "smoke test");
  CHECK(r.steps[4].status() == Level::skip);
  CHECK(r.overall() == Level::fail);
  // Fixes: the driver first (a failure), then the environment warning.
  REQUIRE(r.fixes.size() >= 2);
  CHECK(r.fixes[0].kind == FixKind::driver);
  bool env_fix = false;
  for (const auto& f : r.fixes) env_fix = env_fix || (f.kind == FixKind::environment && f.text == "unset CUDA_FORCE_PTX_JIT");
  CHECK(env_fix);
}

TEST_CASE("files are read in step 2 even without a driver", "[doctor]") {
  Options o = no_driver_options();
  o.files = {"/proc/self/exe", "/nonexistent/app"};
  const Report r = run(o);
  const Step& versions = r.steps[1];
  bool self = false, missing = false;
  for (const auto& f : versions.findings) {
    if (f.subject == "/proc/self/exe") self = f.status == Level::pass && f.message.find("does not need the cuda runtime") == 0;
    if (f.subject == "/nonexistent/app") missing = f.status == Level::fail;
  }
  CHECK(self);
  CHECK(missing);
}

#ifdef ARCHGUARD_DOCTOR_FIXTURE_DIR
TEST_CASE("step 2 reads a directory's libraries on several threads and counts them as one by one", "[doctor]") {
  // 300 libraries that need libcudart.so.N and carry device code, a host program, a text file:
  // read on several threads in the background while step 1 runs.
  const auto dir = std::filesystem::temp_directory_path() / ("archguard-step2-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "sub");
  for (int i = 0; i < 300; ++i)
    std::filesystem::copy_file(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_sm75.so", dir / "sub" / ("libk" + std::to_string(i) + ".so"));
  std::filesystem::copy_file(ARCHGUARD_DOCTOR_HOST_FIXTURE_DIR "/loader_none", dir / "loader_none");
  std::ofstream(dir / "notes.txt") << "text\n";
  const auto need = runtime_need(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_sm75.so");
  REQUIRE(need.ok());
  REQUIRE(need->cudart_major.has_value());

  const detail::RuntimeNeeds n = detail::read_runtime_needs(dir.string());
  CHECK(n.elf_files == 301);
  CHECK(n.device_code == 300);
  CHECK(n.statically == 0);
  CHECK(n.majors == std::set<unsigned>{*need->cudart_major});
  CHECK(n.first_error.empty());
  CHECK(n.note.empty());

  Options o = no_driver_options();
  o.files = {dir.string()};
  const Report r = run(o);
  bool found = false;
  for (const auto& f : r.steps[1].findings)
    if (f.subject == dir.string()) found = f.message == "needs libcudart.so." + std::to_string(*need->cudart_major);
  CHECK(found);
  // A program built with nvcc's default static runtime: device code, no libcudart.so needed.
  const auto static_dir = dir / "static";
  std::filesystem::create_directories(static_dir);
  std::filesystem::copy_file(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_exe_ptx80", static_dir / "app");
  o.files = {static_dir.string()};
  const Report rs = run(o);
  bool linked_statically = false;
  for (const auto& f : rs.steps[1].findings)
    if (f.subject == static_dir.string())
      linked_statically = f.message.find("device code without libcudart.so in DT_NEEDED: the cuda runtime is linked statically") == 0;
  CHECK(linked_statically);
  std::filesystem::remove_all(dir);
}
#endif
