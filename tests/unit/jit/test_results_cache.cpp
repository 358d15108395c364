// SPDX-License-Identifier: Apache-2.0
// The results cache (archguard/results_cache.hpp): what was learnt about an object (where its
// embedded fatbins are, the kernel lists of its images) found again by the object's identity and
// the producer; damaged or foreign records are misses; a cache that cannot be used is a warning,
// never a failure; KernelIndex asks it before decoding, checks each entry's fingerprint, and
// keeps only what decoded; a file that is one object is read again from its facts (every header
// field, the payloads in its own bytes), and facts that are cut short or altered are not trusted
// beyond the file's bytes.
#include <archguard/cache.hpp>
#include <archguard/container.hpp>
#include <archguard/coverage.hpp>
#include <archguard/results_cache.hpp>

#include <catch2/catch.hpp>

#include <archive.h>
#include <archive_entry.h>

#include "jit_test_util.hpp"
#include "memory_store.hpp"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <thread>
#include <tuple>

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

/// An object of `identity` with one fatbin holding `entries` (a KernelIndex keeps lists only for
/// entries of its object).
ObjectFatbins object_with(const std::string& identity, std::vector<FatbinEntry> entries = {}) {
  ObjectFatbins o;
  o.path = "lib.so";
  o.identity = identity;
  Fatbin fb;
  fb.entries = std::move(entries);
  o.fatbins.push_back(std::move(fb));
  return o;
}

/// The kernels KernelIndex gives for every entry of `o`, as "fatbin/entry: names" lines.
std::string listed(KernelIndex& index, const ObjectFatbins& o) {
  std::string s;
  for (std::size_t f = 0; f < o.fatbins.size(); ++f)
    for (std::size_t e = 0; e < o.fatbins[f].entries.size(); ++e) {
      s += std::to_string(f) + "/" + std::to_string(e) + ":";
      const auto& l = index.of(o.fatbins[f].entries[e], o.path);
      if (!l) s += " error";
      else
        for (const Kernel& k : *l) s += " " + k.name;
      s += "\n";
    }
  return s;
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
  lists[{0, 0x100}] = StoredKernels{"fp a", two};
  lists[{0, 0x900}] = StoredKernels{"fp b", two};
  lists[{0, 0x1200}] = StoredKernels{"fp c", {{"_Z1fv", "f()"}}};
  lists[{1, 0x2000}] = StoredKernels{"fp d", {}};
  // The same offset in another fatbin (another member of a merged archive): its own list.
  lists[{2, 0x100}] = StoredKernels{"fp a", {{"_Z3subPf", "sub(float*)"}}};
  c->keep_kernels("object", lists);
  const auto back = c->find_kernels("object");
  REQUIRE(back.size() == 5);
  CHECK(back.at({0, 0x900}).fingerprint == "fp b");
  REQUIRE(back.at({0, 0x900}).kernels.size() == 2);
  CHECK(back.at({0, 0x900}).kernels[1].demangled == "scale(float*)");
  CHECK(back.at({0, 0x1200}).kernels.front().name == "_Z1fv");
  CHECK(back.at({1, 0x2000}).kernels.empty());
  REQUIRE(back.at({0, 0x100}).kernels.size() == 2);
  REQUIRE(back.at({2, 0x100}).kernels.size() == 1);
  CHECK(back.at({2, 0x100}).kernels.front().name == "_Z3subPf");
  CHECK(back.count({1, 0x100}) == 0);
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
  const ObjectFatbins obj = object_with("file 1 2 3 4 5", {a.entry, garbage.entry});
  {
    const FatbinEntry stray = a.entry;  // outlives the index, which flushes what it asked
    KernelIndex index(c.get(), obj);
    const auto& listed = index.of(obj.fatbins[0].entries[0], "lib.so");
    REQUIRE(listed);
    CHECK(listed->size() == 2);
    CHECK_FALSE(index.of(obj.fatbins[0].entries[1], "lib.so"));
    // An entry that is not the object's (a copy of one) is decoded, never kept.
    REQUIRE(index.of(stray, "lib.so"));
  }  // flushed: one record with a's list, none for garbage nor the stray entry
  CHECK(c->counters().misses == 2);
  auto kept = c->find_kernels("file 1 2 3 4 5");
  REQUIRE(kept.size() == 1);
  CHECK(kept.count({0, 0x100}) == 1);
  {
    // Found again without decoding: the payload now says something else, the list is the kept one.
    PtxImage changed(std::string(kPtx.size(), ' '), 0x100);
    const ObjectFatbins again = object_with("file 1 2 3 4 5", {changed.entry});
    KernelIndex index(c.get(), again);
    const auto& listed = index.of(again.fatbins[0].entries[0], "lib.so");
    REQUIRE(listed);
    CHECK(listed->size() == 2);
    CHECK(c->counters().hits == 0);  // counted when the index is flushed
    index.flush();
    CHECK(c->counters().hits == 1);
  }
  {
    // Another fingerprint at the same offset (another size): decoded again.
    PtxImage other(kPtx + "\n.visible .entry _Z1gv()\n{ ret; }\n", 0x100);
    const ObjectFatbins again = object_with("file 1 2 3 4 5", {other.entry});
    KernelIndex index(c.get(), again);
    const auto& listed = index.of(again.fatbins[0].entries[0], "lib.so");
    REQUIRE(listed);
    CHECK(listed->size() == 3);
  }
  CHECK(c->counters().misses == 3);
  {
    // The same entry in another fatbin of the object (its position another): not the kept one.
    PtxImage changed(std::string(kPtx.size(), ' '), 0x100);
    ObjectFatbins again = object_with("file 1 2 3 4 5");
    again.fatbins.push_back(object_with("", {changed.entry}).fatbins[0]);
    KernelIndex index(c.get(), again);
    const auto& listed = index.of(again.fatbins[1].entries[0], "lib.so");
    REQUIRE(listed);
    CHECK(listed->empty());
  }
  CHECK(c->counters().misses == 4);
  {
    // An object without an identity (bytes in memory, a file that just changed): never looked up.
    PtxImage changed(std::string(kPtx.size(), ' '), 0x100);
    const ObjectFatbins anonymous = object_with("", {changed.entry});
    KernelIndex index(c.get(), anonymous);
    const auto& listed = index.of(anonymous.fatbins[0].entries[0], "lib.so");
    REQUIRE(listed);
    CHECK(listed->empty());
    index.flush();
    CHECK(c->counters().misses == 5);    // counted as decoded
    CHECK(c->find_kernels("").empty());  // and never kept
  }
}

