// SPDX-License-Identifier: Apache-2.0
// The disk cache on its own (no NVRTC): format, integrity, permissions, locking, size bound.
#include <archguard/cache.hpp>

#include <catch2/catch.hpp>

#include "skip.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "jit_test_util.hpp"

using namespace archguard;
using namespace archguard::jit;
namespace fs = std::filesystem;

namespace {

CacheRecord record_of(std::size_t bytes, unsigned seed) {
  CacheRecord r;
  r.kind = 0;
  r.names = {{"scale<float>", "_Z5scaleIfEvPT_"}};
  r.image.resize(bytes);
  for (std::size_t i = 0; i < bytes; ++i) r.image[i] = static_cast<std::byte>((i * 31 + seed * 7) & 0xff);
  return r;
}

Digest key_of(unsigned i) { return sha256("key " + std::to_string(i)); }

std::unique_ptr<Cache> open_cache(const std::string& dir, std::uint64_t max = std::uint64_t{1} << 30) {
  CacheOptions o;
  o.dir = dir;
  o.max_bytes = max;
  auto c = Cache::open(o);
  REQUIRE(c.ok());
  return std::move(*c);
}

std::string bin_path(const std::string& dir, const Digest& k) {
  const std::string hex = to_hex(k);
  return dir + "/v1/entries/" + hex.substr(0, 2) + "/" + hex + ".bin";
}

// Stores record_of(bytes, i) under key_of(i) in `c` (opened on `dir`); returns the entry's file.
std::string store_one(Cache& c, const std::string& dir, unsigned i, std::size_t bytes) {
  REQUIRE(c.store(key_of(i), record_of(bytes, i), "{}").ok());
  return bin_path(dir, key_of(i));
}

}  // namespace

TEST_CASE("records round-trip and malformed ones are rejected with offsets", "[jit][cache]") {
  const CacheRecord r = record_of(100, 1);
  const auto bytes = encode_record(r);
  auto back = decode_record(bytes, "x.bin");
  REQUIRE(back.ok());
  CHECK(back->names == r.names);
  CHECK(back->image == r.image);
  auto cut = decode_record(std::span(bytes).first(bytes.size() - 1), "x.bin");
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.message() == "x.bin: image at 0x33 needs 0x64 bytes but only 0x63 remain");
  auto extra = bytes;
  extra.push_back(std::byte{0});
  auto ex = decode_record(extra, "x.bin");
  REQUIRE_FALSE(ex.ok());
  CHECK(ex.message().find("unexpected bytes after the image") != std::string::npos);
}

