// SPDX-License-Identifier: Apache-2.0
// An object's verdict and judgement kept in the results cache (judge_with_store): read back,
// every field equals what judging again gives, on every GPU, setting and option it was judged
// for; another GPU, setting, option or reading of the object is another record; a record cut
// short or altered is not trusted; a judgement whose messages name the file is not kept.
#include <archguard/container.hpp>
#include <archguard/coverage.hpp>
#include <archguard/results_cache.hpp>

#include <catch2/catch.hpp>

#include "jit_test_util.hpp"
#include "memory_store.hpp"
#include "skip.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <unistd.h>
#include <mutex>
#include <thread>

using namespace archguard;

namespace {

/// Every field of a verdict and a judgement, as text.
std::string everything(const JudgedResult& r) {
  std::string s;
  auto add = [&s](const auto&... v) { ((s += std::string(v) + " "), ...); };
  auto num = [](std::uint64_t v) { return std::to_string(v); };
  auto verdict = [&](const Verdict& v) {
    add("verdict", num(static_cast<unsigned>(v.outcome)), num(static_cast<std::uint32_t>(v.cuda_error)), num(v.image.has_value()),
        num(v.image.value_or(0)), v.reason, "\n");
  };
  const ObjectVerdict& v = r.verdict;
  add("object", v.object, num(static_cast<unsigned>(v.outcome)), num(static_cast<std::uint32_t>(v.cuda_error)), "\n");
  for (const UnitVerdict& u : v.units) {
    add(" unit", u.object, num(u.fatbin), to_string(u.section), u.identifier, u.translation_unit);
    for (const Image& im : u.images)
      add(nvcc_name(im.arch, im.kind), num(im.ptx_isa.major), num(im.ptx_isa.minor), num(im.relocatable), num(im.device_link));
    verdict(u.verdict);
  }
  const ObjectJudgement& j = r.judgement;
  add("judgement", j.object, to_string(j.kind), to_string(j.tier), num(static_cast<std::uint32_t>(j.cuda_error)), num(j.units),
      num(j.kernel_units), num(j.arch_sets), num(j.native), num(j.jit), num(j.failed), num(j.failed_tagged), num(j.link_drops),
      num(j.absent), j.dispatch_evidence, num(j.kernels_listed), "\n");
  for (const KernelVerdict& k : j.kernels) {
    add(" kernel", k.kernel.name, k.kernel.demangled, num(k.fatbin), k.translation_unit, k.identifier, k.arch_tag, k.other_gpus,
        k.absent_from_image, k.link_drop, k.link_drop_object);
    verdict(k.verdict);
  }
  for (const std::string& e : j.errors) add(" error", e, "\n");
  return s;
}

using JudgementStore = test::MemoryStore;

/// What judging gives without any store.
JudgedResult fresh(const ObjectFatbins& o, const Device& d, const DriverSettings& s, bool all) {
  JudgedResult r;
  r.verdict = check_object(o, d, s);
  r.judgement = judge_object(o, r.verdict, d, s, all);
  return r;
}

JudgedResult judged(FactsStore& store, const ObjectFatbins& o, const Device& d, const DriverSettings& s, bool all) {
  KernelIndex index(&store, o);
  return judge_with_store(o, d, s, all, index);
}

/// A scan that gives its objects an identity (only a scan with a store does).
Result<ScanReport> scan_with(FactsStore& store, const std::string& path) {
  ScanOptions o;
  o.facts = &store;
  return scan_path(path, o);
}

/// A file that changed in the last two seconds has no identity yet: nothing of it is kept.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(2200)); }

const std::string kPtx =
    ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry _Z3addPf(\n.param .u64 p)\n{ ret; }\n"
    ".visible .entry _Z5scalePf(\n.param .u64 p)\n{ ret; }\n";

/// A PTX file, and toolkit libraries where there are some: one that fails on older GPUs
/// (libcufftw: sm_75 SASS only), one with many architectures (libcupti), one whose kernels
/// sit in per-architecture fatbins (libcurand).
std::vector<std::string> inputs(const TempDir& d) {
  const std::string ptx = d.path + "/k.ptx";
  std::ofstream(ptx) << kPtx;
  settle();
  std::vector<std::string> out = {ptx};
  for (const char* lib : {"/usr/local/cuda/lib64/libcufftw.so.12", "/usr/local/cuda/lib64/libcupti.so.13",
                          "/usr/local/cuda/lib64/libcurand.so.10"})
    if (std::filesystem::exists(lib)) out.push_back(lib);
  return out;
}

}  // namespace

