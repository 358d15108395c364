// SPDX-License-Identifier: Apache-2.0
// The on-disk kernel cache: layout, checks, per-entry locks, atomic publication, LRU bound.
#include <archguard/cache.hpp>
#include <archguard/bytes.hpp>

#include "common/driver_env.hpp"
#include "common/endian.hpp"
#include "common/fd.hpp"
#include "common/fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace archguard::jit {
namespace {

constexpr char kMagic[8] = {'A', 'G', 'J', 'I', 'T', 'v', '1', '\0'};
constexpr std::size_t kHeaderSize = 8 + 8 + 32 + 32;  // magic, record size, key, sha256(record)
constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{1} << 31;
constexpr std::int64_t kAbandonedTempSeconds = 3600;

using common::errno_text;
using common::list_dir;
using common::octal_mode;
using common::read_all;
using common::write_all;
using Fd = common::UniqueFd;

// Ownership and mode rules for a directory we trust. Read-only layers may also belong to root.
Status check_dir(int fd, const std::string& path, bool readonly_layer) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error("cache dir " + path + ": fstat failed: " + errno_text(errno), errno);
  if (!S_ISDIR(st.st_mode)) return make_error(ErrorKind::usage, "cache dir " + path + " is not a directory");
  const uid_t me = ::geteuid();
  if (st.st_uid != me && !(readonly_layer && st.st_uid == 0)) {
    return make_error(ErrorKind::usage, "cache dir " + path + " is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " +
                                            std::to_string(me) + "): refusing to trust it; use a directory of your own " +
                                            "(ARCHGUARD_CACHE_DIR) or ARCHGUARD_CACHE_DISABLE=1");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return make_error(ErrorKind::usage, "cache dir " + path + " is writable by group or others (mode " + octal_mode(st.st_mode) +
                                            "): refusing to trust it; run chmod go-w " + path + " (archguard creates it with 0700)");
  }
  return Ok{};
}

// The links the path of a cache root goes through must be the user's own or root's: a link
// someone else planted (in /tmp, say: /tmp/cache -> /home/victim/.ssh) would make us create
// and write the cache wherever they chose. Links the user set up (a moved ~/.cache) are fine.
Status check_links(const std::string& path) {
  const uid_t me = ::geteuid();
  std::string prefix;
  std::size_t pos = 0;
  while (pos < path.size()) {
    const std::size_t next = path.find('/', pos);
    const std::size_t end = next == std::string::npos ? path.size() : next;
    prefix = path.substr(0, end);
    pos = end + 1;
    if (prefix.empty() || prefix.back() == '/') continue;
    struct stat st {};
    if (::lstat(prefix.c_str(), &st) != 0) break;  // the rest does not exist yet: created below
    if (S_ISLNK(st.st_mode) && st.st_uid != me && st.st_uid != 0)
      return make_error(ErrorKind::usage, "cache dir " + path + ": " + prefix + " is a symbolic link owned by uid " +
                                              std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(me) +
                                              ") or root: refusing to follow it; use a directory of your own (ARCHGUARD_CACHE_DIR)");
  }
  return Ok{};
}

// mkdir -p with mode 0700 for the components it creates.
Status make_dirs(const std::string& path) {
  if (path.empty()) return make_error(ErrorKind::usage, "cache dir: empty path");
  if (auto s = common::make_dirs(path, 0700); !s) return rewrap(s.error(), "cache dir " + path + ": " + s.message());
  return Ok{};
}

// Opens (creating when `create`) a sub-directory of a trusted directory without following links.
Result<Fd> open_subdir(int parent, const char* name, const std::string& path, bool create, bool readonly_layer) {
  if (create && ::mkdirat(parent, name, 0700) != 0 && errno != EEXIST) {
    return errno_error("cache dir " + path + ": mkdir failed: " + errno_text(errno), errno);
  }
  Fd fd(::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    const int e = errno;
    if (e == ELOOP || e == ENOTDIR) {
      return errno_error("cache dir " + path + " is a symbolic link or not a directory: refusing to follow it", e);
    }
    return errno_error("cache dir " + path + ": open failed: " + errno_text(e), e);
  }
  AG_TRY_STATUS(check_dir(fd.get(), path, readonly_layer));
  return fd;
}

