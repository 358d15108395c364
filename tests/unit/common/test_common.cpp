// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <archguard/bytes.hpp>

#include "common/driver_env.hpp"
#include "common/endian.hpp"
#include "common/fd.hpp"
#include "common/fs.hpp"
#include "common/parallel.hpp"
#include "common/process.hpp"
#include "common/version.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace archguard;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the build tree's temp area, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "archguard-common-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

}  // namespace

// ---- checked arithmetic and the byte reader -------------------------------------------------

TEST_CASE("checked_add refuses a sum past 64 bits", "[common][bytes]") {
  CHECK(checked_add(1, 2) == 3u);
  CHECK(checked_add(UINT64_MAX - 1, 1) == UINT64_MAX);
  CHECK_FALSE(checked_add(UINT64_MAX, 1).has_value());
  CHECK_FALSE(checked_add(UINT64_MAX / 2 + 1, UINT64_MAX / 2 + 1).has_value());
  CHECK(checked_add(0, UINT64_MAX) == UINT64_MAX);
}

TEST_CASE("checked_mul refuses a product past 64 bits", "[common][bytes]") {
  CHECK(checked_mul(0, UINT64_MAX) == 0u);
  CHECK(checked_mul(UINT64_MAX, 0) == 0u);
  CHECK(checked_mul(1, UINT64_MAX) == UINT64_MAX);
  CHECK(checked_mul(std::uint64_t{1} << 32, (std::uint64_t{1} << 32) - 1) == (std::uint64_t{1} << 32) * ((std::uint64_t{1} << 32) - 1));
  CHECK_FALSE(checked_mul(std::uint64_t{1} << 32, std::uint64_t{1} << 32).has_value());
  CHECK_FALSE(checked_mul(UINT64_MAX / 8 + 1, 8).has_value());
  CHECK(checked_mul(UINT64_MAX / 8, 8) == UINT64_MAX / 8 * 8);
  // A record count as a hostile file might give it: 0x2000000000000001 entries of 8 bytes wrap
  // to 8 in unchecked arithmetic.
  CHECK_FALSE(checked_mul(0x2000000000000001ull, 8).has_value());
}