TEST_CASE("a judgement read back from its record gives every field, for each GPU, setting and option", "[jit][results]") {
  TempDir d;
  DriverSettings forced;
  forced.force_ptx_jit = true;
  DriverSettings old_driver;
  old_driver.driver = DriverVersion{525, 60, 13};
  DriverSettings no_jit;
  no_jit.disable_ptx_jit = true;
  const std::vector<DriverSettings> settings = {{}, forced, old_driver, no_jit};
  Device orin = device_for_cc({8, 7});
  orin.tegra = true;
  const std::vector<Device> devices = {device_for_cc({7, 0}), device_for_cc({9, 0}), orin, device_for_cc({10, 0}),
                                       device_for_cc({12, 0})};
  for (const std::string& input : inputs(d)) {
    INFO(input);
    JudgementStore store;
    auto scan = scan_with(store, input);
    REQUIRE(scan);
    for (const ObjectFatbins& o : scan->objects) {
      if (o.fatbins.empty()) continue;
      REQUIRE_FALSE(o.identity.empty());
      store.judgements.clear();
      ObjectFatbins blank = o;
      std::size_t largest = 0;
      for (const Fatbin& fb : o.fatbins)
        for (const FatbinEntry& e : fb.entries) largest = std::max(largest, e.payload.size());
      const std::vector<std::byte> zeros(largest);
      for (Fatbin& fb : blank.fatbins)
        for (FatbinEntry& e : fb.entries) e.payload = Bytes(zeros.data(), e.payload.size());
      bool differs = false;  // judged anew, the blanked object gives another judgement somewhere
      std::size_t cases = 0;
      for (const Device& dev : devices)
        for (const DriverSettings& s : settings)
          for (bool all : {false, true}) {
            INFO("cc " << dev.cc.major << "." << dev.cc.minor << " tegra " << dev.tegra << " force " << s.force_ptx_jit
                       << " disable " << s.disable_ptx_jit << " driver " << s.driver.has_value() << " all " << all);
            const std::string want = everything(fresh(o, dev, s, all));
            differs = differs || everything(fresh(blank, dev, s, all)) != want;
            CHECK(everything(judged(store, o, dev, s, all)) == want);  // judged, and kept
            ++cases;
            CHECK(store.judgements.kept == cases);  // each GPU, setting and option its own record
            // Read back, not judged again: the same object with its payloads blanked (the key
            // holds their sizes, the identity their bytes) gives the kept judgement.
            CHECK(everything(judged(store, blank, dev, s, all)) == want);
            CHECK(store.judgements.found == cases);
          }
      CHECK(differs);
      // The same file read another way (here: one fatbin fewer, as another scan option could
      // give) has another key: judged again, not read back.
      ObjectFatbins other = o;
      other.fatbins.pop_back();
      CHECK(everything(judged(store, other, devices[1], {}, false)) == everything(fresh(other, devices[1], {}, false)));
      CHECK(store.judgements.found == cases);
    }
  }
}

