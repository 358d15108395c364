// SPDX-License-Identifier: Apache-2.0
// The results cache (archguard/results_cache.hpp): kernel lists found again by image content,
// never by name; damaged or foreign entries are misses; a cache that cannot be used is a
// warning, never a failure; KernelIndex asks it before decoding and keeps only what decoded.
#include <archguard/coverage.hpp>
#include <archguard/results_cache.hpp>

#include <catch2/catch.hpp>

#include "jit_test_util.hpp"

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>

using namespace archguard;

namespace {

struct FakeImage {
  std::vector<std::byte> bytes;
  FatbinEntry entry;
  explicit FakeImage(std::string payload, Compression c = Compression::none) {
    for (char ch : payload) bytes.push_back(static_cast<std::byte>(ch));
    entry.raw_kind = 2;
    entry.kind = CodeKind::sass;
    entry.arch = Arch{90, Suffix::none};
    entry.compression = c;
    entry.stored_size = bytes.size();
    entry.payload = Bytes(bytes.data(), bytes.size());
  }
};

const std::vector<Kernel> kKernels = {{"_Z3addPf", "add(float*)"}, {"_Z5scalePf", "scale(float*)"}};

std::unique_ptr<ResultsCache> open_in(const TempDir& d, const std::string& producer = "archguard test commit 1") {
  std::string warning;
  auto c = ResultsCache::open(producer, warning, d.path);
  INFO(warning);
  REQUIRE(c != nullptr);
  CHECK(warning.empty());
  c->set_min_image_bytes(0);  // the test's images are a few bytes
  return c;
}

std::vector<std::filesystem::path> records(const TempDir& d) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(d.path + "/results/v1/entries"))
    if (e.is_regular_file() && e.path().extension() == ".bin") out.push_back(e.path());
  return out;
}

}  // namespace

TEST_CASE("a kernel list is found again by the image's content, not by its entry", "[jit][results]") {
  TempDir d;
  auto c = open_in(d);
  FakeImage a("cubin bytes of one image");
  CHECK_FALSE(c->find(a.entry));
  c->keep(a.entry, kKernels);
  FakeImage same("cubin bytes of one image");  // another file, another entry, the same bytes
  auto hit = c->find(same.entry);
  REQUIRE(hit);
  REQUIRE(hit->size() == 2);
  CHECK((*hit)[0].name == "_Z3addPf");
  CHECK((*hit)[1].demangled == "scale(float*)");
  // One byte, one header field or another producer: another key.
  FakeImage other("cubin bytes of one imagf");
  CHECK_FALSE(c->find(other.entry));
  FakeImage compressed("cubin bytes of one image", Compression::zstd);
  CHECK_FALSE(c->find(compressed.entry));
  FakeImage arch("cubin bytes of one image");
  arch.entry.arch = Arch{90, Suffix::a};
  CHECK_FALSE(c->find(arch.entry));
  auto newer = open_in(d, "archguard test commit 2");
  CHECK_FALSE(newer->find(same.entry));
  const auto n = c->counters();
  CHECK(n.hits == 1);
  CHECK(n.stores == 1);
  CHECK(n.misses == 4);
  // Records only: no metadata file and no lock file beside them; 0600.
  REQUIRE(records(d).size() == 1);
  std::size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(d.path + "/results/v1/entries"))
    if (e.is_regular_file()) ++files;
  CHECK(files == 1);
  struct stat st {};
  REQUIRE(::stat(records(d)[0].c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("images below the bound are neither looked up nor kept", "[jit][results]") {
  TempDir d;
  auto c = open_in(d);
  c->set_min_image_bytes(kResultsCacheMinImageBytes);
  FakeImage small("a small image");
  c->keep(small.entry, kKernels);
  CHECK_FALSE(c->find(small.entry));
  CHECK(c->counters().stores == 0);
  CHECK(c->counters().misses == 0);  // not asked: no miss counted
  FakeImage big(std::string(kResultsCacheMinImageBytes, 'x'));
  c->keep(big.entry, kKernels);
  CHECK(c->find(big.entry));
}

TEST_CASE("a damaged record is a miss, evicted, and stored again", "[jit][results]") {
  TempDir d;
  auto c = open_in(d);
  FakeImage a("an image");
  c->keep(a.entry, kKernels);
  const auto rec = records(d);
  REQUIRE(rec.size() == 1);
  {
    std::fstream f(rec[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x5a');
  }
  CHECK_FALSE(c->find(a.entry));
  CHECK(records(d).empty());
  c->keep(a.entry, kKernels);
  CHECK(c->find(a.entry));
}

TEST_CASE("a results cache that cannot be used is a warning, never an error", "[jit][results]") {
  TempDir d;
  std::string warning;
  {
    ScopedEnv off("ARCHGUARD_CACHE_DISABLE", "1");
    CHECK(ResultsCache::open("p", warning, d.path) == nullptr);
    CHECK(warning.empty());
  }
  {
    ScopedEnv bad("ARCHGUARD_RESULTS_CACHE_MAX_BYTES", "-1");
    CHECK(ResultsCache::open("p", warning, d.path) == nullptr);
    CHECK(warning.find("ARCHGUARD_RESULTS_CACHE_MAX_BYTES: '-1'") != std::string::npos);
  }
  {
    ScopedEnv zero("ARCHGUARD_RESULTS_CACHE_MAX_BYTES", "0");
    CHECK(ResultsCache::open("p", warning, d.path) == nullptr);
  }
  const std::string root = d.path + "/results";
  ::mkdir(root.c_str(), 0700);
  ::chmod(root.c_str(), 0777);  // writable by others: refused, as the JIT cache refuses it
  CHECK(ResultsCache::open("p", warning, d.path) == nullptr);
  CHECK(warning.find("results cache not used") == 0);
  ::chmod(root.c_str(), 0700);
}

namespace {
struct CountingStore final : KernelStore {
  std::optional<std::vector<Kernel>> answer;
  std::atomic<int> finds{0}, keeps{0};
  std::optional<std::vector<Kernel>> find(const FatbinEntry&) override {
    ++finds;
    return answer;
  }
  void keep(const FatbinEntry&, const std::vector<Kernel>&) override { ++keeps; }
};
}  // namespace

TEST_CASE("KernelIndex asks the store before decoding and keeps only what decoded", "[jit][results]") {
  FakeImage garbage("not an ELF file at all");
  {
    CountingStore store;
    store.answer = kKernels;
    KernelIndex index(&store);
    const auto& listed = index.of(garbage.entry, "lib.so");  // decoding would fail: the store answered
    REQUIRE(listed);
    CHECK(listed->size() == 2);
    index.of(garbage.entry, "lib.so");  // asked once per entry
    CHECK(store.finds == 1);
    CHECK(store.keeps == 0);
  }
  {
    CountingStore store;
    KernelIndex index(&store);
    const auto& listed = index.of(garbage.entry, "lib.so");
    CHECK_FALSE(listed);
    CHECK(store.finds == 1);
    CHECK(store.keeps == 0);  // an error names its file: never kept
  }
}
