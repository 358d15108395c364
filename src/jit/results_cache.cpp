// SPDX-License-Identifier: Apache-2.0
// The results cache (archguard/results_cache.hpp): kernel lists by image content, on the JIT
// cache's store.
#include <archguard/cache.hpp>
#include <archguard/results_cache.hpp>

#include "common/driver_env.hpp"

#include <utility>

namespace archguard {
namespace {

// Bumped when what a record holds, or how list_kernels reads an image, changes.
constexpr std::string_view kFormat = "archguard-results/1 kernels";
// The record kind of a kernel list ("KLS1").
constexpr std::uint32_t kKernelListKind = 0x314c534b;
constexpr std::size_t kMaxWarnings = 4;

jit::Digest key_of(const std::string& producer, const FatbinEntry& e) {
  jit::Hasher h;
  h.add_field("format", kFormat);
  h.add_field("producer", producer);
  const std::string header = std::to_string(e.raw_kind) + ' ' + std::to_string(e.arch.sm) + ' ' +
                             std::to_string(static_cast<unsigned>(e.arch.suffix)) + ' ' + std::to_string(e.flags) + ' ' +
                             std::to_string(static_cast<unsigned>(e.compression)) + ' ' + std::to_string(e.compressed_size) + ' ' +
                             std::to_string(e.uncompressed_size) + ' ' + std::to_string(e.stored_size) + ' ' +
                             std::to_string(e.payload.size());
  h.add_field("header", header);
  h.add(e.payload);
  return h.finish();
}

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

std::optional<std::vector<Kernel>> ResultsCache::find(const FatbinEntry& entry) {
  if (entry.image_size() < min_image_bytes_) return std::nullopt;
  auto hit = cache_->lookup(key_of(producer_, entry));
  if (!hit) {
    problem(hit.message());
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  if (!hit->has_value() || (*hit)->record.kind != kKernelListKind) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  std::vector<Kernel> kernels;
  kernels.reserve((*hit)->record.names.size());
  for (auto& [name, demangled] : (*hit)->record.names) kernels.push_back(Kernel{std::move(name), std::move(demangled)});
  hits_.fetch_add(1, std::memory_order_relaxed);
  return kernels;
}

void ResultsCache::keep(const FatbinEntry& entry, const std::vector<Kernel>& kernels) {
  if (entry.image_size() < min_image_bytes_) return;
  jit::CacheRecord r;
  r.kind = kKernelListKind;
  r.names.reserve(kernels.size());
  for (const Kernel& k : kernels) r.names.emplace_back(k.name, k.demangled);
  if (auto s = cache_->store(key_of(producer_, entry), r, {}); !s) {
    problem(s.message());
    return;
  }
  stores_.fetch_add(1, std::memory_order_relaxed);
}

ResultsCacheCounters ResultsCache::counters() const {
  return {hits_.load(), misses_.load(), stores_.load()};
}

std::vector<std::string> ResultsCache::warnings() const {
  const std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out = warnings_;
  for (const auto& w : cache_->warnings()) out.push_back(w);
  if (more_warnings_ > 0) out.push_back(std::to_string(more_warnings_) + " more problems of the results cache");
  return out;
}

}  // namespace archguard