TEST_CASE("a judgement record cut short or altered is not trusted", "[jit][results]") {
  TempDir d;
  const auto paths = inputs(d);
  const std::string input = paths.size() > 1 ? paths[1] : paths[0];  // libcufftw fails on 9.0: kernels listed
  INFO(input);
  JudgementStore store;
  auto scan = scan_with(store, input);
  REQUIRE(scan);
  const ObjectFatbins* o = nullptr;
  for (const ObjectFatbins& obj : scan->objects)
    if (!obj.fatbins.empty()) o = &obj;
  REQUIRE(o != nullptr);
  const Device dev = device_for_cc({9, 0});
  const std::string want = everything(fresh(*o, dev, {}, true));
  judged(store, *o, dev, {}, true);
  REQUIRE(store.judgements.records.size() == 1);
  const std::size_t size = store.judgements.records.begin()->second.size();
  REQUIRE(size > 20);
  // Cut short anywhere, or longer: not used, judged again, the same result.
  for (std::size_t keep = 0; keep < size; ++keep) {
    store.judgements.edit = [keep](std::vector<std::byte>& b) { b.resize(keep); };
    CHECK(everything(judged(store, *o, dev, {}, true)) == want);
  }
  store.judgements.edit = [](std::vector<std::byte>& b) { b.push_back(std::byte{0}); };
  CHECK(everything(judged(store, *o, dev, {}, true)) == want);
  // Any byte altered: whatever is read stays within the object (fatbins and images it has).
  for (std::size_t at = 0; at < size; ++at) {
    store.judgements.edit = [at](std::vector<std::byte>& b) { b[at] ^= std::byte{0x5a}; };
    const JudgedResult r = judged(store, *o, dev, {}, true);
    for (const UnitVerdict& u : r.verdict.units) {
      CHECK(u.fatbin < o->fatbins.size());
      if (u.verdict.image) CHECK(*u.verdict.image < u.images.size());
    }
    for (const KernelVerdict& k : r.judgement.kernels) CHECK(k.fatbin < o->fatbins.size());
  }
}

TEST_CASE("a judgement whose messages name the file is not kept", "[jit][results]") {
  // A fatbin whose only image claims to be SASS and does not decode: the load fails, and the
  // message names the path of this run.
  const std::string text = "\xff\xfe not a cubin";
  ObjectFatbins o;
  o.path = "lib.so";
  o.identity = "file 1 2 3 4 5";
  o.elf_type = 3;
  Fatbin fb;
  FatbinEntry e;
  e.raw_kind = kEntryKindElf;
  e.kind = CodeKind::sass;
  e.arch = Arch{90, Suffix::none};
  e.stored_size = text.size();
  e.compression = Compression::zstd;
  e.compressed_size = static_cast<std::uint32_t>(text.size());
  e.uncompressed_size = 4096;
  e.payload = Bytes(reinterpret_cast<const std::byte*>(text.data()), text.size());
  fb.entries.push_back(e);
  o.fatbins.push_back(fb);
  JudgementStore store;
  const JudgedResult r = judged(store, o, device_for_cc({9, 0}), {}, false);
  CHECK(r.verdict.outcome == Outcome::fail);
  CHECK(r.verdict.cuda_error == kErrInvalidImage);
  CHECK(store.judgements.kept == 0);
  // Without an identity (bytes in memory, a file that just changed) nothing is looked up.
  o.identity.clear();
  o.fatbins.front().entries.front().compression = Compression::none;
  o.fatbins.front().entries.front().raw_kind = kEntryKindPtx;
  o.fatbins.front().entries.front().kind = CodeKind::ptx;
  judged(store, o, device_for_cc({9, 0}), {}, false);
  CHECK(store.judgements.kept == 0);
  CHECK(store.judgements.found == 0);
}

TEST_CASE("the results cache keeps judgements by producer and counts them", "[jit][results]") {
  TempDir d;
  const auto paths = inputs(d);
  auto open = [&](const std::string& producer) {
    std::string warning;
    auto c = ResultsCache::open(producer, warning, d.path);
    INFO(warning);
    REQUIRE(c != nullptr);
    return c;
  };
  auto c = open("archguard test commit 1");
  auto scan = scan_with(*c, paths.front());
  REQUIRE(scan);
  REQUIRE(scan->objects.size() == 1);
  const ObjectFatbins& o = scan->objects.front();
  const Device dev = device_for_cc({9, 0});
  const std::string want = everything(fresh(o, dev, {}, true));
  CHECK(everything(judged(*c, o, dev, {}, true)) == want);
  CHECK(c->counters().judgements_known == 0);
  CHECK(everything(judged(*c, o, dev, {}, true)) == want);
  CHECK(c->counters().judgements_known == 1);
  auto other = open("archguard test commit 2");
  CHECK(everything(judged(*other, o, dev, {}, true)) == want);
  CHECK(other->counters().judgements_known == 0);
}

