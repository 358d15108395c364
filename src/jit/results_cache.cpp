// SPDX-License-Identifier: Apache-2.0
// The results cache (archguard/results_cache.hpp): kernel lists by image content, on the JIT
// cache's store.
#include <archguard/cache.hpp>
#include <archguard/results_cache.hpp>

#include "common/driver_env.hpp"

#include <cstdio>
#include <map>
#include <utility>

namespace archguard {
namespace {

// Bumped when what a record holds, or how the scan or list_kernels reads a file, changes.
// 4: kernel lists by fatbin and entry offset (an archive's members merged into one object have
// entries at the same offset).
constexpr std::string_view kFormat = "archguard-results/4";
// Record kinds: where the embedded-fatbin search found fatbins ("EMB1"), kernel lists ("KLS3"),
// what a scan read from a file ("FIL1"), an object's verdict and judgement on one GPU ("JDG1"), per-file values of a directory walk
// (its files without device code, doctor's step 2; "TRE1"), a verb's whole answer ("ANS1").
constexpr std::uint32_t kEmbeddedKind = 0x31424d45;
constexpr std::uint32_t kKernelListsKind = 0x33534c4b;
constexpr std::uint32_t kFileKind = 0x314c4946;
constexpr std::uint32_t kJudgementKind = 0x3147444a;
constexpr std::uint32_t kTreeKind = 0x31455254;
constexpr std::uint32_t kAnswerKind = 0x31534e41;
constexpr std::size_t kMaxWarnings = 4;

jit::Digest key_of(const std::string& producer, std::string_view what, const std::string& identity) {
  jit::Hasher h;
  h.add_field("format", kFormat);
  h.add_field("producer", producer);
  h.add_field("record", what);
  h.add_field("object", identity);
  return h.finish();
}

void put_u64(std::vector<std::byte>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

/// Reads u64 values from a record's bytes, in order; false once past the end.
struct Cursor {
  const ByteReader& r;
  std::uint64_t at = 0;
  bool ok = true;
  std::uint64_t u64() {
    auto v = r.u64(at, "record");
    if (!v) {
      ok = false;
      return 0;
    }
    at += 8;
    return *v;
  }
};

}  // namespace

Result<jit::CacheOptions> ResultsCache::options(const std::string& dir) {
  AG_TRY(auto env, jit::CacheOptions::from_environment());
  jit::CacheOptions o;
  o.disabled = env.disabled;
  o.dir = (dir.empty() ? env.dir : dir) + "/results";
  // A torn record is caught by its checksum and decoded again: no fsync (it is most of a
  // store's cost, and a run stores thousands).
  o.fsync = false;
  o.light_stores = true;
  o.max_bytes = kResultsCacheDefaultMaxBytes;
  if (const auto max = common::process_env("ARCHGUARD_RESULTS_CACHE_MAX_BYTES"); max && !max->empty()) {
    const auto v = parse_byte_size(*max);
    if (!v)
      return make_error(ErrorKind::usage, "ARCHGUARD_RESULTS_CACHE_MAX_BYTES: '" + *max +
                                              "' is not a size that fits in 64 bits (bytes, or with K, M, G or T)");
    if (*v == 0) o.disabled = true;  // a bound of nothing: no cache
    o.max_bytes = *v;
  }
  return o;
}

std::unique_ptr<ResultsCache> ResultsCache::open(std::string producer, std::string& warning, const std::string& dir) {
  warning.clear();
  auto opts = options(dir);
  if (!opts) {
    warning = "results cache not used: " + opts.message();
    return nullptr;
  }
  if (opts->disabled) return nullptr;
  const jit::CacheOptions& o = *opts;
  auto cache = jit::Cache::open(o);
  if (!cache) {
    warning = "results cache not used: " + cache.message();
    return nullptr;
  }
  std::unique_ptr<ResultsCache> rc(new ResultsCache());
  rc->producer_ = std::move(producer);
  rc->dir_ = o.dir;
  rc->cache_ = std::move(*cache);
  return rc;
}

ResultsCache::~ResultsCache() = default;

void ResultsCache::problem(std::string message) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (warnings_.size() < kMaxWarnings) warnings_.push_back(std::move(message));
  else ++more_warnings_;
}

bool ResultsCache::store(const jit::Digest& key, std::uint32_t kind, std::vector<std::pair<std::string, std::string>> names,
                         std::vector<std::byte> bytes) {
  jit::CacheRecord r;
  r.kind = kind;
  r.names = std::move(names);
  r.image = std::move(bytes);
  if (auto s = cache_->store(key, r, {}); !s) {
    problem(s.message());
    return false;
  }
  stores_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::optional<EmbeddedFinds> ResultsCache::find_embedded(const std::string& identity) {
  auto hit = cache_->lookup(key_of(producer_, "embedded", identity));
  if (!hit) {
    problem(hit.message());
    return std::nullopt;
  }
  if (!hit->has_value() || (*hit)->record.kind != kEmbeddedKind) return std::nullopt;
  const jit::CacheRecord& rec = (*hit)->record;
  const ByteReader r(rec.image, "results cache record");
  Cursor c{r};
  EmbeddedFinds out;
  for (const auto& [name, where] : rec.names) {
    EmbeddedFinds::Section sec;
    sec.name = name;
    unsigned long long offset = 0, size = 0;
    if (std::sscanf(where.c_str(), "%llu %llu", &offset, &size) != 2) return std::nullopt;
    sec.offset = offset;
    sec.size = size;
    const std::uint64_t n = c.u64();
    if (!c.ok || n > r.size() / 8) return std::nullopt;
    sec.fatbins.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i) sec.fatbins.push_back(c.u64());
    if (!c.ok) return std::nullopt;
    out.sections.push_back(std::move(sec));
  }
  const std::uint64_t answers = c.u64();
  if (!c.ok || answers > r.size() / 16) return std::nullopt;
  for (std::uint64_t i = 0; i < answers; ++i) {
    const std::uint64_t offset = c.u64(), answer = c.u64();
    if (!c.ok || answer > 1) return std::nullopt;
    out.no_kernels.emplace_back(offset, answer == 1);
  }
  if (c.at != r.size()) return std::nullopt;
  scans_known_.fetch_add(1, std::memory_order_relaxed);
  return out;
}

void ResultsCache::keep_embedded(const std::string& identity, const EmbeddedFinds& finds) {
  std::vector<std::pair<std::string, std::string>> names;
  std::vector<std::byte> bytes;
  for (const auto& sec : finds.sections) {
    names.emplace_back(sec.name, std::to_string(sec.offset) + ' ' + std::to_string(sec.size));
    put_u64(bytes, sec.fatbins.size());
    for (const std::uint64_t o : sec.fatbins) put_u64(bytes, o);
  }
  put_u64(bytes, finds.no_kernels.size());
  for (const auto& [offset, answer] : finds.no_kernels) {
    put_u64(bytes, offset);
    put_u64(bytes, answer ? 1 : 0);
  }
  store(key_of(producer_, "embedded", identity), kEmbeddedKind, std::move(names), std::move(bytes));
}

StoredKernelLists ResultsCache::find_kernels(const std::string& identity) {
  auto hit = cache_->lookup(key_of(producer_, "kernels", identity));
  if (!hit) {
    problem(hit.message());
    return {};
  }
  if (!hit->has_value() || (*hit)->record.kind != kKernelListsKind) return {};
  jit::CacheRecord& rec = (*hit)->record;
  const ByteReader r(rec.image, "results cache record");
  Cursor c{r};
  StoredKernelLists out;
  const std::uint64_t n = c.u64();
  if (!c.ok || n > r.size() / 40) return {};
  struct Ref {
    std::uint64_t fatbin, offset, first, count;
    std::string fingerprint;
  };
  std::vector<Ref> refs;
  refs.reserve(n);
  std::map<std::uint64_t, std::uint64_t> uses;  // first name of a list -> entries that share it
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t fatbin = c.u64(), offset = c.u64(), first = c.u64(), count = c.u64(), fp_size = c.u64();
    if (!c.ok || first > rec.names.size() || count > rec.names.size() - first) return {};
    auto fp = r.span(c.at, fp_size, "fingerprint");
    if (!fp) return {};
    c.at += fp_size;
    refs.push_back(Ref{fatbin, offset, first, count, std::string(reinterpret_cast<const char*>(fp->data()), fp->size())});
    ++uses[first];
  }
  if (c.at != r.size()) return {};
  for (Ref& ref : refs) {
    StoredKernels k;
    k.fingerprint = std::move(ref.fingerprint);
    k.kernels.reserve(ref.count);
    const bool last_use = --uses[ref.first] == 0;  // the names of a list used once more are moved
    for (std::uint64_t j = ref.first; j < ref.first + ref.count; ++j) {
      auto& [name, demangled] = rec.names[j];
      if (last_use) k.kernels.push_back(Kernel{std::move(name), std::move(demangled)});
      else k.kernels.push_back(Kernel{name, demangled});
    }
    out.emplace(StoredKernelsAt{ref.fatbin, ref.offset}, std::move(k));
  }
  return out;
}

