// SPDX-License-Identifier: Apache-2.0
#include <archguard/doctor.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

using namespace archguard::doctor;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

const Finding* find(const Step& s, std::string_view subject) {
  for (const auto& f : s.findings)
    if (f.subject == subject) return &f;
  return nullptr;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() / ("ag_doctor_env_" + std::to_string(::getpid()) + "_" +
                                                     std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("a clean environment passes step 4", "[doctor]") {
  TempDir home;
  const Step s = check_environment(env_of({{"HOME", home.path.string()}}));
  CHECK(s.number == 4);
  CHECK(s.status() == Level::pass);
  REQUIRE(find(s, "default cache") != nullptr);
  CHECK(find(s, "default cache")->message.find("created on first use") != std::string::npos);
}

TEST_CASE("ptx jit switches are flagged with the variable to unset", "[doctor]") {
  TempDir home;
  // <variable>=1 alone: a warning naming the launch error it causes, fixed by unsetting it.
  const auto check_switch = [&home](const std::string& variable, const std::string& error) {
    const Step s = check_environment(env_of({{"HOME", home.path.string()}, {variable, "1"}}));
    const Finding* f = find(s, variable);
    REQUIRE(f != nullptr);
    CHECK(f->status == Level::warn);
    CHECK(f->message.find(error) != std::string::npos);
    CHECK(f->fix == "unset " + variable);
  };
  SECTION("disable") { check_switch("CUDA_DISABLE_PTX_JIT", "223"); }
  SECTION("force") { check_switch("CUDA_FORCE_PTX_JIT", "209"); }
  SECTION("both is a failure") {
    const Step s = check_environment(
        env_of({{"HOME", home.path.string()}, {"CUDA_FORCE_PTX_JIT", "1"}, {"CUDA_DISABLE_PTX_JIT", "1"}}));
    CHECK(s.status() == Level::fail);
  }
  SECTION("0 means off") {
    const Step s = check_environment(env_of({{"HOME", home.path.string()}, {"CUDA_FORCE_PTX_JIT", "0"}}));
    CHECK(find(s, "CUDA_FORCE_PTX_JIT")->status == Level::pass);
  }
}

TEST_CASE("the jit cache directory is checked for writability and fullness", "[doctor]") {
  TempDir dir;
  SECTION("an existing writable cache reports its size") {
    {
      std::ofstream f(dir.path / "entry", std::ios::binary);
      f << std::string(2048, 'x');
    }
    const Step s = check_environment(env_of({{"CUDA_CACHE_PATH", dir.path.string()}}));
    const Finding* f = find(s, "CUDA_CACHE_PATH");
    REQUIRE(f != nullptr);
    CHECK(f->status == Level::pass);
    CHECK(f->message.find("writable") != std::string::npos);
    CHECK(f->message.find("in 1 files") != std::string::npos);
  }
  SECTION("a nearly full cache is a warning") {
    {
      std::ofstream f(dir.path / "entry", std::ios::binary);
      f << std::string(1000, 'x');
    }
    const Step s = check_environment(env_of({{"CUDA_CACHE_PATH", dir.path.string()}, {"CUDA_CACHE_MAXSIZE", "1000"}}));
    const Finding* f = find(s, "CUDA_CACHE_PATH");
    REQUIRE(f != nullptr);
    CHECK(f->status == Level::warn);
    CHECK(f->message.find("nearly full") != std::string::npos);
  }
  SECTION("a file where the directory should be fails") {
    { std::ofstream f(dir.path / "file"); }
    const Step s = check_environment(env_of({{"CUDA_CACHE_PATH", (dir.path / "file").string()}}));
    CHECK(find(s, "CUDA_CACHE_PATH")->status == Level::fail);
  }
  SECTION("a bad CUDA_CACHE_MAXSIZE is a warning") {
    const Step s = check_environment(env_of({{"CUDA_CACHE_PATH", dir.path.string()}, {"CUDA_CACHE_MAXSIZE", "lots"}}));
    CHECK(find(s, "CUDA_CACHE_MAXSIZE")->status == Level::warn);
  }
  SECTION("disabled cache") {
    const Step s = check_environment(env_of({{"CUDA_CACHE_PATH", dir.path.string()}, {"CUDA_CACHE_DISABLE", "1"}}));
    CHECK(find(s, "CUDA_CACHE_DISABLE")->status == Level::warn);
  }
  if (::geteuid() != 0) {
    SECTION("an unwritable cache is a warning") {
      std::filesystem::permissions(dir.path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
      const Step s = check_environment(env_of({{"CUDA_CACHE_PATH", dir.path.string()}}));
      std::filesystem::permissions(dir.path, std::filesystem::perms::owner_all);
      CHECK(find(s, "CUDA_CACHE_PATH")->status == Level::warn);
    }
  }
}

TEST_CASE("module loading, launch blocking and visible devices", "[doctor]") {
  TempDir home;
  const std::string h = home.path.string();
  CHECK(find(check_environment(env_of({{"HOME", h}, {"CUDA_MODULE_LOADING", "EAGER"}})), "CUDA_MODULE_LOADING")->status ==
        Level::pass);
  CHECK(find(check_environment(env_of({{"HOME", h}, {"CUDA_MODULE_LOADING", "lazy-ish"}})), "CUDA_MODULE_LOADING")->status ==
        Level::warn);
  CHECK(find(check_environment(env_of({{"HOME", h}, {"CUDA_LAUNCH_BLOCKING", "1"}})), "CUDA_LAUNCH_BLOCKING")->status ==
        Level::warn);
  const Step hidden = check_environment(env_of({{"HOME", h}, {"CUDA_VISIBLE_DEVICES", ""}}));
  CHECK(find(hidden, "CUDA_VISIBLE_DEVICES")->status == Level::fail);
  CHECK(find(hidden, "CUDA_VISIBLE_DEVICES")->fix.find("unset CUDA_VISIBLE_DEVICES") == 0);
}

TEST_CASE("a CUDA_VISIBLE_DEVICES that names no gpu is not passed", "[doctor]") {
  TempDir home;
  const std::string h = home.path.string();
  auto status = [&](const char* value) {
    return find(check_environment(env_of({{"HOME", h}, {"CUDA_VISIBLE_DEVICES", value}})), "CUDA_VISIBLE_DEVICES")->status;
  };
  CHECK(status("bogus") == Level::fail);  // the driver stops at the first bad entry: no gpu
  CHECK(status("-1") == Level::fail);     // the usual way to hide every gpu
  CHECK(status("0,bogus") == Level::warn);
  CHECK(status("0,1") == Level::pass);
  CHECK(status("GPU-5c0a7e1e-5d5b-4c6e-8f3e-000000000000") == Level::pass);
  CHECK(status("MIG-5c0a7e1e-5d5b-4c6e-8f3e-000000000000,1") == Level::pass);
  const Step bogus = check_environment(env_of({{"HOME", h}, {"CUDA_VISIBLE_DEVICES", "bogus"}}));
  CHECK(find(bogus, "CUDA_VISIBLE_DEVICES")->message.find("names no gpu") != std::string::npos);
  CHECK(find(bogus, "CUDA_VISIBLE_DEVICES")->fix.find("unset CUDA_VISIBLE_DEVICES") == 0);
}