TEST_CASE("the kernel lists of an archive's merged members are kept apart, entries at the same offset too", "[jit][results]") {
  // Two members whose fatbins and entries sit at the same offsets with the same headers (same
  // sizes, same fingerprints) but define other kernels: merged into one object, each entry's
  // list is its own, decoded once and found again for each.
  const std::string sub =
      ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry _Z3subPf(\n.param .u64 p)\n{ ret; }\n"
      ".visible .entry _Z5shiftPf(\n.param .u64 p)\n{ ret; }\n";
  REQUIRE(sub.size() == kPtx.size());
  PtxImage a(kPtx, 0x100), b(sub, 0x100);
  REQUIRE(entry_fingerprint(a.entry) == entry_fingerprint(b.entry));
  const std::string archive = "file 1 2 3 4 5";
  std::vector<ObjectFatbins> members;
  for (const auto& [ordinal, name, entry] : {std::tuple{0, "a.o", a.entry}, std::tuple{1, "b.o", b.entry}}) {
    ObjectFatbins m = object_with(archive + "\n" + std::to_string(ordinal) + " " + name, {entry});
    m.path = std::string("libk.a:") + name;
    m.archive = "libk.a";
    m.member = name;
    m.elf_type = 1;
    m.fatbins[0].offset = 0x40;
    members.push_back(std::move(m));
  }
  const auto judged = judged_objects(members);
  REQUIRE(judged.size() == 1);
  REQUIRE(judged[0].merged);
  const ObjectFatbins& lib = judged[0].get();
  REQUIRE_FALSE(lib.identity.empty());
  const std::string want = "0/0: _Z3addPf _Z5scalePf\n1/0: _Z3subPf _Z5shiftPf\n";
  TempDir d;
  auto c = open_in(d);
  {
    KernelIndex index(c.get(), lib);
    CHECK(listed(index, lib) == want);
  }
  CHECK(c->counters().misses == 2);
  {
    // Found again: each entry its own list, nothing decoded.
    KernelIndex index(c.get(), lib);
    CHECK(listed(index, lib) == want);
  }
  CHECK(c->counters().hits == 2);
  CHECK(c->counters().misses == 2);
  // The members' own records are not the merged object's: a member read alone decodes.
  {
    KernelIndex index(c.get(), members[1]);
    CHECK(listed(index, members[1]) == "0/0: _Z3subPf _Z5shiftPf\n");
  }
  CHECK(c->counters().misses == 3);
}