void ResultsCache::keep_kernels(const std::string& identity, const StoredKernelLists& lists) {
  // The images of one fatbin mostly define the same kernels: each distinct list is written once.
  std::map<std::vector<std::string>, std::pair<std::uint64_t, std::uint64_t>> written;  // names -> (first, count)
  std::vector<std::pair<std::string, std::string>> names;
  std::vector<std::byte> bytes;
  put_u64(bytes, lists.size());
  for (const auto& [at, k] : lists) {
    std::vector<std::string> key;
    key.reserve(k.kernels.size());
    for (const Kernel& kn : k.kernels) key.push_back(kn.name);
    auto [it, fresh] = written.try_emplace(std::move(key), std::pair{std::uint64_t{names.size()}, std::uint64_t{k.kernels.size()}});
    if (fresh)
      for (const Kernel& kn : k.kernels) names.emplace_back(kn.name, kn.demangled);
    put_u64(bytes, at.first);   // the fatbin's position in the object
    put_u64(bytes, at.second);  // the entry's offset
    put_u64(bytes, it->second.first);
    put_u64(bytes, it->second.second);
    put_u64(bytes, k.fingerprint.size());
    for (const char ch : k.fingerprint) bytes.push_back(static_cast<std::byte>(ch));
  }
  store(key_of(producer_, "kernels", identity), kKernelListsKind, std::move(names), std::move(bytes));
}