TEST_CASE("sha-256 and hex helpers", "[jit][cache]") {
  CHECK(to_hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto d = digest_from_hex(to_hex(sha256("abc")));
  REQUIRE(d);
  CHECK(*d == sha256("abc"));
  CHECK_FALSE(digest_from_hex("zz"));
  Hasher a, b;
  a.add_field("x", "ab");
  a.add_field("y", "c");
  b.add_field("x", "a");
  b.add_field("y", "bc");
  CHECK(a.finish() != b.finish());
}

TEST_CASE("store, hit, miss, and the files' modes", "[jit][cache]") {
  TempDir t;
  auto c = open_cache(t.path + "/c");
  auto miss = c->lookup(key_of(1));
  REQUIRE(miss.ok());
  CHECK_FALSE(miss->has_value());
  REQUIRE(c->store(key_of(1), record_of(64, 1), "{\"a\":1}").ok());
  auto hit = c->lookup(key_of(1));
  REQUIRE(hit.ok());
  REQUIRE(hit->has_value());
  CHECK((*hit)->record.image == record_of(64, 1).image);
  CHECK(c->counters().hits == 1);
  CHECK(c->counters().misses == 1);
  struct stat st {};
  REQUIRE(::stat(bin_path(t.path + "/c", key_of(1)).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat((t.path + "/c").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(::stat((t.path + "/c/v1/entries").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  auto listed = c->list();
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK(listed->front().metadata == "{\"a\":1}");
  CHECK(fs::is_empty(t.path + "/c/v1/tmp"));
}

TEST_CASE("a flipped byte or a truncation is detected, evicted and rebuilt", "[jit][cache]") {
  TempDir t;
  const std::string dir = t.path + "/c";
  auto c = open_cache(dir);
  const std::string bin = store_one(*c, dir, 2, 256);
  {
    std::fstream f(bin, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    char ch = 0;
    f.seekg(200);
    f.read(&ch, 1);
    ch = static_cast<char>(ch ^ 0x01);
    f.seekp(200);
    f.write(&ch, 1);
  }
  auto r = c->lookup(key_of(2));
  REQUIRE(r.ok());
  CHECK_FALSE(r->has_value());
  CHECK(c->counters().corrupt_evicted == 1);
  CHECK_FALSE(fs::exists(bin));
  auto w = c->warnings();
  REQUIRE_FALSE(w.empty());
  CHECK(w.back().find("checksum at 0x30 does not match") != std::string::npos);

  int builds = 0;
  auto rebuilt = c->get_or_build(key_of(2), [&](std::string& meta) -> Result<CacheRecord> {
    ++builds;
    meta = "{}";
    return record_of(256, 2);
  });
  REQUIRE(rebuilt.ok());
  CHECK(builds == 1);
  fs::resize_file(bin, fs::file_size(bin) - 10);
  auto v = c->verify(false);
  REQUIRE(v.ok());
  REQUIRE(v->size() == 1);
  CHECK(v->front().problem.find("record size") != std::string::npos);
  auto v2 = c->verify(true);
  REQUIRE(v2.ok());
  CHECK_FALSE(fs::exists(bin));
}

TEST_CASE("a group-writable cache dir is refused", "[jit][cache][security]") {
  TempDir t;
  const std::string dir = t.path + "/shared";
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0775);
  CacheOptions o;
  o.dir = dir;
  auto c = Cache::open(o);
  REQUIRE_FALSE(c.ok());
  CHECK(c.message() == "cache dir " + dir +
                           " is writable by group or others (mode 0775): refusing to trust it; run chmod go-w " + dir +
                           " (archguard creates it with 0700)");
  ::chmod(dir.c_str(), 0700);
  CHECK(Cache::open(o).ok());
}

TEST_CASE("a foreign-owned cache dir is refused", "[jit][cache][security]") {
  if (::geteuid() != 0) ARCHGUARD_SKIP("not root: making a directory owned by someone else needs chown");
  TempDir t;
  CacheOptions o;
  const passwd* nobody = ::getpwnam("nobody");
  REQUIRE(nobody != nullptr);
  const std::string foreign = t.path + "/foreign";
  fs::create_directories(foreign);
  ::chmod(foreign.c_str(), 0700);
  REQUIRE(::chown(foreign.c_str(), nobody->pw_uid, nobody->pw_gid) == 0);
  o.dir = foreign;
  auto f = Cache::open(o);
  REQUIRE_FALSE(f.ok());
  CHECK(f.message().find("is owned by uid " + std::to_string(nobody->pw_uid) + ", not by you (uid 0)") !=
        std::string::npos);
}

TEST_CASE("symbolic links inside the cache are never followed", "[jit][cache][security]") {
  TempDir t;
  const std::string dir = t.path + "/c";
  auto c = open_cache(dir);
  const std::string bin = store_one(*c, dir, 3, 32);
  // Plant a valid-looking entry outside and link to it.
  fs::copy_file(bin, t.path + "/planted.bin");
  fs::remove(bin);
  fs::create_symlink(t.path + "/planted.bin", bin);
  auto r = c->lookup(key_of(3));
  REQUIRE(r.ok());
  CHECK_FALSE(r->has_value());
  CHECK(fs::exists(t.path + "/planted.bin"));  // never touched
  CHECK_FALSE(fs::is_symlink(bin));            // the link was evicted

  // A linked sub-directory is refused too.
  auto c2 = open_cache(t.path + "/d");
  fs::remove_all(t.path + "/d/v1/tmp");
  fs::create_directories(t.path + "/elsewhere");
  fs::create_directory_symlink(t.path + "/elsewhere", t.path + "/d/v1/tmp");
  CacheOptions o;
  o.dir = t.path + "/d";
  auto bad = Cache::open(o);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().find("is a symbolic link or not a directory: refusing to follow it") != std::string::npos);
}

TEST_CASE("the size bound holds under churn and evicts the least recently used", "[jit][cache]") {
  TempDir t;
  const std::string dir = t.path + "/c";
  const std::uint64_t max = 16 * 1024;
  auto c = open_cache(dir, max);
  for (unsigned i = 0; i < 60; ++i) {
    REQUIRE(c->store(key_of(100 + i), record_of(1000 + i * 7, i), "{\"n\":" + std::to_string(i) + "}").ok());
    if (i == 5) {
      // keep entry 100 warm: a hit refreshes its stamp
      auto h = c->lookup(key_of(100));
      REQUIRE(h.ok());
    }
    if (i > 5 && i % 5 == 0) REQUIRE(c->lookup(key_of(100)).ok());
    auto s = c->stats();
    REQUIRE(s.ok());
    CHECK(s->bytes <= max);
  }
  auto last = c->lookup(key_of(159));
  REQUIRE(last.ok());
  CHECK(last->has_value());
  auto warm = c->lookup(key_of(100));
  REQUIRE(warm.ok());
  CHECK(warm->has_value());
  auto cold = c->lookup(key_of(101));
  REQUIRE(cold.ok());
  CHECK_FALSE(cold->has_value());
  CHECK(c->counters().evicted_for_size > 0);
}

TEST_CASE("the same key is built once by concurrent threads", "[jit][cache]") {
  TempDir t;
  const std::string dir = t.path + "/c";
  std::atomic<int> builds{0};
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto c = open_cache(dir);
      auto r = c->get_or_build(key_of(7), [&](std::string& meta) -> Result<CacheRecord> {
        ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        meta = "{}";
        return record_of(500, 7);
      });
      if (r.ok() && r->record.image == record_of(500, 7).image) ++ok;
    });
  }
  for (auto& th : threads) th.join();
  CHECK(builds == 1);
  CHECK(ok == 8);
}

TEST_CASE("a failed build stores nothing", "[jit][cache]") {
  TempDir t;
  auto c = open_cache(t.path + "/c");
  auto r = c->get_or_build(key_of(8), [](std::string&) -> Result<CacheRecord> { return make_error(ErrorKind::nvrtc, "boom", 6); });
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "boom");
  CHECK(r.code() == 6);
  auto s = c->stats();
  REQUIRE(s.ok());
  CHECK(s->entries == 0);
  CHECK(s->temp_files == 0);
}

TEST_CASE("stats counts the lock files in the shards", "[jit][cache]") {
  TempDir t;
  auto c = open_cache(t.path + "/c");
  REQUIRE(c->get_or_build(key_of(31), [](std::string&) -> Result<CacheRecord> { return record_of(40, 31); }).ok());
  std::uint64_t on_disk = 0;
  for (const auto& e : fs::recursive_directory_iterator(t.path + "/c"))
    if (e.path().extension() == ".lock") ++on_disk;
  auto s = c->stats();
  REQUIRE(s.ok());
  CHECK(s->entries == 1);
  CHECK(s->lock_files == on_disk);
  // a lock file a crashed writer left behind counts too
  const fs::path stray = fs::path(bin_path(t.path + "/c", key_of(32))).replace_extension(".lock");
  fs::create_directories(stray.parent_path());
  std::ofstream(stray.string()).put('\0');
  auto s2 = c->stats();
  REQUIRE(s2.ok());
  CHECK(s2->lock_files == on_disk + 1);
}

TEST_CASE("read-only layers serve entries and are never written", "[jit][cache]") {
  TempDir t;
  {
    auto prebuilt = open_cache(t.path + "/ro");
    REQUIRE(prebuilt->store(key_of(9), record_of(40, 9), "{}").ok());
  }
  const auto before = fs::last_write_time(bin_path(t.path + "/ro", key_of(9)));
  CacheOptions o;
  o.dir = t.path + "/rw";
  o.readonly_dirs = {t.path + "/ro", t.path + "/missing"};
  auto c = Cache::open(o);
  REQUIRE(c.ok());
  REQUIRE((*c)->warnings().size() == 1);
  CHECK((*c)->warnings()[0].find(t.path + "/missing") != std::string::npos);
  auto hit = (*c)->lookup(key_of(9));
  REQUIRE(hit.ok());
  REQUIRE(hit->has_value());
  CHECK((*hit)->readonly);
  CHECK(fs::last_write_time(bin_path(t.path + "/ro", key_of(9))) == before);
  REQUIRE((*c)->clear().ok());
  CHECK(fs::exists(bin_path(t.path + "/ro", key_of(9))));
  // A file in a read-only layer that others could have written is not trusted.
  ::chmod(bin_path(t.path + "/ro", key_of(9)).c_str(), 0666);
  auto tampered = (*c)->lookup(key_of(9));
  REQUIRE(tampered.ok());
  CHECK_FALSE(tampered->has_value());
  CHECK((*c)->warnings().back().find("writable by group or others (mode 0666): not trusted") != std::string::npos);
  CHECK(fs::exists(bin_path(t.path + "/ro", key_of(9))));
}

TEST_CASE("cache options come from the environment", "[jit][cache]") {
  ScopedEnv a("ARCHGUARD_CACHE_DIR", "/x/y");
  ScopedEnv b("ARCHGUARD_CACHE_MAX_BYTES", "64M");
  ScopedEnv c("ARCHGUARD_CACHE_READONLY_DIRS", "/opt/a::/opt/b");
  ScopedEnv d("ARCHGUARD_CACHE_DISABLE", "1");
  auto o = CacheOptions::from_environment();
  REQUIRE(o.ok());
  CHECK(o->dir == "/x/y");
  CHECK(o->max_bytes == 64u * 1024 * 1024);
  CHECK(o->readonly_dirs == std::vector<std::string>{"/opt/a", "/opt/b"});
  CHECK(o->disabled);
  CHECK(o->fsync);
  {
    ScopedEnv s("ARCHGUARD_CACHE_FSYNC", "0");
    CHECK_FALSE(CacheOptions::from_environment()->fsync);
  }
  ScopedEnv e("ARCHGUARD_CACHE_MAX_BYTES", "lots");
  auto bad = CacheOptions::from_environment();
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message() == "ARCHGUARD_CACHE_MAX_BYTES: 'lots' is not a size that fits in 64 bits (bytes, or with K, M, G or T)");
  ScopedEnv f("ARCHGUARD_CACHE_MAX_BYTES", nullptr);
  ScopedEnv g("ARCHGUARD_CACHE_DIR", nullptr);
  ScopedEnv h("XDG_CACHE_HOME", "/xdg");
  auto x = CacheOptions::from_environment();
  REQUIRE(x.ok());
  CHECK(x->dir == "/xdg/archguard");
  CHECK(x->max_bytes == (std::uint64_t{1} << 30));
}