std::string shard_of(const std::string& hex) { return hex.substr(0, 2); }

std::string unique_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}() ^
                                          static_cast<std::uint64_t>(::getpid()) << 32};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%d.%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(rng()));  // NOLINT(runtime/int)
  return buf;
}

}  // namespace

struct Cache::Layer {
  std::string root;
  bool readonly = false;
  Fd root_fd, entries_fd, tmp_fd;

  std::string path_of(const std::string& shard, const std::string& name) const {
    return root + "/v1/entries/" + shard + "/" + name;
  }
  // The shard directory for a key; created on demand in the writable layer.
  Result<Fd> shard(const std::string& hex, bool create) const {
    const std::string s = shard_of(hex);
    return open_subdir(entries_fd.get(), s.c_str(), root + "/v1/entries/" + s, create && !readonly, readonly);
  }
};

namespace {

// An exclusive flock on an entry's lock file, robust against the file being evicted
// (unlinked) while we waited: the lock only counts when the path still names our inode.
class EntryLock {
 public:
  static Result<EntryLock> acquire(int shard_fd, const std::string& name, const std::string& path, bool wait) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      Fd fd(::openat(shard_fd, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!fd.valid()) return errno_error(path + ": open failed: " + errno_text(errno), errno);
      int r;
      do {
        r = ::flock(fd.get(), LOCK_EX | (wait ? 0 : LOCK_NB));
      } while (r != 0 && errno == EINTR);
      if (r != 0) {
        if (errno == EWOULDBLOCK) return EntryLock();
        return errno_error(path + ": flock failed: " + errno_text(errno), errno);
      }
      struct stat a {
      }, b{};
      if (::fstat(fd.get(), &a) == 0 && ::fstatat(shard_fd, name.c_str(), &b, AT_SYMLINK_NOFOLLOW) == 0 &&
          a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
        EntryLock l;
        l.fd_ = std::move(fd);
        return l;
      }
    }
    return make_error(ErrorKind::io, path + ": lock file keeps disappearing");
  }
  bool held() const { return fd_.valid(); }

 private:
  Fd fd_;
};

}  // namespace

// ---- options ------------------------------------------------------------------------------

Result<CacheOptions> CacheOptions::from_environment() {
  CacheOptions o;
  auto env = [](const char* n) { return common::process_env(n).value_or(std::string()); };
  const std::string disable = env("ARCHGUARD_CACHE_DISABLE");
  o.disabled = !disable.empty() && disable != "0" && disable != "false" && disable != "no";
  const std::string sync = env("ARCHGUARD_CACHE_FSYNC");
  o.fsync = !(sync == "0" || sync == "false" || sync == "no");
  o.dir = env("ARCHGUARD_CACHE_DIR");
  if (o.dir.empty()) {
    const std::string xdg = env("XDG_CACHE_HOME");
    if (!xdg.empty() && xdg.front() == '/') {
      o.dir = xdg + "/archguard";
    } else {
      const std::string home = env("HOME");
      if (home.empty()) {
        if (!o.disabled) {
          return make_error(ErrorKind::usage,
                            "cache dir: neither ARCHGUARD_CACHE_DIR, XDG_CACHE_HOME nor HOME is set; set one or "
                            "ARCHGUARD_CACHE_DISABLE=1");
        }
      } else {
        o.dir = home + "/.cache/archguard";
      }
    }
  }
  const std::string max = env("ARCHGUARD_CACHE_MAX_BYTES");
  if (!max.empty()) {
    // Checked: 17179869184G does not fit in 64 bits and is refused (it used to wrap to 0).
    auto v = parse_byte_size(max);
    if (!v) {
      return make_error(ErrorKind::usage, "ARCHGUARD_CACHE_MAX_BYTES: '" + max +
                                              "' is not a size that fits in 64 bits (bytes, or with K, M, G or T)");
    }
    o.max_bytes = *v;
  }
  const std::string header = env("ARCHGUARD_CACHE_MAX_HEADER");
  if (!header.empty()) {
    auto v = parse_byte_size(header);
    if (!v || *v == 0) {
      return make_error(ErrorKind::usage, "ARCHGUARD_CACHE_MAX_HEADER: '" + header +
                                              "' is not a size above 0 that fits in 64 bits (bytes, or with K, M, G or T)");
    }
    o.max_header_bytes = *v;
  }
  const std::string ro = env("ARCHGUARD_CACHE_READONLY_DIRS");
  std::size_t pos = 0;
  while (pos < ro.size()) {
    std::size_t next = ro.find(':', pos);
    if (next == std::string::npos) next = ro.size();
    if (next > pos) o.readonly_dirs.push_back(ro.substr(pos, next - pos));
    pos = next + 1;
  }
  return o;
}