std::optional<std::vector<std::byte>> ResultsCache::find_bytes(std::string_view what, std::uint32_t kind, const std::string& key,
                                                               std::atomic<std::uint64_t>& known) {
  auto hit = cache_->lookup(key_of(producer_, what, key));
  if (!hit) {
    problem(hit.message());
    return std::nullopt;
  }
  if (!hit->has_value() || (*hit)->record.kind != kind || !(*hit)->record.names.empty()) return std::nullopt;
  known.fetch_add(1, std::memory_order_relaxed);
  return std::move((*hit)->record.image);
}

std::optional<std::vector<std::byte>> ResultsCache::find_file(const std::string& key) {
  auto found = find_bytes("file", kFileKind, key, files_known_);
  if (found) scans_known_.fetch_add(1, std::memory_order_relaxed);
  return found;
}

void ResultsCache::keep_file(const std::string& key, std::vector<std::byte> facts) {
  store(key_of(producer_, "file", key), kFileKind, {}, std::move(facts));
}

std::optional<std::vector<std::byte>> ResultsCache::find_judgement(const std::string& key) {
  return find_bytes("judgement", kJudgementKind, key, judgements_known_);
}

void ResultsCache::keep_judgement(const std::string& key, std::vector<std::byte> record) {
  store(key_of(producer_, "judgement", key), kJudgementKind, {}, std::move(record));
}

std::optional<std::vector<std::byte>> ResultsCache::find_tree(const std::string& key) {
  return find_bytes("tree", kTreeKind, key, trees_known_);
}

void ResultsCache::keep_tree(const std::string& key, std::vector<std::byte> record) {
  store(key_of(producer_, "tree", key), kTreeKind, {}, std::move(record));
}

std::optional<std::vector<std::byte>> ResultsCache::find_answer(const std::string& key) {
  return find_bytes("answer", kAnswerKind, key, answers_known_);
}

void ResultsCache::keep_answer(const std::string& key, std::vector<std::byte> record) {
  store(key_of(producer_, "answer", key), kAnswerKind, {}, std::move(record));
}

void ResultsCache::count(std::uint64_t hits, std::uint64_t misses) {
  hits_.fetch_add(hits, std::memory_order_relaxed);
  misses_.fetch_add(misses, std::memory_order_relaxed);
}

ResultsCacheCounters ResultsCache::counters() const {
  return {hits_.load(), misses_.load(), stores_.load(), scans_known_.load(), files_known_.load(), judgements_known_.load(),
          trees_known_.load(), answers_known_.load()};
}

std::vector<std::string> ResultsCache::warnings() const {
  const std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out = warnings_;
  for (const auto& w : cache_->warnings()) out.push_back(w);
  if (more_warnings_ > 0) out.push_back(std::to_string(more_warnings_) + " more problems of the results cache");
  return out;
}

}  // namespace archguard
