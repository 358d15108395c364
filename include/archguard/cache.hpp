// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// The on-disk cache of compiled kernels used by archguard::jit.
///
/// Layout under the root (default $XDG_CACHE_HOME/archguard, else ~/.cache/archguard; set by
/// ARCHGUARD_CACHE_DIR, turned off by ARCHGUARD_CACHE_DISABLE=1):
///
///     v1/entries/<first two hex digits>/<key>.bin    header + checksummed record (authoritative)
///     v1/entries/<first two hex digits>/<key>.json   readable metadata (key fields, options, log, ...)
///     v1/entries/<first two hex digits>/<key>.lock   per-entry lock (flock), removed with the entry
///     v1/tmp/                                        files being written; renamed into place
///
/// Guarantees: entries appear atomically (temporary file, fsync, rename); one process compiles
/// a given key while others wait on that key's lock only, and readers of published entries take
/// no lock at all; every record carries a SHA-256 of its bytes, so a truncated or corrupt entry
/// is detected, evicted and rebuilt. The root and its sub-directories must belong to the user
/// and not be writable by group or others; nothing is opened through a symbolic link inside it
/// (openat + O_NOFOLLOW relative to the directory descriptors). Files are 0600, directories 0700.
/// The size is bounded (ARCHGUARD_CACHE_MAX_BYTES, default 1 GiB) by evicting the least recently
/// used entries by an explicit stamp (the entry's mtime, set on every hit; atime is never used).
/// A Cache object may be used from several threads.
/// Read-only layers (ARCHGUARD_CACHE_READONLY_DIRS, ':'-separated, e.g. a cache pre-built at
/// install time) are searched after the writable one and never written.

#include <archguard/result.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace archguard::jit {

/// A SHA-256 digest.
using Digest = std::array<std::uint8_t, 32>;

/// Lower-case hex of a digest (64 characters).
std::string to_hex(const Digest& d);
/// Parses 64 hex digits.
std::optional<Digest> digest_from_hex(std::string_view hex);

/// Incremental SHA-256 (OpenSSL EVP). Fields are length-prefixed by add_field() so that
/// ("ab","c") and ("a","bc") hash differently.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void add(std::span<const std::byte> bytes);
  void add(std::string_view text);
  /// Adds a tag, the length and the bytes.
  void add_field(std::string_view tag, std::string_view value);
  Digest finish();

 private:
  void* ctx_;  // EVP_MD_CTX*
};

Digest sha256(std::span<const std::byte> bytes);
Digest sha256(std::string_view text);

/// One cached compilation result. `names` holds (name expression, lowered name) pairs.
struct CacheRecord {
  std::uint32_t kind = 0;  ///< the jit layer's CodeKind value
  std::vector<std::pair<std::string, std::string>> names;
  std::vector<std::byte> image;
};

/// Serialises a record (what the .bin file holds after its header) and parses it back with
/// bounds checks; `what` names the source of the bytes in errors.
std::vector<std::byte> encode_record(const CacheRecord& r);
Result<CacheRecord> decode_record(std::span<const std::byte> bytes, std::string_view what);

struct CacheOptions {
  std::string dir;                         ///< writable layer; empty: the default location
  std::vector<std::string> readonly_dirs;  ///< searched after `dir`, never written
  std::uint64_t max_bytes = std::uint64_t{1} << 30;
  bool disabled = false;
  /// fsync each record before it is renamed into place (ARCHGUARD_CACHE_FSYNC=0 turns it off).
  /// Without it a power loss may leave a torn entry, which the checksum then catches and the
  /// next lookup rebuilds; the fsync is most of a store's cost (about 4 ms here).
  bool fsync = true;
  /// Stores write the record alone: no metadata file and no per-entry lock. For records that are
  /// the same whoever writes them (the results cache): two writers of a key publish the same
  /// bytes, and the last rename wins. Saves two of a store's three files.
  bool light_stores = false;
  /// The JIT's include scan reads no header larger than this for a key (64 MiB): a source that
  /// includes one is compiled, not cached (ARCHGUARD_CACHE_MAX_HEADER).
  std::uint64_t max_header_bytes = std::uint64_t{64} << 20;
  /// Reads ARCHGUARD_CACHE_DIR, ARCHGUARD_CACHE_DISABLE, ARCHGUARD_CACHE_MAX_BYTES,
  /// ARCHGUARD_CACHE_MAX_HEADER, ARCHGUARD_CACHE_READONLY_DIRS, ARCHGUARD_CACHE_FSYNC,
  /// XDG_CACHE_HOME and HOME. A malformed size is an error.
  static Result<CacheOptions> from_environment();
};

/// What lookup() found.
struct CacheHit {
  CacheRecord record;
  std::string layer;  ///< the root directory it came from
  bool readonly = false;
};