// ---- open ---------------------------------------------------------------------------------

Cache::~Cache() = default;

std::vector<std::string> Cache::warnings() const {
  std::lock_guard<std::mutex> g(mu_);
  return warnings_;
}

CacheCounters Cache::counters() const {
  std::lock_guard<std::mutex> g(mu_);
  return counters_;
}

void Cache::warn(std::string message) {
  std::lock_guard<std::mutex> g(mu_);
  warnings_.push_back(std::move(message));
}

void Cache::count(std::uint64_t CacheCounters::*field) {
  std::lock_guard<std::mutex> g(mu_);
  ++(counters_.*field);
}

Result<std::unique_ptr<Cache>> Cache::open(const CacheOptions& options) {
  if (options.disabled) return make_error(ErrorKind::usage, "cache: disabled (ARCHGUARD_CACHE_DISABLE)");
  std::unique_ptr<Cache> c(new Cache());
  c->dir_ = options.dir;
  while (c->dir_.size() > 1 && c->dir_.back() == '/') c->dir_.pop_back();
  c->max_bytes_ = options.max_bytes;
  c->fsync_ = options.fsync;
  c->light_ = options.light_stores;

  auto open_layer = [](const std::string& root, bool readonly) -> Result<std::unique_ptr<Layer>> {
    auto layer = std::make_unique<Layer>();
    layer->root = root;
    layer->readonly = readonly;
    AG_TRY_STATUS(check_links(root));
    if (!readonly) {
      AG_TRY_STATUS(make_dirs(root));
    }
    // The root itself may be reached through links the user set up (a moved ~/.cache);
    // below it nothing is followed.
    layer->root_fd = Fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!layer->root_fd.valid()) {
      return errno_error("cache dir " + root + ": open failed: " + errno_text(errno), errno);
    }
    AG_TRY_STATUS(check_dir(layer->root_fd.get(), root, readonly));
    auto v1 = open_subdir(layer->root_fd.get(), "v1", root + "/v1", !readonly, readonly);
    if (!v1) return v1.error();
    AG_TRY(auto entries, open_subdir(v1->get(), "entries", root + "/v1/entries", !readonly, readonly));
    layer->entries_fd = std::move(entries);
    if (!readonly) {
      AG_TRY(auto tmp, open_subdir(v1->get(), "tmp", root + "/v1/tmp", true, false));
      layer->tmp_fd = std::move(tmp);
    }
    return layer;
  };

  if (c->dir_.empty()) return make_error(ErrorKind::usage, "cache dir: empty path");
  AG_TRY(auto w, open_layer(c->dir_, false));
  c->layers_.push_back(std::move(w));
  for (const std::string& ro : options.readonly_dirs) {
    auto l = open_layer(ro, true);
    if (!l) {
      c->warn("read-only cache layer skipped: " + l.message());
      continue;
    }
    c->layers_.push_back(std::move(*l));
  }
  return c;
}