namespace {

/// A file that changed in the last two seconds has no identity yet: nothing of it is kept.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(2200)); }

/// A PTX file, k.ptx in `d`, old enough to have an identity.
std::string settled_ptx(const TempDir& d) {
  const std::string ptx = d.path + "/k.ptx";
  std::ofstream(ptx) << kPtx;
  settle();
  return ptx;
}

/// Every field of every object, fatbin and entry of a report, the payloads by content.
std::string everything(const ScanReport& r) {
  std::string s;
  auto add = [&s](const auto&... v) { ((s += std::string(v) + " "), ...); };
  auto num = [](std::uint64_t v) { return std::to_string(v); };
  for (const auto& k : r.skipped) add("skipped", k, "\n");
  for (const ObjectFatbins& o : r.objects) {
    add("object", o.path, o.archive, o.member, num(o.elf_type), num(o.machine), num(o.pe), num(o.pie), o.identity, "\n");
    for (const Fatbin& fb : o.fatbins) {
      add(" fatbin", num(fb.index), num(fb.offset), num(fb.version), num(fb.size), to_string(fb.section), fb.section_name,
          fb.translation_unit, num(fb.linked), num(fb.device_link), "\n");
      for (const FatbinEntry& e : fb.entries)
        add("  entry", num(e.index), num(e.offset), num(e.raw_kind), nvcc_name(e.arch, e.kind), num(e.version.major),
            num(e.version.minor), num(e.header_size), num(e.stored_size), num(e.compressed_size), num(e.uncompressed_size),
            to_string(e.compression), num(e.flags), num(e.debug), e.identifier, e.options, num(e.extension.size()),
            num(e.payload.size()), jit::to_hex(jit::sha256(e.payload)), "\n");
    }
  }
  return s;
}

using FileFactsStore = test::MemoryStore;

/// A static library (ar) of `members`, each (name, bytes), as `ar rc` writes it.
std::string ar_of(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out = "!<arch>\n";
  for (const auto& [name, bytes] : members) {
    char header[61];
    std::snprintf(header, sizeof header, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", (name + "/").c_str(), "0", "0", "0", "644", bytes.size());
    out.append(header, 60);
    out += bytes;
    if (bytes.size() % 2 != 0) out += '\n';
  }
  return out;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("a file read again from its facts gives every field, payloads in its own bytes", "[jit][results]") {
  TempDir d;
  const std::string ptx = settled_ptx(d);
  std::vector<std::string> inputs = {ptx, d.path};
  // A toolkit library, where there is one: fatbins in .nv_fatbin and in data sections.
  for (const char* lib : {"/usr/local/cuda/lib64/libcurand.so.10", "/usr/local/cuda/lib64/libcupti.so.13"})
    if (std::filesystem::exists(lib)) inputs.push_back(lib);
  for (const std::string& input : inputs) {
    INFO(input);
    FileFactsStore store;
    ScanOptions o;
    o.facts = &store;
    auto first = scan_path(input, o);
    REQUIRE(first);
    REQUIRE(first->errors.empty());
    CHECK(store.files.kept == 1);
    auto again = scan_path(input, o);
    REQUIRE(again);
    CHECK(store.files.found == 1);
    CHECK(store.files.kept == 1);  // found, not kept again
    CHECK(everything(*again) == everything(*first));
    // The payloads point into the bytes of this reading, kept alive by its storage.
    for (const ObjectFatbins& obj : again->objects)
      for (const Fatbin& fb : obj.fatbins)
        for (const FatbinEntry& e : fb.entries) {
          bool inside = false;
          for (const auto& st : again->storage)
            inside = inside || (e.payload.data() >= st->bytes().data() &&
                                e.payload.data() + e.payload.size() <= st->bytes().data() + st->bytes().size());
          CHECK(inside);
        }
    // Other options read the file otherwise: another key, not found.
    ScanOptions standard = o;
    standard.embedded = false;
    REQUIRE(scan_path(input, standard));
    CHECK(store.files.found == 1);
    CHECK(store.files.kept == 2);
  }
}

/// A ustar archive of `members`, each (name, bytes), as libarchive writes it.
std::string tar_of(const std::vector<std::pair<std::string, std::string>>& members) {
  std::vector<char> buf(std::size_t{1} << 20);
  std::size_t used = 0;
  archive* a = archive_write_new();
  archive_write_set_format_ustar(a);
  archive_write_open_memory(a, buf.data(), buf.size(), &used);
  for (const auto& [name, bytes] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(bytes.size()));
    archive_write_header(a, e);
    archive_write_data(a, bytes.data(), bytes.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}

TEST_CASE("members stored in a mapped ar or tar are read in place, as a copy of them reads", "[fatbin][archive]") {
  TempDir d;
  const std::string ptx = file_text(settled_ptx(d)) + "// " + std::string(300, 'c') + "\n";  // classified on its head
  std::string macho = "\xfe\xed\xfa\xcf";                                                    // a mach-o file: skipped with a note
  macho.resize(300, '\0');
  const std::vector<std::pair<std::string, std::string>> members = {
      {"notes.txt", std::string(5000, 'n')}, {"k.ptx", ptx}, {"tiny.txt", "x"}, {"mac.o", macho}, {"again.ptx", ptx}};
  std::string cut = ar_of(members);
  cut.resize(cut.size() - 100);  // the last member's header claims more than the file holds
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"lib.a", ar_of(members)}, {"kernels.tar", tar_of(members)}, {"cut.a", cut}, {"nested.tar", tar_of({{"lib.a", ar_of(members)}})}};
  for (const auto& [name, bytes] : inputs) {
    INFO(name);
    const std::string path = d.path + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    auto in_place = scan_path(path);  // mapped: its members are views of the mapping
    REQUIRE(in_place);
    const std::vector<std::byte> copy(reinterpret_cast<const std::byte*>(bytes.data()),
                                      reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
    auto copied = scan_bytes(Bytes(copy), path);  // no storage to view: every member copied
    REQUIRE(copied);
    CHECK(everything(*in_place) == everything(*copied));
    CHECK(in_place->errors == copied->errors);
    CHECK(in_place->skipped.size() == 1);  // mac.o
    REQUIRE(in_place->objects.size() == (name == "cut.a" ? 1u : 2u));
    // In place, each payload lies in the mapping of the file itself; a copy's, in memory of
    // the process's own (/proc/self/maps names the file a range maps).
    auto mapped_from = [](const void* p) {
      std::ifstream maps("/proc/self/maps");
      for (std::string line; std::getline(maps, line);) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2) continue;
        const auto at = reinterpret_cast<std::uintptr_t>(p);
        if (at < lo || at >= hi) continue;
        const std::size_t slash = line.find('/');
        return slash == std::string::npos ? std::string() : line.substr(slash);
      }
      return std::string();
    };
    for (const ScanReport* r : {&*in_place, &*copied})
      for (const ObjectFatbins& o : r->objects)
        for (const Fatbin& fb : o.fatbins)
          for (const FatbinEntry& e : fb.entries)
            CHECK((mapped_from(e.payload.data()) == std::filesystem::canonical(path).string()) == (r == &*in_place));
  }
}

TEST_CASE("a file's facts cut short or altered are read anew or decoded within bounds", "[jit][results]") {
  TempDir d;
  const std::string ptx = settled_ptx(d);
  FileFactsStore store;
  ScanOptions o;
  o.facts = &store;
  auto first = scan_path(ptx, o);
  REQUIRE(first);
  const std::string want = everything(*first);
  REQUIRE(store.files.records.size() == 1);
  const std::size_t size = store.files.records.begin()->second.size();
  REQUIRE(size > 20);
  // Cut short anywhere: not used, the file read again, the same result.
  for (std::size_t keep = 0; keep < size; ++keep) {
    store.files.edit = [keep](std::vector<std::byte>& b) { b.resize(keep); };
    auto r = scan_path(ptx, o);
    REQUIRE(r);
    CHECK(everything(*r) == want);
  }
  // Any byte altered: whatever decodes stays inside the file (no payload outside its bytes).
  for (std::size_t at = 0; at < size; ++at) {
    store.files.edit = [at](std::vector<std::byte>& b) { b[at] ^= std::byte{0xff}; };
    auto r = scan_path(ptx, o);
    REQUIRE(r);
    for (const ObjectFatbins& obj : r->objects)
      for (const Fatbin& fb : obj.fatbins)
        for (const FatbinEntry& e : fb.entries) CHECK(e.payload.size() <= kPtx.size());
  }
}

TEST_CASE("the results cache keeps a file's facts by producer and counts them", "[jit][results]") {
  TempDir d;
  const std::string ptx = settled_ptx(d);
  auto c = open_in(d);
  ScanOptions o;
  o.facts = c.get();
  auto first = scan_path(ptx, o);
  REQUIRE(first);
  CHECK(c->counters().files_known == 0);
  auto again = scan_path(ptx, o);
  REQUIRE(again);
  CHECK(everything(*again) == everything(*first));
  CHECK(c->counters().files_known == 1);
  auto other = open_in(d, "archguard test commit 2");
  o.facts = other.get();
  REQUIRE(scan_path(ptx, o));
  CHECK(other->counters().files_known == 0);
}

TEST_CASE("a directory walk opens again only the files that may hold device code or changed", "[jit][results]") {
  TempDir d;
  const std::string dir = d.path + "/tree";
  std::filesystem::create_directories(dir + "/sub");
  std::ofstream(dir + "/k.ptx") << kPtx;
  std::ofstream(dir + "/notes.txt") << "no device code here\n";
  std::ofstream(dir + "/sub/empty.py");
  std::filesystem::copy_file("/bin/true", dir + "/sub/host-only");  // an ELF file without fatbins
  settle();
  FileFactsStore store;
  ScanOptions o;
  o.facts = &store;
  auto first = scan_path(dir, o);
  REQUIRE(first);
  CHECK(first->files_read == 4);
  CHECK(store.trees.kept == 1);
  CHECK(store.files.asked == 2);  // the PTX file and the ELF file
  // Again: the same report, the text, empty and host-only files not opened (only the PTX file's
  // facts are asked for), and nothing kept again.
  auto again = scan_path(dir, o);
  REQUIRE(again);
  CHECK(everything(*again) == everything(*first));
  CHECK(again->files_read == first->files_read);
  CHECK(store.trees.found == 1);
  CHECK(store.files.asked == 3);
  CHECK(store.trees.kept == 1);
  // A record cut short or altered is not used: every file is read again, the same report.
  for (auto edit : std::vector<std::function<void(std::vector<std::byte>&)>>{
           [](std::vector<std::byte>& b) { b.resize(b.size() / 2); }, [](std::vector<std::byte>& b) { b[0] ^= std::byte{1}; },
           [](std::vector<std::byte>& b) { std::swap(b[b.size() - 1], b[b.size() - 17]); }}) {
    store.trees.edit = edit;
    const std::size_t asked = store.files.asked;
    auto r = scan_path(dir, o);
    REQUIRE(r);
    CHECK(everything(*r) == everything(*first));
    CHECK(store.files.asked >= asked + 1);
  }
  store.trees.edit = nullptr;
  // The text file becomes a PTX file (another identity: its change time moved): it is read.
  std::ofstream(dir + "/notes.txt") << kPtx;
  settle();
  auto changed = scan_path(dir, o);
  REQUIRE(changed);
  CHECK(changed->objects.size() == first->objects.size() + 1);
  CHECK(std::any_of(changed->objects.begin(), changed->objects.end(),
                    [&](const ObjectFatbins& obj) { return obj.path == dir + "/notes.txt" && !obj.fatbins.empty(); }));
  // Handed over file by file (ScanOptions::each_file), the files known to hold none skipped:
  // the same objects, in the same order, and the same counts.
  {
    ScanOptions streamed = o;
    ScanReport parts;
    streamed.each_file = [&parts](ScanReport& part) {
      for (auto& obj : part.objects) parts.objects.push_back(std::move(obj));
      for (auto& st : part.storage) parts.storage.push_back(std::move(st));
    };
    auto r = scan_path(dir, streamed);
    REQUIRE(r);
    CHECK(r->objects.empty());
    CHECK(r->storage.empty());
    auto whole = scan_path(dir, o);
    REQUIRE(whole);
    parts.input = r->input;
    parts.directory = r->directory;
    parts.files_read = r->files_read;
    parts.errors = r->errors;
    parts.skipped = r->skipped;
    CHECK(everything(parts) == everything(*whole));
  }
  // Without a store nothing is kept or skipped: the same report as with it.
  ScanOptions plain;
  auto bare = scan_path(dir, plain);
  REQUIRE(bare);
  auto cached = scan_path(dir, o);
  REQUIRE(cached);
  CHECK(bare->files_read == cached->files_read);
  CHECK(bare->objects.size() == cached->objects.size());
}

TEST_CASE("a directory handed over file by file reads no further ahead than it is told", "[jit][results]") {
  // Twelve files with device code, four threads, two files ahead: while the first file is being
  // handed over (the callback holds it), no file past the second is opened: the facts of only
  // two are asked for. Without the bound all twelve would be read meanwhile.
  TempDir d;
  const std::string dir = d.path + "/ahead";
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 12; ++i) std::ofstream(dir + "/k" + std::to_string(10 + i) + ".ptx") << kPtx;
  settle();
  FileFactsStore store;
  ScanOptions o;
  o.facts = &store;
  o.threads = 4;
  o.stream_ahead = 2;
  std::vector<std::size_t> asked_while_first;
  std::vector<std::string> order;
  o.each_file = [&](ScanReport& part) {
    if (order.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const std::lock_guard lock(store.files.mutex);
      asked_while_first.push_back(store.files.asked);
    }
    order.push_back(part.input);
  };
  auto r = scan_path(dir, o);
  REQUIRE(r);
  REQUIRE(asked_while_first.size() == 1);
  CHECK(asked_while_first.front() <= 2);
  REQUIRE(order.size() == 12);
  CHECK(std::is_sorted(order.begin(), order.end()));
  CHECK(store.files.asked == 12);
}