TEST_CASE("an archive's merged members: judgement kept, another GPU judged from lists kept apart", "[jit][results]") {
  // Two members whose fatbins and PTX entries sit at the same offsets with the same headers but
  // define other kernels (same lengths), merged into one static library as check judges it.
  const std::string other =
      ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry _Z3subPf(\n.param .u64 p)\n{ ret; }\n"
      ".visible .entry _Z5shiftPf(\n.param .u64 p)\n{ ret; }\n";
  REQUIRE(other.size() == kPtx.size());
  const std::string archive = "file 1 2 3 4 5";
  std::vector<ObjectFatbins> members;
  for (const std::string* text : {&kPtx, &other}) {
    const std::string name = text == &kPtx ? "a.o" : "b.o";
    FatbinEntry e;
    e.offset = 0x100;
    e.raw_kind = kEntryKindPtx;
    e.kind = CodeKind::ptx;
    e.arch = Arch{90, Suffix::none};
    e.version = Version2{8, 0};
    e.stored_size = text->size();
    e.payload = Bytes(reinterpret_cast<const std::byte*>(text->data()), text->size());
    Fatbin fb;
    fb.offset = 0x40;
    fb.entries.push_back(e);
    ObjectFatbins m;
    m.path = "libk.a:" + name;
    m.archive = "libk.a";
    m.member = name;
    m.elf_type = 1;
    m.identity = archive + "\n" + std::to_string(members.size()) + " " + name;
    m.fatbins.push_back(fb);
    members.push_back(std::move(m));
  }
  REQUIRE(entry_fingerprint(members[0].fatbins[0].entries[0]) == entry_fingerprint(members[1].fatbins[0].entries[0]));
  const auto judged_objs = judged_objects(members);
  REQUIRE(judged_objs.size() == 1);
  const ObjectFatbins& lib = judged_objs[0].get();
  REQUIRE_FALSE(lib.identity.empty());
  TempDir d;
  std::string warning;
  auto c = ResultsCache::open("archguard test commit 1", warning, d.path);
  REQUIRE(c != nullptr);
  // On 8.0 and 7.5 neither member's sm_90 PTX loads: every kernel fails, by name.
  const Device ampere = device_for_cc({8, 0}), turing = device_for_cc({7, 5});
  const std::string want = everything(fresh(lib, ampere, {}, false));
  for (const char* k : {"_Z3addPf", "_Z5scalePf", "_Z3subPf", "_Z5shiftPf"}) CHECK(want.find(k) != std::string::npos);
  CHECK(everything(judged(*c, lib, ampere, {}, false)) == want);
  CHECK(c->counters().judgements_known == 0);
  CHECK(c->counters().misses == 2);
  CHECK(everything(judged(*c, lib, ampere, {}, false)) == want);  // read back
  CHECK(c->counters().judgements_known == 1);
  // Another GPU: judged anew from the kept lists, nothing decoded, each member's kernels its own.
  CHECK(everything(judged(*c, lib, turing, {}, false)) == everything(fresh(lib, turing, {}, false)));
  CHECK(c->counters().judgements_known == 1);
  CHECK(c->counters().hits == 2);
  CHECK(c->counters().misses == 2);
  // The archive changed (another identity): judged anew.
  std::vector<ObjectFatbins> changed = members;
  for (ObjectFatbins& m : changed) m.identity.replace(0, archive.size(), "file 1 2 3 4 6");
  const auto again = judged_objects(changed);
  CHECK(again[0].get().identity != lib.identity);
  CHECK(everything(judged(*c, again[0].get(), ampere, {}, false)) == want);
  CHECK(c->counters().judgements_known == 1);
  CHECK(c->counters().misses == 4);
}

TEST_CASE("images decoded on several threads (prefetch) give the judgement one thread gives", "[jit][results][prefetch]") {
  TempDir d;
  Device orin = device_for_cc({8, 7});
  orin.tegra = true;
  const std::vector<Device> devices = {device_for_cc({7, 0}), device_for_cc({9, 0}), orin, device_for_cc({12, 0})};
  std::uint64_t prefetched = 0;
  const std::vector<std::string> paths = inputs(d);
  for (const std::string& input : paths) {
    INFO(input);
    auto scan = scan_path(input);
    REQUIRE(scan);
    for (const ObjectFatbins& o : scan->objects) {
      if (o.fatbins.empty()) continue;
      for (bool all : {false, true}) {
        // One index for every GPU, as check and doctor share one: what an earlier GPU's judgement
        // decoded is not decoded again, what a later one asks more is prefetched then.
        KernelIndex index(nullptr, o);
        index.set_threads(4);
        for (const Device& dev : devices) {
          INFO("cc " << dev.cc.major << "." << dev.cc.minor << " tegra " << dev.tegra << " all " << all);
          CHECK(everything(judge_with_store(o, dev, {}, all, index)) == everything(fresh(o, dev, {}, all)));
        }
        prefetched += index.prefetched();
      }
    }
  }
  // The toolkit libraries have hundreds of images a judgement lists: the threads did decode them
  // (a prefetch that decoded nothing would pass the comparison above).
  if (paths.size() > 1) CHECK(prefetched > 100);
}