// ---- reading ------------------------------------------------------------------------------

Result<std::optional<CacheHit>> Cache::read_entry(Layer& layer, const Digest& key, bool stamp) {
  const std::string hex = to_hex(key);
  auto shard = layer.shard(hex, false);
  if (!shard) {
    if (shard.kind() == ErrorKind::not_found) return std::optional<CacheHit>{};
    return shard.error();
  }
  const std::string name = hex + ".bin";
  const std::string path = layer.path_of(shard_of(hex), name);
  Fd fd(::openat(shard->get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    const int e = errno;
    if (e == ENOENT) return std::optional<CacheHit>{};
    if (e == ELOOP) return make_error(ErrorKind::corrupt, path + ": is a symbolic link", ELOOP);
    return errno_error(path + ": open failed: " + errno_text(e), e);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(path + ": fstat failed: " + errno_text(errno), errno);
  if (!S_ISREG(st.st_mode)) return make_error(ErrorKind::corrupt, path + ": not a regular file");
  if (st.st_uid != ::geteuid() && !(layer.readonly && st.st_uid == 0)) {
    return make_error(ErrorKind::corrupt, path + ": owned by uid " + std::to_string(st.st_uid) + ", not by you");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return make_error(ErrorKind::corrupt, path + ": writable by group or others (mode " + octal_mode(st.st_mode) + "): not trusted");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < kHeaderSize || size > kMaxEntryBytes) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": size 0x%llx is not a valid entry (header is 0x%zx bytes)",
                  static_cast<unsigned long long>(size), kHeaderSize);  // NOLINT(runtime/int)
    return make_error(ErrorKind::corrupt, path + buf);
  }
  auto bytes = read_all(fd.get(), static_cast<std::size_t>(size), path);
  if (!bytes) return bytes.error();
  const std::byte* p = bytes->data();
  if (bytes->size() != size || std::memcmp(p, kMagic, sizeof kMagic) != 0) {
    return make_error(ErrorKind::corrupt, path + ": bad magic at 0x0 (not an archguard cache entry)");
  }
  // Read through the checked reader: the size was checked above, so this read cannot fail.
  const std::uint64_t record_size = ByteReader(*bytes, path).u64(8, "record size").value();
  if (record_size != size - kHeaderSize) {
    char buf[128];
    std::snprintf(buf, sizeof buf, ": record size 0x%llx at 0x8 does not match the file (0x%llx bytes after the header)",
                  static_cast<unsigned long long>(record_size),          // NOLINT(runtime/int)
                  static_cast<unsigned long long>(size - kHeaderSize));  // NOLINT(runtime/int)
    return make_error(ErrorKind::corrupt, path + buf);
  }
  if (std::memcmp(p + 16, key.data(), key.size()) != 0) {
    return make_error(ErrorKind::corrupt, path + ": key at 0x10 does not match the file name");
  }
  const std::span<const std::byte> record(p + kHeaderSize, static_cast<std::size_t>(record_size));
  const Digest sum = sha256(record);
  if (std::memcmp(p + 48, sum.data(), sum.size()) != 0) {
    return make_error(ErrorKind::corrupt, path + ": checksum at 0x30 does not match the record (corrupt or truncated)");
  }
  auto rec = decode_record(record, path);
  if (!rec) return make_error(ErrorKind::corrupt, rec.message(), rec.code());
  if (stamp && !layer.readonly) {
    // The explicit last-used stamp for LRU eviction: the entry's mtime, set on every hit.
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    (void)::futimens(fd.get(), times);
  }
  CacheHit hit;
  hit.record = std::move(*rec);
  hit.layer = layer.root;
  hit.readonly = layer.readonly;
  return std::optional<CacheHit>(std::move(hit));
}