TEST_CASE("a static library of host objects is read again from its facts, not member by member", "[jit][results]") {
  TempDir d;
  const std::string dir = d.path + "/tree";
  std::filesystem::create_directories(dir);
  // Two host objects (ELF files without fatbins: listed, as cuobjdump lists every member) and a
  // text member.
  const std::string host = file_text("/bin/true");
  REQUIRE(!host.empty());
  std::ofstream(dir + "/libhost.a", std::ios::binary) << ar_of({{"a.o", host}, {"notes.txt", "text\n"}, {"b.o", host}});
  std::ofstream(dir + "/k.ptx") << kPtx;
  settle();
  for (const std::string& input : {dir, dir + "/libhost.a"}) {
    INFO(input);
    FileFactsStore store;
    ScanOptions o;
    o.facts = &store;
    auto first = scan_path(input, o);
    REQUIRE(first);
    REQUIRE(first->errors.empty());
    const auto members = std::count_if(first->objects.begin(), first->objects.end(),
                                       [](const ObjectFatbins& obj) { return obj.archive.ends_with("libhost.a") && obj.fatbins.empty(); });
    CHECK(members == 2);
    const std::size_t kept = store.files.kept;
    CHECK(kept == (input == dir ? 2u : 1u));  // the library's facts (and the PTX file's)
    auto again = scan_path(input, o);
    REQUIRE(again);
    CHECK(everything(*again) == everything(*first));
    CHECK(again->files_read == first->files_read);
    CHECK(store.files.found == kept);  // the library's facts among them
    CHECK(store.files.kept == kept);
    // Cut short or altered: read anew, the same report.
    const std::size_t found = store.files.found;
    for (auto edit : std::vector<std::function<void(std::vector<std::byte>&)>>{
             [](std::vector<std::byte>& b) { b.resize(b.size() / 2); }, [](std::vector<std::byte>& b) { b.back() ^= std::byte{1}; }}) {
      store.files.edit = edit;
      auto r = scan_path(input, o);
      REQUIRE(r);
      CHECK(everything(*r) == everything(*first));
    }
    CHECK(store.files.found > found);
    store.files.edit = nullptr;
    // Other inflate budgets read an archive otherwise: another key.
    ScanOptions tighter = o;
    tighter.budget.per_input = std::uint64_t{1} << 20;
    const std::size_t asked = store.files.found;
    REQUIRE(scan_path(input, tighter));
    CHECK(store.files.found == asked);
  }
}

TEST_CASE("an archive member with device code is never kept as facts", "[jit][results]") {
  TempDir d;
  const std::string lib = d.path + "/libdev.a";
  // A PTX file as a member: device code, its payload copied out of the archive.
  std::ofstream(lib, std::ios::binary) << ar_of({{"k.ptx", kPtx}});
  settle();
  FileFactsStore store;
  ScanOptions o;
  o.facts = &store;
  auto first = scan_path(lib, o);
  REQUIRE(first);
  REQUIRE(first->objects.size() == 1);
  CHECK(!first->objects.front().fatbins.empty());
  CHECK(store.files.kept == 0);
  auto again = scan_path(lib, o);
  REQUIRE(again);
  CHECK(everything(*again) == everything(*first));
}