TEST_CASE("a prefetch releases the pages of the small payloads it decoded, pages they share included", "[jit][prefetch]") {
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::vector<const char*> libs = {"/usr/local/cuda/lib64/libcurand.so.10", "/usr/local/cuda/lib64/libcupti.so.13",
                                         "/usr/local/cuda/lib64/libcufft.so.12"};
  if (std::none_of(libs.begin(), libs.end(), [](const char* l) { return std::filesystem::exists(l); }))
    ARCHGUARD_SKIP("no toolkit library with many small images (libcurand, libcupti) in /usr/local/cuda/lib64");
  std::size_t checked = 0;
  for (const char* lib : libs) {
    if (!std::filesystem::exists(lib)) continue;
    INFO(lib);
    auto scan = scan_path(lib);
    REQUIRE(scan);
    const PayloadPages pages(std::span<const ScanReport>(&*scan, 1));
    for (const ObjectFatbins& o : scan->objects) {
      if (o.fatbins.empty()) continue;
      std::mutex m;
      std::vector<std::pair<std::uintptr_t, std::uintptr_t>> released;
      KernelIndex index(nullptr, o);
      index.set_threads(4);
      index.set_release([&](Bytes b) {
        {
          const std::lock_guard lock(m);
          released.emplace_back(reinterpret_cast<std::uintptr_t>(b.data()), reinterpret_cast<std::uintptr_t>(b.data() + b.size()));
        }
        pages.release(b);
      });
      (void)judge_with_store(o, device_for_cc({9, 0}), {}, true, index);
      REQUIRE(index.prefetched() > 0);
      // The payloads decoded (each released from its first byte once copied) of small images:
      // every page they touch was released, but a few: the first page of the first and the last
      // of the last (shared with what lies around them), and those of images decoded after the
      // prefetch, one by one (6 of libcurand's, 2 of libcupti's).
      auto covered = [&](std::uintptr_t p) {
        return std::any_of(released.begin(), released.end(), [&](const auto& r) { return r.first <= p && p + page <= r.second; });
      };
      std::set<std::uintptr_t> touched, uncovered;
      for (const Fatbin& fb : o.fatbins)
        for (const FatbinEntry& e : fb.entries) {
          const auto lo = reinterpret_cast<std::uintptr_t>(e.payload.data());
          if (e.payload.empty() || e.image_size() >= (std::uint64_t{1} << 20) ||
              std::none_of(released.begin(), released.end(), [&](const auto& r) { return r.first == lo; }))
            continue;
          for (std::uintptr_t p = lo / page * page; p < lo + e.payload.size(); p += page) {
            touched.insert(p);
            if (!covered(p)) uncovered.insert(p);
          }
        }
      INFO("pages touched " << touched.size() << ", not released " << uncovered.size());
      CHECK(uncovered.size() <= 8);  // without the trail: 55 of libcurand's 6,629, 35 of libcupti's 53
      checked += touched.size();
      // In few releases (each a system call, and a TLB shootdown on every core running the
      // process): a payload of kPayloadReleasedAlone or more alone, the smaller ones in runs of
      // 1 MiB of the file (and what the trail's end leaves). One release per small payload
      // before: 39 of libcurand's, thousands of libcufft's.
      const auto small_releases = std::count_if(released.begin(), released.end(),
                                                [](const auto& r) { return r.second - r.first < kPayloadReleasedAlone; });
      INFO("releases " << released.size() << ", of under 64 KiB " << small_releases);
      CHECK(small_releases <= 2);
    }
  }
  CHECK(checked > 100);
}
