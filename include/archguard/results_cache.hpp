// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// The results cache: what earlier runs of `check` and `doctor` learnt about each object they
/// read, so that judging an unchanged environment again neither searches nor decodes.
///
/// Four records per object, keyed by a SHA-256 of the object's identity (ObjectFatbins::identity:
/// the file's device, inode, size, modification and change times with nanoseconds, none when it
/// changed in the last two seconds; and the archive member, or for an archive's members merged
/// into one static library the members taken, see merged_identity in archguard/coverage.hpp)
/// and of the producer (the archguard version and commit): where the embedded-fatbin search
/// found fatbins (EmbeddedFinds), the kernel lists of its images, each by its fatbin's position
/// and its entry's offset with the entry's fingerprint, and, for a file that is one object (an
/// ELF file, a cubin, a fatbin file), what the scan read from it
/// (FactsStore::find_file: every header field, so that a scan of it parses nothing), and its
/// verdict and judgement on each GPU and settings it was judged for (FactsStore::find_judgement,
/// keyed by how the object was read too, so that a second run neither selects nor lists); and
/// per directory walked, the files found to hold no device code (by their identities), which a
/// second walk does not open. A
/// changed file has another identity (its change time moves whatever else is kept), and another
/// build of archguard reads none of this one's records. Only lists that decoded are kept.
///
/// Stored with the JIT cache's store (archguard/cache.hpp) under its own root,
/// `<cache dir>/results` (ARCHGUARD_CACHE_DIR, XDG_CACHE_HOME or HOME as for the JIT cache), with
/// the same rules: owned by the user and not writable by group or others, files 0600, records
/// checksummed (a damaged record is evicted, and the object read and decoded again), bounded by
/// ARCHGUARD_RESULTS_CACHE_MAX_BYTES (default 256 MiB; least recently used evicted first).
/// ARCHGUARD_CACHE_DISABLE=1, or `--no-cache`, turns it off. The cache never fails a run: a
/// store that cannot be opened, read or written is a warning, and the object is read again.
#include <archguard/fatbin.hpp>

#include <array>
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
}  // namespace archguard::jit

namespace archguard {

/// hits/misses: images whose kernel list was found / decoded; scans_known: files whose
/// embedded-fatbin search was skipped; files_known: files read from their record (nothing of
/// them parsed; counted in scans_known too); judgements_known: objects whose verdict and
/// judgement on a GPU were read from their record; trees_known: directory walks that found the
/// record of their files without device code; answers_known: runs answered whole from the
/// record of an earlier identical run; stores: records written.
struct ResultsCacheCounters {
  std::uint64_t hits = 0, misses = 0, stores = 0, scans_known = 0, files_known = 0, judgements_known = 0, trees_known = 0,
                answers_known = 0;
};

class ResultsCache final : public FactsStore {
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

  std::optional<EmbeddedFinds> find_embedded(const std::string& identity) override;
  void keep_embedded(const std::string& identity, const EmbeddedFinds& finds) override;
  StoredKernelLists find_kernels(const std::string& identity) override;
  void keep_kernels(const std::string& identity, const StoredKernelLists& lists) override;
  void count(std::uint64_t hits, std::uint64_t misses) override;
  std::optional<std::vector<std::byte>> find_file(const std::string& key) override;
  void keep_file(const std::string& key, std::vector<std::byte> facts) override;
  std::optional<std::vector<std::byte>> find_judgement(const std::string& key) override;
  void keep_judgement(const std::string& key, std::vector<std::byte> record) override;
  std::optional<std::vector<std::byte>> find_tree(const std::string& key) override;
  void keep_tree(const std::string& key, std::vector<std::byte> record) override;
  std::optional<std::vector<std::byte>> find_answer(const std::string& key) override;
  void keep_answer(const std::string& key, std::vector<std::byte> record) override;

  ResultsCacheCounters counters() const;
  /// Problems met while reading or writing (at most a few, then a count).
  std::vector<std::string> warnings() const;
  const std::string& dir() const { return dir_; }

 private:
  ResultsCache() = default;
  void problem(std::string message);
  /// An opaque record of `kind` kept under (`what`, `key`), counted in `known` when found.
  std::optional<std::vector<std::byte>> find_bytes(std::string_view what, std::uint32_t kind, const std::string& key,
                                                   std::atomic<std::uint64_t>& known);
  bool store(const std::array<std::uint8_t, 32>& key, std::uint32_t kind, std::vector<std::pair<std::string, std::string>> names,
             std::vector<std::byte> bytes);
  std::string producer_;
  std::string dir_;
  std::unique_ptr<jit::Cache> cache_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, stores_{0}, scans_known_{0}, files_known_{0}, judgements_known_{0}, trees_known_{0},
      answers_known_{0};
  mutable std::mutex mu_;
  std::vector<std::string> warnings_;
  std::uint64_t more_warnings_ = 0;
};

/// The default bound of the results cache (256 MiB).
inline constexpr std::uint64_t kResultsCacheDefaultMaxBytes = std::uint64_t{256} << 20;

}  // namespace archguard
