// SPDX-License-Identifier: Apache-2.0
#include <archguard/doctor.hpp>

#include <catch2/catch.hpp>

#include "../jit/memory_store.hpp"
#include "doctor/steps.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

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
TEST_CASE("step 2 keeps what it read of each file in the results cache while the file's identity holds", "[doctor]") {
  // Three libraries with device code that need libcudart.so.N, a host program, a text file and a
  // link inside the tree (not followed: the library is counted once).
  const auto dir = std::filesystem::temp_directory_path() / ("archguard-step2-cache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "lib");
  for (int i = 0; i < 3; ++i)
    std::filesystem::copy_file(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_sm75.so", dir / "lib" / ("libk" + std::to_string(i) + ".so"));
  std::filesystem::create_symlink("libk0.so", dir / "lib" / "libk0.so.1");
  std::filesystem::copy_file(ARCHGUARD_DOCTOR_HOST_FIXTURE_DIR "/loader_none", dir / "app");
  std::ofstream(dir / "notes.txt") << "text\n";
  const auto need = runtime_need(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_sm75.so");
  REQUIRE(need.ok());
  REQUIRE(need->cudart_major.has_value());
  const std::set<unsigned> majors{*need->cudart_major};
  // A file changed in the last two seconds has no identity and is never kept.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));

  archguard::test::MemoryStore store;
  const detail::RuntimeNeeds first = detail::read_runtime_needs(dir.string(), &store);
  CHECK(first.elf_files == 4);
  CHECK(first.device_code == 3);
  CHECK(first.majors == majors);
  CHECK(store.trees.kept == 1);
  const detail::RuntimeNeeds again = detail::read_runtime_needs(dir.string(), &store);
  CHECK(again.elf_files == 4);
  CHECK(again.device_code == 3);
  CHECK(again.majors == majors);
  // Nothing changed: the record stands. Without a store: the same answer.
  CHECK(store.trees.kept == 1);
  CHECK(detail::read_runtime_needs(dir.string()).elf_files == 4);

  // The answers come from the record: altered to say libcudart.so.99 and device code, they are
  // what step 2 reports.
  store.trees.edit = [](std::vector<std::byte>& record) {
    REQUIRE(record.size() == 2 + 4 * 20);  // format, count, then 20 bytes a file
    for (std::size_t at = 2; at < record.size(); at += 20) {
      record[at + 16] = std::byte{3};
      record[at + 17] = std::byte{99};
    }
  };
  const detail::RuntimeNeeds altered = detail::read_runtime_needs(dir.string(), &store);
  CHECK(altered.majors == std::set<unsigned>{99});
  CHECK(altered.device_code == 4);
  // A damaged record is not used: read again.
  store.trees.edit = [](std::vector<std::byte>& record) { record.resize(record.size() - 3); };
  CHECK(detail::read_runtime_needs(dir.string(), &store).device_code == 3);
  store.trees.edit = nullptr;

  // A library rewritten as a host program: its identity changed, it is read again.
  std::filesystem::copy_file(ARCHGUARD_DOCTOR_HOST_FIXTURE_DIR "/loader_none", dir / "lib" / "libk2.so",
                             std::filesystem::copy_options::overwrite_existing);
  const detail::RuntimeNeeds changed = detail::read_runtime_needs(dir.string(), &store);
  CHECK(changed.elf_files == 4);
  CHECK(changed.device_code == 2);
  CHECK(changed.majors == majors);
  std::filesystem::remove_all(dir);
}

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

TEST_CASE("the first FILE is judged while the driver starts, for the GPUs the last run judged for", "[doctor]") {
  // A directory (a single program or library is judged with the libraries it loads, found in
  // step 3): two libraries with device code.
  const auto dir = std::filesystem::temp_directory_path() / ("archguard-first-file-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_sm75.so", dir / "libk.so");
  std::filesystem::copy_file(ARCHGUARD_DOCTOR_FIXTURE_DIR "/fixture_sm75_ptx.so", dir / "libp.so");
  // A file changed in the last two seconds has no identity: its judgement is never kept.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  archguard::test::MemoryStore store;
  Options o = no_driver_options();
  o.smoke = false;
  o.results = &store;
  o.files = {dir.string()};
  const auto step3 = [](const Report& r) {
    std::vector<std::string> lines;
    for (const Step& st : r.steps)
      if (st.number == 3)
        for (const Finding& f : st.findings) lines.push_back(std::string(to_string(f.status)) + " " + f.subject + ": " + f.message);
    return lines;
  };
  const auto uncached = [&](archguard::Version2 cc) {
    Options plain = o;
    plain.results = nullptr;
    plain.assume_cc = {cc};
    return step3(run(plain));
  };
  o.assume_cc = {archguard::Version2{9, 0}};
  // No record yet: nothing is judged in advance; the run keeps what it judged for.
  CHECK_FALSE(detail::read_first_file(o, o.files.front(), o.env)->judgements.has_value());
  const auto first = step3(run(o));
  CHECK(first == uncached({9, 0}));
  const auto ahead = detail::read_first_file(o, o.files.front(), o.env);
  REQUIRE(ahead->judgements.has_value());
  REQUIRE(ahead->devices.size() == 1);
  CHECK(ahead->devices.front().cc == archguard::Version2{9, 0});
  // The same GPU: the judgement made in advance is the one reported (the object's judgement is
  // looked up once, not again after step 1), and the report is the same.
  std::size_t asked = store.judgements.asked;
  CHECK(step3(run(o)) == first);
  CHECK(store.judgements.asked == asked + 2);  // two objects, once each
  // Left to the process's exit (the CLI's setting without a smoke test), what step 3 read and
  // judged gives the same report, judged in advance or not.
  Options leaving = o;
  leaving.leave_to_exit = true;
  CHECK(step3(run(leaving)) == first);
  leaving.results = nullptr;
  CHECK(step3(run(leaving)) == first);
  // Another GPU: judged again after step 1 (looked up in advance and after), as without a cache.
  o.assume_cc = {archguard::Version2{7, 0}};
  asked = store.judgements.asked;
  CHECK(step3(run(o)) == uncached({7, 0}));
  CHECK(store.judgements.asked == asked + 4);
  // A damaged record judges nothing in advance.
  const std::string junk = "580 x\n9 0 0";
  auto& record = store.files.records.at("doctor: devices judged 1");
  record.assign(reinterpret_cast<const std::byte*>(junk.data()), reinterpret_cast<const std::byte*>(junk.data()) + junk.size());
  CHECK_FALSE(detail::read_first_file(o, o.files.front(), o.env)->judgements.has_value());
  CHECK(step3(run(o)) == uncached({7, 0}));
  std::filesystem::remove_all(dir);
}