Result<std::optional<CacheHit>> Cache::lookup(const Digest& key) {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = *layers_[i];
    auto r = read_entry(layer, key, true);
    if (r.ok()) {
      if (r->has_value()) {
        count(&CacheCounters::hits);
        return r;
      }
      continue;
    }
    if (r.kind() != ErrorKind::corrupt) return r.error();
    if (layer.readonly) {
      warn("read-only cache layer: " + r.message());
      continue;
    }
    // Damaged entry: evict it under its lock unless someone replaced it meanwhile.
    const std::string hex = to_hex(key);
    AG_TRY(auto shard, layer.shard(hex, true));
    AG_TRY(auto lock, EntryLock::acquire(shard.get(), hex + ".lock", layer.path_of(shard_of(hex), hex + ".lock"), true));
    auto again = read_entry(layer, key, true);
    if (again.ok() && again->has_value()) {
      count(&CacheCounters::hits);
      return again;
    }
    if (!again.ok() && again.kind() != ErrorKind::corrupt) return again.error();
    if (!again.ok()) {
      ::unlinkat(shard.get(), (hex + ".bin").c_str(), 0);
      ::unlinkat(shard.get(), (hex + ".json").c_str(), 0);
      count(&CacheCounters::corrupt_evicted);
      warn("evicted a corrupt cache entry: " + again.message());
    }
  }
  count(&CacheCounters::misses);
  return std::optional<CacheHit>{};
}

// ---- writing ------------------------------------------------------------------------------