/// What list() and verify() report about one entry.
struct CacheEntryInfo {
  std::string key;    ///< hex
  std::string layer;  ///< root directory
  bool readonly = false;
  std::uint64_t bytes = 0;     ///< .bin + .json
  std::int64_t last_used = 0;  ///< seconds since the epoch
  std::string metadata;        ///< the .json text ("" when missing)
  std::string problem;         ///< verify(): why the entry is bad, "" when good
};

struct CacheStats {
  std::string dir;
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;
  std::uint64_t max_bytes = 0;
  std::uint64_t temp_files = 0;
  /// Per-entry lock files in the shards (<key>.lock, empty; kept while their entry lives so that
  /// waiters agree on one inode, removed with it), counted apart from the entries.
  std::uint64_t lock_files = 0;
  std::vector<std::string> readonly_dirs;
};

/// Counters for one Cache object (not persisted).
struct CacheCounters {
  std::uint64_t hits = 0, misses = 0, stores = 0, corrupt_evicted = 0, evicted_for_size = 0;
};

class Cache {
 public:
  /// Opens (creating with mode 0700 where missing) the writable layer and checks ownership and
  /// permissions of it and of every read-only layer. A read-only layer that fails the checks or
  /// does not exist is skipped and named in warnings(); a bad writable layer is an error.
  static Result<std::unique_ptr<Cache>> open(const CacheOptions& options);
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  const std::string& dir() const { return dir_; }
  /// Things worth telling the user (skipped read-only layers, evicted corrupt entries).
  std::vector<std::string> warnings() const;
  /// Adds a warning (a failure of the cache that the caller worked around).
  void note_problem(std::string message) { warn(std::move(message)); }
  CacheCounters counters() const;

  /// A published, intact entry for `key`, or nullopt. A corrupt entry in the writable layer
  /// is evicted (under its lock) and reported as a miss. A hit refreshes the entry's stamp.
  Result<std::optional<CacheHit>> lookup(const Digest& key);

  /// Returns the entry for `key`, building it with `build` when missing. Concurrent callers
  /// (threads or processes) with the same key build it once; the others wait on that key's
  /// lock and then read the published entry. `metadata` (JSON text) is stored beside it.
  /// `built` is set to true when this call ran `build`.
  using Builder = std::function<Result<CacheRecord>(std::string& metadata)>;
  Result<CacheHit> get_or_build(const Digest& key, const Builder& build, bool* built = nullptr);

  /// Stores a record (replacing any entry) and then enforces the size bound.
  Status store(const Digest& key, const CacheRecord& record, std::string_view metadata);
  /// Removes an entry from the writable layer (no-op when absent).
  Status evict(const Digest& key);

  Result<std::vector<CacheEntryInfo>> list() const;
  Result<CacheStats> stats() const;
  /// Checks every entry; with `evict_bad`, removes the bad ones from the writable layer.
  Result<std::vector<CacheEntryInfo>> verify(bool evict_bad);
  /// Removes every entry and leftover temporary file of the writable layer.
  Status clear();
  /// Evicts least-recently-used entries until the writable layer holds at most max_bytes, and
  /// removes temporary files abandoned for over an hour. Entries locked by a writer are skipped.
  /// Stores call this themselves when their running estimate of the size nears the bound (a
  /// full scan of the entries), and then trim to 90% of the bound.
  Status enforce_bound();

 private:
  Cache() = default;
  struct Layer;
  std::string dir_;
  std::uint64_t max_bytes_ = 0;
  bool fsync_ = true;
  bool light_ = false;
  std::vector<std::unique_ptr<Layer>> layers_;  // [0] writable, then read-only
  mutable std::mutex mu_;                       // guards warnings_ and counters_
  std::vector<std::string> warnings_;
  CacheCounters counters_;

  void warn(std::string message);
  void count(std::uint64_t CacheCounters::*field);

  Result<std::optional<CacheHit>> read_entry(Layer& layer, const Digest& key, bool stamp);
  Status publish(Layer& layer, const Digest& key, const CacheRecord& record, std::string_view metadata,
                 std::uint64_t* written);
  Status after_store(std::uint64_t added);
  Status trim(std::uint64_t low_water, std::uint64_t& total_out);
  /// Removes abandoned temporary files and orphan metadata/lock files whose lock nobody holds:
  /// those older than an hour, or with `everything_unheld` (cache clear) all unheld orphans.
  void remove_stale(Layer& layer, bool everything_unheld);
  static constexpr std::uint64_t kUnknownTotal = ~std::uint64_t{0};
  std::uint64_t known_total_ = kUnknownTotal;  // guarded by mu_
};

}  // namespace archguard::jit
