// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// The results cache: the kernel lists of images decoded by earlier runs of `check` and
/// `doctor`, so that judging an unchanged environment again decodes nothing.
///
/// An entry is keyed by a SHA-256 of the image's fatbin entry header fields and its stored
/// payload bytes, and of the producer (the archguard version and commit that decoded it): a
/// changed file changes the key, whatever its name or time stamps say, and another build of
/// archguard does not read this one's entries. Only lists that decoded are kept (an error
/// names its file, and a damaged payload is found damaged again at once).
///
/// Stored with the JIT cache's store (archguard/cache.hpp) under its own root,
/// `<cache dir>/results` (ARCHGUARD_CACHE_DIR, XDG_CACHE_HOME or HOME as for the JIT cache), with
/// the same rules: owned by the user and not writable by group or others, files 0600, records
/// checksummed (a damaged entry is evicted and decoded again), bounded by
/// ARCHGUARD_RESULTS_CACHE_MAX_BYTES (default 256 MiB; least recently used evicted first).
/// ARCHGUARD_CACHE_DISABLE=1, or `--no-cache`, turns it off. The cache never fails a run: a
/// store that cannot be opened, read or written is a warning, and the image is decoded.
#include <archguard/fatbin.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace archguard::jit {
class Cache;
struct CacheOptions;
}

namespace archguard {

/// The smallest image the results cache keeps (64 KiB). Measured on the toolkit's libcurand:
/// images of 64 KiB and more are a fifth of the images and 99% of the bytes to decode; a store
/// costs a file (0.2-0.7 ms), more than decoding a small image.
inline constexpr std::uint64_t kResultsCacheMinImageBytes = std::uint64_t{64} << 10;

struct ResultsCacheCounters {
  std::uint64_t hits = 0, misses = 0, stores = 0;
};

class ResultsCache final : public KernelStore {
 public:
  /// Opens the cache for `producer` (e.g. "archguard 0.1.0 (abc1234)"); `dir` overrides the
  /// location (empty: from the environment). Null when it is turned off; null with a warning
  /// in `warning` when it cannot be used.
  static std::unique_ptr<ResultsCache> open(std::string producer, std::string& warning, const std::string& dir = {});
  /// The store options of the results cache under `dir` (empty: the cache dir from the
  /// environment), as open() uses them and `archguard cache --results` maintains them. `disabled`
  /// is set for ARCHGUARD_CACHE_DISABLE=1 and for a bound of 0; a malformed bound is an error.
  static Result<jit::CacheOptions> options(const std::string& dir = {});
  ~ResultsCache() override;
  ResultsCache(const ResultsCache&) = delete;
  ResultsCache& operator=(const ResultsCache&) = delete;

  std::optional<std::vector<Kernel>> find(const FatbinEntry& entry) override;
  void keep(const FatbinEntry& entry, const std::vector<Kernel>& kernels) override;

  /// Images smaller than this are neither looked up nor kept: decoding them costs less than a
  /// record's file (default kResultsCacheMinImageBytes).
  void set_min_image_bytes(std::uint64_t bytes) { min_image_bytes_ = bytes; }

  ResultsCacheCounters counters() const;
  /// Problems met while reading or writing (at most a few, then a count).
  std::vector<std::string> warnings() const;
  const std::string& dir() const { return dir_; }

 private:
  ResultsCache() = default;
  void problem(std::string message);
  std::string producer_;
  std::string dir_;
  std::uint64_t min_image_bytes_ = kResultsCacheMinImageBytes;
  std::unique_ptr<jit::Cache> cache_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, stores_{0};
  mutable std::mutex mu_;
  std::vector<std::string> warnings_;
  std::uint64_t more_warnings_ = 0;
};

/// The default bound of the results cache (256 MiB).
inline constexpr std::uint64_t kResultsCacheDefaultMaxBytes = std::uint64_t{256} << 20;

}  // namespace archguard