Status Cache::publish(Layer& layer, const Digest& key, const CacheRecord& record, std::string_view metadata,
                      std::uint64_t* written) {
  const std::string hex = to_hex(key);
  AG_TRY(auto shard, layer.shard(hex, true));
  const std::vector<std::byte> body = encode_record(record);
  std::vector<std::byte> file(kHeaderSize);
  std::memcpy(file.data(), kMagic, sizeof kMagic);
  common::store_le(file.data() + 8, body.size(), 8);
  std::memcpy(file.data() + 16, key.data(), key.size());
  const Digest sum = sha256(body);
  std::memcpy(file.data() + 48, sum.data(), sum.size());
  file.insert(file.end(), body.begin(), body.end());

  const std::string suffix = unique_suffix();
  const std::string tmp_bin = hex + "." + suffix + ".bin.tmp";
  const std::string tmp_json = hex + "." + suffix + ".json.tmp";
  // The record is synced before it is renamed into place, so a crash never publishes a torn
  // entry (and the checksum would catch one anyway). The metadata is advisory (nothing reads it
  // to decide anything) and is not synced: that halves the cost of a store.
  auto write_tmp = [&](const std::string& name, std::span<const std::byte> bytes, bool sync) -> Status {
    const std::string path = layer.root + "/v1/tmp/" + name;
    Fd fd(::openat(layer.tmp_fd.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return errno_error(path + ": create failed: " + errno_text(errno), errno);
    if (auto s = write_all(fd.get(), bytes, path); !s) return s;
    if (sync && ::fsync(fd.get()) != 0) return errno_error(path + ": fsync failed: " + errno_text(errno), errno);
    return Ok{};
  };
  auto cleanup = [&] {
    ::unlinkat(layer.tmp_fd.get(), tmp_bin.c_str(), 0);
    ::unlinkat(layer.tmp_fd.get(), tmp_json.c_str(), 0);
  };
  const std::span<const std::byte> meta(reinterpret_cast<const std::byte*>(metadata.data()), metadata.size());
  if (!light_)
    if (auto s = write_tmp(tmp_json, meta, false); !s) {
      cleanup();
      return s;
    }
  if (auto s = write_tmp(tmp_bin, file, fsync_); !s) {
    cleanup();
    return s;
  }
  // Metadata first: a published .bin always has its .json beside it.
  if ((!light_ && ::renameat(layer.tmp_fd.get(), tmp_json.c_str(), shard.get(), (hex + ".json").c_str()) != 0) ||
      ::renameat(layer.tmp_fd.get(), tmp_bin.c_str(), shard.get(), (hex + ".bin").c_str()) != 0) {
    const int e = errno;
    cleanup();
    return errno_error(layer.path_of(shard_of(hex), hex + ".bin") + ": rename failed: " + errno_text(e), e);
  }
  count(&CacheCounters::stores);
  if (written != nullptr) *written = file.size() + metadata.size();
  return Ok{};
}

Status Cache::store(const Digest& key, const CacheRecord& record, std::string_view metadata) {
  Layer& layer = *layers_.front();
  const std::string hex = to_hex(key);
  AG_TRY(auto shard, layer.shard(hex, true));
  std::uint64_t written = 0;
  if (light_) {
    if (auto s = publish(layer, key, record, metadata, &written); !s) return s;
  } else {
    AG_TRY(auto lock, EntryLock::acquire(shard.get(), hex + ".lock", layer.path_of(shard_of(hex), hex + ".lock"), true));
    if (auto s = publish(layer, key, record, metadata, &written); !s) return s;
  }
  return after_store(written);
}

Result<CacheHit> Cache::get_or_build(const Digest& key, const Builder& build, bool* built) {
  if (built != nullptr) *built = false;
  auto hit = lookup(key);
  if (!hit) return hit.error();
  if (hit->has_value()) return std::move(**hit);

  Layer& layer = *layers_.front();
  const std::string hex = to_hex(key);
  AG_TRY(auto shard, layer.shard(hex, true));
  CacheHit out;
  std::uint64_t written = 0;
  {
    auto lock = EntryLock::acquire(shard.get(), hex + ".lock", layer.path_of(shard_of(hex), hex + ".lock"), true);
    if (!lock) return lock.error();
    // Someone may have built it while we waited for the lock.
    auto again = read_entry(layer, key, true);
    if (again.ok() && again->has_value()) {
      count(&CacheCounters::hits);
      return std::move(**again);
    }
    if (!again.ok() && again.kind() != ErrorKind::corrupt) return again.error();
    std::string metadata;
    AG_TRY(auto rec, build(metadata));
    if (built != nullptr) *built = true;
    AG_TRY_STATUS(publish(layer, key, rec, metadata, &written));
    out.record = std::move(rec);
    out.layer = layer.root;
  }
  AG_TRY_STATUS(after_store(written));
  return out;
}

Status Cache::evict(const Digest& key) {
  Layer& layer = *layers_.front();
  const std::string hex = to_hex(key);
  auto shard = layer.shard(hex, false);
  if (!shard) return shard.kind() == ErrorKind::not_found ? Status(Ok{}) : Status(shard.error());
  AG_TRY(auto lock, EntryLock::acquire(shard->get(), hex + ".lock", layer.path_of(shard_of(hex), hex + ".lock"), true));
  ::unlinkat(shard->get(), (hex + ".bin").c_str(), 0);
  ::unlinkat(shard->get(), (hex + ".json").c_str(), 0);
  ::unlinkat(shard->get(), (hex + ".lock").c_str(), 0);
  return Ok{};
}

// ---- maintenance --------------------------------------------------------------------------

namespace {

struct Found {
  std::string shard, hex;
  std::uint64_t bytes = 0;
  struct timespec mtime {};
};

// Entries (.bin) of one layer with their sizes (bin + json) and stamps.
std::vector<Found> scan_entries(int entries_fd) {
  std::vector<Found> out;
  for (const std::string& s : list_dir(entries_fd)) {
    if (s.size() != 2) continue;
    Fd sd(::openat(entries_fd, s.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sd.valid()) continue;
    for (const std::string& n : list_dir(sd.get())) {
      if (!n.ends_with(".bin") || n.size() != 68) continue;
      struct stat st {};
      if (::fstatat(sd.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      Found f;
      f.shard = s;
      f.hex = n.substr(0, 64);
      f.bytes = static_cast<std::uint64_t>(st.st_size);
      f.mtime = st.st_mtim;
      struct stat js {};
      if (::fstatat(sd.get(), (f.hex + ".json").c_str(), &js, AT_SYMLINK_NOFOLLOW) == 0) {
        f.bytes += static_cast<std::uint64_t>(js.st_size);
      }
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace

Status Cache::enforce_bound() {
  std::uint64_t total = 0;
  return trim(max_bytes_, total);
}

// After a store: a full scan only when the running estimate says the bound may be crossed (or
// nothing is known yet, i.e. the first store of this Cache). A scan that finds the layer over
// the bound trims it to 90% of it, so that the next stores need no scan. Other processes'
// stores are not in the estimate; each of them checks its own, and every scan sees them all.
Status Cache::after_store(std::uint64_t added) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (known_total_ != kUnknownTotal && known_total_ + added <= max_bytes_) {
      known_total_ += added;
      return Ok{};
    }
  }
  std::uint64_t total = 0;
  if (auto s = trim(max_bytes_ - max_bytes_ / 10, total); !s) return s;
  std::lock_guard<std::mutex> g(mu_);
  known_total_ = total;
  return Ok{};
}

Status Cache::trim(std::uint64_t low_water, std::uint64_t& total_out) {
  Layer& layer = *layers_.front();
  remove_stale(layer, /*everything_unheld=*/false);  // what a kill -9 left behind
  std::vector<Found> all = scan_entries(layer.entries_fd.get());
  std::uint64_t total = 0;
  for (const Found& f : all) total += f.bytes;
  total_out = total;
  if (total <= max_bytes_) return Ok{};
  std::sort(all.begin(), all.end(), [](const Found& a, const Found& b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    return a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  for (const Found& f : all) {
    if (total <= low_water) break;
    Fd sd(::openat(layer.entries_fd.get(), f.shard.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sd.valid()) continue;
    auto lock = EntryLock::acquire(sd.get(), f.hex + ".lock", layer.path_of(f.shard, f.hex + ".lock"), false);
    if (!lock || !lock->held()) continue;  // a writer holds it: leave it
    if (::unlinkat(sd.get(), (f.hex + ".bin").c_str(), 0) == 0) {
      total -= std::min(total, f.bytes);
      count(&CacheCounters::evicted_for_size);
    }
    ::unlinkat(sd.get(), (f.hex + ".json").c_str(), 0);
    ::unlinkat(sd.get(), (f.hex + ".lock").c_str(), 0);
  }
  total_out = total;
  return Ok{};
}

Result<std::vector<CacheEntryInfo>> Cache::list() const {
  std::vector<CacheEntryInfo> out;
  for (const auto& lp : layers_) {
    for (const Found& f : scan_entries(lp->entries_fd.get())) {
      CacheEntryInfo e;
      e.key = f.hex;
      e.layer = lp->root;
      e.readonly = lp->readonly;
      e.bytes = f.bytes;
      e.last_used = f.mtime.tv_sec;
      Fd sd(::openat(lp->entries_fd.get(), f.shard.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sd.valid()) {
        Fd j(::openat(sd.get(), (f.hex + ".json").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
        struct stat st {};
        if (j.valid() && ::fstat(j.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (16 << 20)) {
          auto b = read_all(j.get(), static_cast<std::size_t>(st.st_size), "");
          if (b) e.metadata.assign(reinterpret_cast<const char*>(b->data()), b->size());
        }
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

Result<CacheStats> Cache::stats() const {
  CacheStats s;
  const Layer& layer = *layers_.front();
  s.dir = layer.root;
  s.max_bytes = max_bytes_;
  for (const Found& f : scan_entries(layer.entries_fd.get())) {
    ++s.entries;
    s.bytes += f.bytes;
  }
  s.temp_files = list_dir(layer.tmp_fd.get()).size();
  for (const std::string& sh : list_dir(layer.entries_fd.get())) {
    if (sh.size() != 2) continue;
    Fd sd(::openat(layer.entries_fd.get(), sh.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sd.valid()) continue;
    for (const std::string& n : list_dir(sd.get()))
      if (n.ends_with(".lock")) ++s.lock_files;
  }
  for (std::size_t i = 1; i < layers_.size(); ++i) s.readonly_dirs.push_back(layers_[i]->root);
  return s;
}

Result<std::vector<CacheEntryInfo>> Cache::verify(bool evict_bad) {
  auto entries = list();
  if (!entries) return entries.error();
  for (CacheEntryInfo& e : *entries) {
    auto key = digest_from_hex(e.key);
    if (!key) continue;
    Layer* layer = nullptr;
    for (auto& lp : layers_) {
      if (lp->root == e.layer) layer = lp.get();
    }
    if (layer == nullptr) continue;
    auto r = read_entry(*layer, *key, false);
    if (r.ok()) continue;
    e.problem = r.message();
    if (evict_bad && !layer->readonly && r.kind() == ErrorKind::corrupt) {
      AG_TRY_STATUS(evict(*key));
    }
  }
  return entries;
}

Status Cache::clear() {
  Layer& layer = *layers_.front();
  for (const Found& f : scan_entries(layer.entries_fd.get())) {
    auto key = digest_from_hex(f.hex);
    if (key) {
      if (auto s = evict(*key); !s) return s;
    }
  }
  // What other processes may be writing right now is left alone: their temporary files (until
  // they are abandoned, kAbandonedTempSeconds) and metadata or locks of entries whose lock is
  // held. Deleting a writer's temporary file made its compile fail (issue 12).
  remove_stale(layer, /*everything_unheld=*/true);
  return Ok{};
}

void Cache::remove_stale(Layer& layer, bool everything_unheld) {
  const std::int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto old = [now_s](const struct stat& st) { return now_s - st.st_mtim.tv_sec > kAbandonedTempSeconds; };
  for (const std::string& n : list_dir(layer.tmp_fd.get())) {
    struct stat st {};
    if (::fstatat(layer.tmp_fd.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && old(st))
      ::unlinkat(layer.tmp_fd.get(), n.c_str(), 0);
  }
  // Orphans in the shards: metadata without its entry, and locks, once nobody holds the lock.
  // In normal operation (after a store's scan) only old ones, so a build in progress keeps its
  // lock file; `cache clear` takes every unheld one.
  for (const std::string& sh : list_dir(layer.entries_fd.get())) {
    if (sh.size() != 2) continue;
    Fd sd(::openat(layer.entries_fd.get(), sh.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sd.valid()) continue;
    for (const std::string& n : list_dir(sd.get())) {
      if (!n.ends_with(".json") && !n.ends_with(".lock")) continue;
      const std::string hex = n.substr(0, n.size() - 5);
      struct stat st {};
      if (::fstatat(sd.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!everything_unheld && !old(st)) continue;
      struct stat bin {};
      if (::fstatat(sd.get(), (hex + ".bin").c_str(), &bin, AT_SYMLINK_NOFOLLOW) == 0) continue;  // not an orphan
      auto lock = EntryLock::acquire(sd.get(), hex + ".lock", layer.path_of(sh, hex + ".lock"), false);
      if (!lock || !lock->held()) continue;  // a writer is at work on this entry
      ::unlinkat(sd.get(), (hex + ".json").c_str(), 0);
      ::unlinkat(sd.get(), (hex + ".lock").c_str(), 0);  // held by us: a waiter re-checks the inode
    }
  }
}

}  // namespace archguard::jit