TEST_CASE("the byte reader names the source, the offset and the size on a short read", "[common][bytes]") {
  const std::vector<std::byte> data{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
  ByteReader r(data, "f.bin", 0x100);
  CHECK(r.u32(0, "magic").value() == 0x04030201u);
  auto past = r.u32(2, "count");
  REQUIRE_FALSE(past.ok());
  CHECK(past.message() == "f.bin: count at 0x102: 0x4 bytes run past the end 0x105");
  // An offset near 2^64 must not wrap round to a small one.
  CHECK_FALSE(r.contains(UINT64_MAX, 2));
  CHECK_FALSE(r.span(UINT64_MAX - 1, 4, "x").ok());
}

TEST_CASE("little-endian stores read back through the reader", "[common][bytes]") {
  std::vector<std::byte> out;
  common::append_le(out, 0x11223344u, 4);
  common::append_le(out, 0x0102030405060708ull, 8);
  REQUIRE(out.size() == 12);
  ByteReader r(out, "buf");
  CHECK(r.u32(0, "a").value() == 0x11223344u);
  CHECK(r.u64(4, "b").value() == 0x0102030405060708ull);
  common::store_le(out.data() + 4, 0xdeadbeefull, 8);
  CHECK(r.u64(4, "b").value() == 0xdeadbeefull);
}

// ---- the fd owner ---------------------------------------------------------------------------

TEST_CASE("UniqueFd closes once, on scope exit, unless released", "[common][fd]") {
  int raw = -1;
  {
    common::UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    REQUIRE(fd.valid());
    raw = fd.get();
    CHECK(fd_open(raw));
  }
  CHECK_FALSE(fd_open(raw));

  common::UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int first = a.get();
  common::UniqueFd b(std::move(a));
  CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  CHECK(b.get() == first);
  const int kept = b.release();
  CHECK_FALSE(b.valid());
  CHECK(fd_open(kept));
  ::close(kept);

  common::UniqueFd c(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  CHECK(c.close() == 0);
  CHECK_FALSE(c.valid());
  CHECK(c.close() == 0);  // nothing left to close
  common::UniqueFd none;
  CHECK_FALSE(none.valid());
}

// ---- file helpers ---------------------------------------------------------------------------

TEST_CASE("make_dirs creates the missing parents with the mode asked for", "[common][fs]") {
  TempDir t;
  const std::string deep = (t.path / "a" / "b" / "c").string();
  REQUIRE(common::make_dirs(deep, 0700).ok());
  struct stat st {};
  REQUIRE(::stat(deep.c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(common::make_dirs(deep, 0700).ok());  // existing: fine

  const std::string file = (t.path / "file").string();
  std::ofstream(file) << "x";
  auto under_file = common::make_dirs(file + "/sub", 0700);
  REQUIRE_FALSE(under_file.ok());
  CHECK(under_file.message() == "mkdir " + file + "/sub failed: " + common::errno_text(ENOTDIR));
  CHECK(under_file.code() == ENOTDIR);
}

TEST_CASE("read_file, write_all, read_all and list_dir", "[common][fs]") {
  TempDir t;
  const std::string path = (t.path / "data.bin").string();
  {
    common::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    REQUIRE(fd.valid());
    const std::string text(200000, 'q');  // more than one read() buffer
    REQUIRE(common::write_all(fd.get(), std::as_bytes(std::span(text)), path).ok());
    REQUIRE(fd.close() == 0);
  }
  auto whole = common::read_file(path, true);
  REQUIRE(whole.ok());
  CHECK(whole->size() == 200000);
  CHECK(std::all_of(whole->begin(), whole->end(), [](char c) { return c == 'q'; }));

  common::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  auto part = common::read_all(fd.get(), 10, path);
  REQUIRE(part.ok());
  CHECK(part->size() == 10);
  auto more = common::read_all(fd.get(), 300000, path);  // shorter file: what there is
  REQUIRE(more.ok());
  CHECK(more->size() == 200000);

  auto missing = common::read_file((t.path / "nope").string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message() == (t.path / "nope").string() + ": cannot open: " + common::errno_text(ENOENT));
  CHECK(missing.code() == ENOENT);
  auto dir = common::read_file(t.path.string(), true);
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.message() == t.path.string() + ": not a regular file");

  auto bad_write = common::write_all(fd.get(), std::as_bytes(std::span("x", 1)), "ro");
  REQUIRE_FALSE(bad_write.ok());  // opened read-only
  CHECK(bad_write.message() == "ro: write failed: " + common::errno_text(EBADF));

  std::ofstream((t.path / "second").string()) << "y";
  common::UniqueFd dfd(::open(t.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto names = common::list_dir(dfd.get());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"data.bin", "second"});
  CHECK(common::list_dir(dfd.get()) == common::list_dir(dfd.get()));  // the caller's fd stays usable
  CHECK(fd_open(dfd.get()));
  CHECK(common::octal_mode(040755) == "0755");
}

// ---- the process runner ---------------------------------------------------------------------

TEST_CASE("run_capture runs without a shell and reports the exit status", "[common][process]") {
  auto r = common::run_capture("/bin/sh", {"-c", "echo out; echo err >&2; exit 3"}, std::chrono::seconds(20));
  REQUIRE(r.ok());
  CHECK(r->exit_code == 3);
  CHECK(r->signal == 0);
  CHECK(r->output.find("out\n") != std::string::npos);
  CHECK(r->output.find("err\n") != std::string::npos);

  common::RunOptions quiet;
  quiet.timeout = std::chrono::seconds(20);
  quiet.stderr_to = common::StderrTo::null;
  auto q = common::run_capture("sh", {"-c", "echo out; echo err >&2"}, quiet);  // found on PATH
  REQUIRE(q.ok());
  CHECK(q->exit_code == 0);
  CHECK(q->output == "out\n");

  // No shell: metacharacters reach the program as they are.
  auto literal = common::run_capture("/bin/echo", {"$HOME; `id`"}, std::chrono::seconds(20));
  REQUIRE(literal.ok());
  CHECK(literal->output == "$HOME; `id`\n");

  auto missing = common::run_capture("/nonexistent/tool", {}, std::chrono::seconds(20));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message().find("cannot run '/nonexistent/tool'") != std::string::npos);
}

TEST_CASE("run_capture kills a child that runs past the timeout", "[common][process]") {
  TempDir t;
  const std::string pid_file = (t.path / "pid").string();
  const auto start = std::chrono::steady_clock::now();
  // The shell writes its pid, then becomes `sleep 60` (same pid): that process must die.
  auto r = common::run_capture("/bin/sh", {"-c", "echo $$ > '" + pid_file + "'; exec sleep 60"},
                               std::chrono::milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "'/bin/sh' did not finish within 300 ms and was killed");
  CHECK(took < std::chrono::seconds(20));
  std::ifstream in(pid_file);
  long pid = 0;
  REQUIRE(in >> pid);
  REQUIRE(pid > 0);
  // Killed and reaped: the pid no longer names a process (not even a zombie).
  CHECK(::kill(static_cast<pid_t>(pid), 0) == -1);
  CHECK(errno == ESRCH);
}

TEST_CASE("run_capture kills a child that writes too much", "[common][process]") {
  common::RunOptions o;
  o.timeout = std::chrono::seconds(20);
  o.max_output = 4096;
  auto r = common::run_capture("yes", {}, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "'yes' wrote more than 4096 bytes and was killed");
}

TEST_CASE("run_capture reports a child killed by a signal", "[common][process]") {
  auto r = common::run_capture("/bin/sh", {"-c", "kill -TERM $$"}, std::chrono::seconds(20));
  REQUIRE(r.ok());
  CHECK(r->exit_code == -1);
  CHECK(r->signal == SIGTERM);
}

// ---- version text ---------------------------------------------------------------------------

TEST_CASE("version_text and parse_cc", "[common][version]") {
  CHECK(common::version_text({9, 0}) == "9.0");
  CHECK(common::version_text({12, 1}) == "12.1");
  CHECK(common::version_text({13, 0}) == "13.0");
  CHECK(common::parse_cc("9.0") == Version2{9, 0});
  CHECK(common::parse_cc(" 12.1\n") == Version2{12, 1});
  CHECK(common::parse_cc(common::version_text({10, 3})) == Version2{10, 3});
  for (const char* bad : {"", "9", "9.", ".0", "0.5", "8.10", "100.0", "9.0a", "x.y", "-1.0", "9.0.1", "9 .0"})
    CHECK_FALSE(common::parse_cc(bad).has_value());
}

// ---- the driver's environment switches ------------------------------------------------------

TEST_CASE("driver switches: set means present, not empty and not 0", "[common][env]") {
  CHECK_FALSE(common::driver_switch_on(std::nullopt));
  CHECK_FALSE(common::driver_switch_on(std::string()));
  CHECK_FALSE(common::driver_switch_on(std::string("0")));
  CHECK(common::driver_switch_on(std::string("1")));
  CHECK(common::driver_switch_on(std::string("yes")));

  std::map<std::string, std::string> vars{{"CUDA_FORCE_PTX_JIT", "1"}, {"CUDA_DISABLE_PTX_JIT", "0"}, {"CUDA_VISIBLE_DEVICES", ""}, {"CUDA_CACHE_DISABLE", "true"}};
  auto lookup = [&](std::string_view n) -> std::optional<std::string> {
    auto it = vars.find(std::string(n));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  const common::DriverEnv env = common::read_driver_env(lookup);
  CHECK(env.force_ptx_jit_on());
  CHECK_FALSE(env.disable_ptx_jit_on());
  CHECK(env.disable_ptx_jit == "0");
  REQUIRE(env.visible_devices.has_value());  // set but empty is not the same as unset
  CHECK(env.visible_devices->empty());
  CHECK(env.cache_disable_on());
  CHECK_FALSE(env.launch_blocking_on());
  CHECK_FALSE(env.module_loading.has_value());

  ::setenv("ARCHGUARD_TEST_COMMON_VAR", "v", 1);
  CHECK(common::process_env("ARCHGUARD_TEST_COMMON_VAR") == "v");
  ::unsetenv("ARCHGUARD_TEST_COMMON_VAR");
  CHECK_FALSE(common::process_env("ARCHGUARD_TEST_COMMON_VAR").has_value());
}

TEST_CASE("the shared pool runs every item of every caller's batch once, callers at once and nested", "[common][parallel]") {
  auto& pool = common::SharedPool::process();
  std::mutex m;
  std::set<std::thread::id> threads;
  // Eight callers at once, each with rounds of batches (of one item too), every other item of
  // some batches running a nested batch of its own from whichever thread runs it.
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int c = 0; c < 8; ++c)
    callers.emplace_back([&, c] {
      for (std::size_t round = 0; round < 20; ++round) {
        const std::size_t n = (round + c) % 5 == 0 ? 1 : 30 + round;
        std::vector<std::atomic<int>> calls(n);
        std::vector<std::atomic<int>> nested(n);
        pool.run(n, 4, [&](std::size_t i) {
          calls[i].fetch_add(1);
          if (round % 3 == 0 && i % 2 == 0) {
            std::vector<std::atomic<int>> inner(7);
            pool.run(inner.size(), 3, [&](std::size_t k) { inner[k].fetch_add(1); });
            for (auto& x : inner) nested[i].fetch_add(x.load() == 1 ? 1 : 100);
          }
          const std::lock_guard<std::mutex> lock(m);
          threads.insert(std::this_thread::get_id());
        });
        for (std::size_t i = 0; i < n; ++i) {
          if (calls[i].load() != 1) bad.fetch_add(1);
          if (round % 3 == 0 && i % 2 == 0 && nested[i].load() != 7) bad.fetch_add(1);
        }
      }
    });
  for (auto& t : callers) t.join();
  CHECK(bad.load() == 0);
  // The callers and at most three kept threads of the pool ran the items.
  CHECK(threads.size() <= 8 + 3);
  pool.run(0, 4, [](std::size_t) { FAIL("no item to run"); });
}