namespace {

void touch_old(const std::string& path, int seconds_ago) {
  struct timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

}  // namespace

TEST_CASE("cache clear leaves what another process is writing", "[jit][cache][hostile]") {
  // Issue 12: with a clear loop running, 56 of 100 concurrent compiles failed because clear
  // deleted their temporary files. A writer's temporary file and the files of an entry whose
  // lock is held now survive; abandoned ones (over an hour old) and unheld orphans go.
  TempDir t;
  auto c = open_cache(t.path);
  REQUIRE(c->store(key_of(1), record_of(100, 1), "{}").ok());
  const std::string tmp = t.path + "/v1/tmp/";
  write_file(tmp + "writer.123.bin.tmp", "in progress");
  write_file(tmp + "abandoned.456.bin.tmp", "left by kill -9");
  touch_old(tmp + "abandoned.456.bin.tmp", 2 * 3600);
  const std::string busy = to_hex(key_of(2)), idle = to_hex(key_of(3));
  const std::string busy_dir = t.path + "/v1/entries/" + busy.substr(0, 2) + "/";
  const std::string idle_dir = t.path + "/v1/entries/" + idle.substr(0, 2) + "/";
  fs::create_directories(busy_dir);
  fs::create_directories(idle_dir);
  write_file(busy_dir + busy + ".json", "{}");  // published first, .bin comes next
  const int held = ::open((busy_dir + busy + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(held >= 0);
  REQUIRE(::flock(held, LOCK_EX) == 0);  // another open file: conflicts like another process
  write_file(idle_dir + idle + ".json", "{}");
  write_file(idle_dir + idle + ".lock", "");

  REQUIRE(c->clear().ok());
  CHECK_FALSE(fs::exists(bin_path(t.path, key_of(1))));
  CHECK(fs::exists(tmp + "writer.123.bin.tmp"));
  CHECK_FALSE(fs::exists(tmp + "abandoned.456.bin.tmp"));
  CHECK(fs::exists(busy_dir + busy + ".json"));
  CHECK(fs::exists(busy_dir + busy + ".lock"));
  CHECK_FALSE(fs::exists(idle_dir + idle + ".json"));
  CHECK_FALSE(fs::exists(idle_dir + idle + ".lock"));
  ::close(held);
}

TEST_CASE("stale temporary, lock and orphan files are cleaned in normal operation", "[jit][cache][hostile]") {
  TempDir t;
  {
    auto c = open_cache(t.path);
    REQUIRE(c->store(key_of(1), record_of(100, 1), "{}").ok());
  }
  const std::string tmp = t.path + "/v1/tmp/";
  const std::string orphan = to_hex(key_of(7));
  const std::string dir = t.path + "/v1/entries/" + orphan.substr(0, 2) + "/";
  fs::create_directories(dir);
  write_file(tmp + "killed.1.bin.tmp", "x");
  write_file(dir + orphan + ".json", "{}");
  write_file(dir + orphan + ".lock", "");
  write_file(tmp + "fresh.2.bin.tmp", "x");
  for (const std::string& p : {tmp + "killed.1.bin.tmp", dir + orphan + ".json", dir + orphan + ".lock"})
    touch_old(p, 2 * 3600);
  auto c = open_cache(t.path);  // a new process: its first store scans the layer
  REQUIRE(c->store(key_of(2), record_of(100, 2), "{}").ok());
  CHECK_FALSE(fs::exists(tmp + "killed.1.bin.tmp"));
  CHECK_FALSE(fs::exists(dir + orphan + ".json"));
  CHECK_FALSE(fs::exists(dir + orphan + ".lock"));
  CHECK(fs::exists(tmp + "fresh.2.bin.tmp"));
  CHECK(fs::exists(bin_path(t.path, key_of(1))));
}

TEST_CASE("cache sizes from the environment are checked, never wrapped", "[jit][cache][hostile]") {
  ScopedEnv dir("ARCHGUARD_CACHE_DIR", "/tmp/archguard-size-test");
  {
    ScopedEnv max("ARCHGUARD_CACHE_MAX_BYTES", "17179869184G");  // 2^64 bytes: used to give 0
    auto o = CacheOptions::from_environment();
    REQUIRE_FALSE(o.ok());
    CHECK(o.message().find("ARCHGUARD_CACHE_MAX_BYTES: '17179869184G' is not a size that fits in 64 bits") !=
          std::string::npos);
  }
  {
    ScopedEnv max("ARCHGUARD_CACHE_MAX_BYTES", "18446744073709551616");
    CHECK_FALSE(CacheOptions::from_environment().ok());
  }
  {
    ScopedEnv max("ARCHGUARD_CACHE_MAX_BYTES", "16T");
    auto o = CacheOptions::from_environment();
    REQUIRE(o.ok());
    CHECK(o->max_bytes == std::uint64_t{16} << 40);
  }
  CHECK(CacheOptions::from_environment()->max_header_bytes == std::uint64_t{64} << 20);
  {
    ScopedEnv header("ARCHGUARD_CACHE_MAX_HEADER", "1K");
    CHECK(CacheOptions::from_environment()->max_header_bytes == 1024);
  }
  for (const char* bad : {"abc", "-1", "0", "17179869184G"}) {
    ScopedEnv header("ARCHGUARD_CACHE_MAX_HEADER", bad);
    auto o = CacheOptions::from_environment();
    REQUIRE_FALSE(o.ok());
    CHECK(o.message().find("ARCHGUARD_CACHE_MAX_HEADER: '" + std::string(bad) + "' is not a size above 0") != std::string::npos);
  }
}

TEST_CASE("a cache root reached through someone else's symbolic link is refused", "[jit][cache][security][issue22]") {
  // /tmp/cache -> /home/victim/...: planted by another user, it would make us create and
  // write the cache wherever they chose.
  if (::geteuid() != 0) ARCHGUARD_SKIP("not root: a link owned by someone else needs chown");
  TempDir t;
  const passwd* nobody = ::getpwnam("nobody");
  REQUIRE(nobody != nullptr);
  fs::create_directories(t.path + "/victim");
  ::chmod((t.path + "/victim").c_str(), 0700);
  const std::string link = t.path + "/planted";
  fs::create_directory_symlink(t.path + "/victim", link);
  REQUIRE(::lchown(link.c_str(), nobody->pw_uid, nobody->pw_gid) == 0);
  CacheOptions o;
  o.dir = link + "/archguard";
  auto c = Cache::open(o);
  REQUIRE_FALSE(c.ok());
  CHECK(c.message().find(link + " is a symbolic link owned by uid " + std::to_string(nobody->pw_uid)) != std::string::npos);
  CHECK_FALSE(fs::exists(t.path + "/victim/archguard"));  // nothing created through it
  // A link of one's own is followed (a moved ~/.cache).
  const std::string mine = t.path + "/mine";
  fs::create_directory_symlink(t.path + "/victim", mine);
  o.dir = mine + "/archguard";
  CHECK(Cache::open(o).ok());
}
