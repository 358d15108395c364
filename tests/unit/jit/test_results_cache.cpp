// SPDX-License-Identifier: Apache-2.0
// The results cache (archguard/results_cache.hpp): what was learnt about an object (where its
// embedded fatbins are, the kernel lists of its images) found again by the object's identity and
// the producer; damaged or foreign records are misses; a cache that cannot be used is a warning,
// never a failure; KernelIndex asks it before decoding, checks each entry's fingerprint, and
// keeps only what decoded.
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

/// A PTX image (raw kind 1): list_kernels reads its .entry directives.
struct PtxImage {
  std::string text;
  FatbinEntry entry;
  PtxImage(std::string body, std::uint64_t offset) : text(std::move(body)) {
    entry.offset = offset;
    entry.raw_kind = kEntryKindPtx;
    entry.kind = CodeKind::ptx;
    entry.arch = Arch{90, Suffix::none};
    entry.stored_size = text.size();
    entry.payload = Bytes(reinterpret_cast<const std::byte*>(text.data()), text.size());
  }
};

const std::string kPtx =
    ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry _Z3addPf(\n.param .u64 p)\n{ ret; }\n"
    ".visible .entry _Z5scalePf(\n.param .u64 p)\n{ ret; }\n";

std::unique_ptr<ResultsCache> open_in(const TempDir& d, const std::string& producer = "archguard test commit 1") {
  std::string warning;
  auto c = ResultsCache::open(producer, warning, d.path);
  INFO(warning);
  REQUIRE(c != nullptr);
  CHECK(warning.empty());
  return c;
}

std::vector<std::filesystem::path> records(const TempDir& d) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(d.path + "/results/v1/entries"))
    if (e.is_regular_file() && e.path().extension() == ".bin") out.push_back(e.path());
  return out;
}

EmbeddedFinds some_finds() {
  EmbeddedFinds f;
  f.sections.push_back({".rodata", 0x1000, 0x40000, {0x1008, 0x2400, 0x9000}});
  f.sections.push_back({".ldata", 0x80000, 0x100, {}});
  f.no_kernels = {{0x500, true}, {0x9000, false}};
  return f;
}

ObjectFatbins object_with(const std::string& identity) {
  ObjectFatbins o;
  o.path = "lib.so";
  o.identity = identity;
  return o;
}

}  // namespace

TEST_CASE("embedded finds are found again by the object's identity and the producer only", "[jit][results]") {
  TempDir d;
  auto c = open_in(d);
  CHECK_FALSE(c->find_embedded("file 1 2 3 4 5"));
  c->keep_embedded("file 1 2 3 4 5", some_finds());
  auto hit = c->find_embedded("file 1 2 3 4 5");
  REQUIRE(hit);
  REQUIRE(hit->sections.size() == 2);
  CHECK(hit->sections[0].name == ".rodata");
  CHECK(hit->sections[0].offset == 0x1000);
  CHECK(hit->sections[0].size == 0x40000);
  CHECK(hit->sections[0].fatbins == std::vector<std::uint64_t>{0x1008, 0x2400, 0x9000});
  CHECK(hit->sections[1].fatbins.empty());
  CHECK(hit->no_kernels == some_finds().no_kernels);
  CHECK_FALSE(c->find_embedded("file 1 2 3 4 6"));  // another change time: another file
  CHECK_FALSE(open_in(d, "archguard test commit 2")->find_embedded("file 1 2 3 4 5"));
  CHECK(c->counters().scans_known == 1);
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

TEST_CASE("kernel lists of an object round-trip, identical lists written once", "[jit][results]") {
  TempDir d;
  auto c = open_in(d);
  StoredKernelLists lists;
  const std::vector<Kernel> two = {{"_Z3addPf", "add(float*)"}, {"_Z5scalePf", "scale(float*)"}};
  lists[0x100] = StoredKernels{"fp a", two};
  lists[0x900] = StoredKernels{"fp b", two};
  lists[0x1200] = StoredKernels{"fp c", {{"_Z1fv", "f()"}}};
  lists[0x2000] = StoredKernels{"fp d", {}};
  c->keep_kernels("object", lists);
  const auto back = c->find_kernels("object");
  REQUIRE(back.size() == 4);
  CHECK(back.at(0x900).fingerprint == "fp b");
  REQUIRE(back.at(0x900).kernels.size() == 2);
  CHECK(back.at(0x900).kernels[1].demangled == "scale(float*)");
  CHECK(back.at(0x1200).kernels.front().name == "_Z1fv");
  CHECK(back.at(0x2000).kernels.empty());
  CHECK(c->find_kernels("another object").empty());
  // The embedded finds of the same identity are another record.
  CHECK_FALSE(c->find_embedded("object"));
}

TEST_CASE("a damaged record is a miss, evicted, and stored again", "[jit][results]") {
  TempDir d;
  auto c = open_in(d);
  c->keep_embedded("id", some_finds());
  const auto rec = records(d);
  REQUIRE(rec.size() == 1);
  {
    std::fstream f(rec[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x5a');
  }
  CHECK_FALSE(c->find_embedded("id"));
  CHECK(records(d).empty());
  c->keep_embedded("id", some_finds());
  CHECK(c->find_embedded("id"));
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

TEST_CASE("KernelIndex decodes once, keeps what decoded, and trusts a kept list only for the same entry", "[jit][results]") {
  TempDir d;
  auto c = open_in(d);
  PtxImage a(kPtx, 0x100);
  PtxImage garbage("\xff\xfe not ptx", 0x900);
  garbage.entry.raw_kind = kEntryKindElf;  // a SASS entry whose image is no ELF file: does not decode
  garbage.entry.kind = CodeKind::sass;
  const ObjectFatbins obj = object_with("file 1 2 3 4 5");
  {
    KernelIndex index(c.get(), obj);
    const auto& listed = index.of(a.entry, "lib.so");
    REQUIRE(listed);
    CHECK(listed->size() == 2);
    CHECK_FALSE(index.of(garbage.entry, "lib.so"));
  }  // flushed: one record with a's list, none for garbage
  CHECK(c->counters().misses == 1);
  auto kept = c->find_kernels("file 1 2 3 4 5");
  REQUIRE(kept.size() == 1);
  CHECK(kept.count(0x100) == 1);
  {
    // Found again without decoding: the payload now says something else, the list is the kept one.
    PtxImage changed(std::string(kPtx.size(), ' '), 0x100);
    KernelIndex index(c.get(), obj);
    const auto& listed = index.of(changed.entry, "lib.so");
    REQUIRE(listed);
    CHECK(listed->size() == 2);
    CHECK(c->counters().hits == 0);  // counted when the index is flushed
    index.flush();
    CHECK(c->counters().hits == 1);
  }
  {
    // Another fingerprint at the same offset (another size): decoded again.
    PtxImage other(kPtx + "\n.visible .entry _Z1gv()\n{ ret; }\n", 0x100);
    KernelIndex index(c.get(), obj);
    const auto& listed = index.of(other.entry, "lib.so");
    REQUIRE(listed);
    CHECK(listed->size() == 3);
  }
  CHECK(c->counters().misses == 2);
  {
    // An object without an identity (bytes in memory, a file that just changed): never looked up.
    KernelIndex index(c.get(), object_with(""));
    PtxImage changed(std::string(kPtx.size(), ' '), 0x100);
    const auto& listed = index.of(changed.entry, "lib.so");
    REQUIRE(listed);
    CHECK(listed->empty());
    index.flush();
    CHECK(c->counters().misses == 3);    // counted as decoded
    CHECK(c->find_kernels("").empty());  // and never kept
  }
}
