// SPDX-License-Identifier: Apache-2.0
// 32 processes x 8 kernels on one cache directory: every kernel is compiled exactly once,
// every process gets the same valid image, and nothing temporary is left behind.
#include <archguard/cache.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "jit_test_util.hpp"

extern char** environ;
namespace fs = std::filesystem;

TEST_CASE("32 processes x 8 kernels compile each kernel once", "[jit][cache][concurrency]") {
  TempDir t;
  const std::string cache = t.path + "/cache";
  constexpr int kProcs = 32;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string out = t.path + "/out" + std::to_string(p) + ".txt";
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::string exe = ARCHGUARD_CACHE_WORKER;
    std::vector<char*> args = {exe.data(), const_cast<char*>(cache.c_str()), nullptr};
    pid_t pid = 0;
    REQUIRE(::posix_spawn(&pid, exe.c_str(), &fa, nullptr, args.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    pids.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  REQUIRE(failures == 0);

  std::map<std::string, int> built;
  std::map<std::string, std::set<std::string>> digests;
  int lines = 0;
  for (int p = 0; p < kProcs; ++p) {
    std::ifstream in(t.path + "/out" + std::to_string(p) + ".txt");
    std::string kernel, how, digest;
    int elf = 0;
    while (in >> kernel >> how >> digest >> elf) {
      ++lines;
      if (how == "built") ++built[kernel];
      digests[kernel].insert(digest);
      CHECK(elf == 1);
    }
  }
  CHECK(lines == kProcs * 8);
  REQUIRE(digests.size() == 8);
  for (const auto& [kernel, ds] : digests) {
    INFO(kernel);
    CHECK(built[kernel] == 1);
    CHECK(ds.size() == 1);
  }
  CHECK(fs::is_empty(cache + "/v1/tmp"));
  int bins = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache + "/v1/entries")) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    CHECK((ext == ".bin" || ext == ".json" || ext == ".lock"));
    bins += ext == ".bin";
  }
  CHECK(bins == 8);
}
