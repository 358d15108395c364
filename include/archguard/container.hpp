// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// Inputs: plain ELF files (memory-mapped, never read whole), fatbin files (nvcc --fatbin),
/// `ar` static archives, wheels and
/// other zip files, tar archives (plain, gz, zst, xz, bz2) through libarchive, and directories
/// (recursive; files without device code are skipped quietly). Each yields the ELF objects
/// that carry device code, with their fatbins. A tar archive that is a container image (a
/// `docker save` manifest.json, an OCI layout's index.json) yields the objects of its final
/// filesystem: its layers are applied in order (docs/cli.md).

#include <archguard/fatbin.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace archguard {

/// Bytes that back the spans of parsed fatbins: a mapping or a buffer. A member stored as it is
/// in an archive mapped whole is a view of the archive's storage (which it keeps alive), when the
/// archive's storage is owned by a shared_ptr.
class Storage : public std::enable_shared_from_this<Storage> {
 public:
  virtual ~Storage() = default;
  virtual Bytes bytes() const = 0;
  /// Drops the pages of [offset, offset + length) from memory where that is possible (a
  /// read-only mapping refetches them on the next access); the bytes stay valid.
  virtual void release(std::uint64_t offset, std::uint64_t length) const {
    (void)offset;
    (void)length;
  }
  /// Announces that [offset, offset + length) is about to be read in full (a mapping reads it
  /// ahead); the bytes are valid either way.
  virtual void prefetch(std::uint64_t offset, std::uint64_t length) const {
    (void)offset;
    (void)length;
  }
  /// Whether some of the bytes vanished while they were read (a mapped file that another
  /// process truncated: the lost pages read as zeros, see guard_mapping). What was read from
  /// such bytes is not to be trusted; the scan reports the file as an error.
  virtual bool damaged() const { return false; }
  /// The first offset at or after `offset` that may hold bytes other than zeros (the holes of
  /// a sparse file are skipped, see DataHook); `offset` itself by default.
  virtual std::uint64_t next_data(std::uint64_t offset) const { return offset; }
};

/// Maps a file read-only (an empty file gives empty bytes). Anything but a regular file is
/// refused without blocking (a FIFO or a socket named by mistake would wait forever).
Result<std::shared_ptr<const Storage>> map_file(const std::string& path);

/// Budgets of the work archives may cause: what their members inflate to. Defaults are far
/// above real CUDA packages (a 700 MB library in a 400 MB wheel inflates 1.75 times) and far
/// below what a decompression bomb asks for; a budget that is hit is an error naming the member
/// and the limit. The CLI raises them with --max-inflated, --max-inflated-total and
/// --max-ratio (or ARCHGUARD_MAX_INFLATED, ARCHGUARD_MAX_INFLATED_TOTAL, ARCHGUARD_MAX_RATIO).
struct InflateBudget {
  /// Bytes inflated from the archives of one input file (nested archives included).
  std::uint64_t per_input = std::uint64_t{8} << 30;
  /// Bytes inflated over every input of a run (a directory of archives, several arguments).
  std::uint64_t per_run = std::uint64_t{32} << 30;
  /// Bytes inflated per byte of the input file, checked once an input has inflated more than
  /// `ratio_floor` (small archives of zeros compress very well and are harmless).
  std::uint64_t max_ratio = 200;
  std::uint64_t ratio_floor = std::uint64_t{64} << 20;
  /// The bytes inflated so far in this run; shared by every scan_path call given the same
  /// options. Null: each scan_path call counts on its own.
  std::shared_ptr<std::atomic<std::uint64_t>> run_total = std::make_shared<std::atomic<std::uint64_t>>(0);
};

/// The most worker threads a scan starts (a larger ScanOptions::threads is lowered to it): each
/// thread holds buffers and a mapped chunk, and thousands of them exhaust the process.
inline constexpr unsigned kMaxThreads = 256;

struct ScanReport;

struct ScanOptions {
  /// Worker threads for the files of a directory, or for the embedded-fatbin search of a file
  /// named directly (read_elf_fatbins); 0: the hardware concurrency. At most max_threads.
  unsigned threads = 0;
  /// Archive members larger than this are spilled to an unlinked temporary file and mapped
  /// instead of being held in memory.
  std::uint64_t spill_threshold = std::uint64_t{32} << 20;
  /// Files of a directory up to this size are read into memory rather than mapped: a tree of
  /// 100,000 objects with device code would otherwise hold 100,000 mappings, past the kernel's
  /// vm.max_map_count (65,530 by default), and fail.
  std::uint64_t read_small_files_below = std::uint64_t{1} << 20;
  /// At most this many file mappings are held at once by the reports of a process; a larger
  /// file read when the limit is reached is an error naming it and the limit.
  std::size_t max_mappings = 16384;
  unsigned max_depth = 4;  ///< archives nested deeper are not opened
  /// Search the loaded data sections of ELF files for fatbins embedded as data. Off for a reading
  /// that shows none of them (inspect --list-like-cuobjdump: cuobjdump does not find them).
  bool embedded = true;
  /// The results cache (or another store of facts): objects read from files get an identity
  /// (ObjectFatbins::identity), and the embedded-fatbin search of a file it knows is skipped.
  /// Null: no identities, every file searched. Not owned; used from the scan's threads.
  FactsStore* facts = nullptr;
  /// Archive members that decompress to more than this are refused (decompression bombs).
  std::uint64_t max_member_size = std::uint64_t{16} << 30;
  InflateBudget budget;
  /// What may be derived from an input: name lengths, kernel-name bytes per image, the work of
  /// the embedded-fatbin search (fatbin.hpp; the CLI's ARCHGUARD_MAX_NAME_LENGTH, ...).
  DerivedLimits limits;
  /// `threads` is lowered to this (kMaxThreads by default; the CLI's ARCHGUARD_MAX_THREADS).
  unsigned max_threads = kMaxThreads;
  /// A walk of the directory scanned shared with another reader of it (see SharedWalk); null
  /// or another directory's: the scan walks on its own.
  class SharedWalk* walk = nullptr;
  /// For a directory: each file's objects are handed to this, in path order, as soon as the
  /// file and every file before it are read, instead of being kept in the report. The part
  /// holds the file's objects and the storage their spans point into (the report keeps the
  /// files read, errors and skipped notes, in the same order as without it). Called on one of
  /// the scan's threads, one call at a time. A file is not started while it is more than
  /// `stream_ahead` files (0: twice the threads) past the last one handed over, so the
  /// reports held at once are a few files', not the tree's. Not used for a file named directly.
  std::function<void(ScanReport& part)> each_file;
  std::size_t stream_ahead = 0;
};

/// One walk of a directory for several readers of it in one process: `doctor` reads its first
/// FILE twice at once (what the files need of the CUDA runtime, and their device code), and a
/// walk of a large tree (76,660 entries of an environment's site-packages) costs a stat of each
/// entry. The first of list_files() and scan_path() to ask for `root` walks it, with the
/// files' identities; the others wait for that walk and take a copy of what it found.
class SharedWalk {
 public:
  explicit SharedWalk(std::string root);
  /// A walk of `root` made already by list_files() (its files, errors and skipped notes): the
  /// readers take it as their walk.
  SharedWalk(std::string root, std::vector<struct ListedFile> files, std::vector<std::string> errors, std::vector<std::string> skipped);
  ~SharedWalk();
  SharedWalk(const SharedWalk&) = delete;
  SharedWalk& operator=(const SharedWalk&) = delete;
  const std::string& root() const;
  struct State;

 private:
  friend struct SharedWalkAccess;
  std::unique_ptr<State> state_;
};

/// What one input path held.
struct ScanReport {
  std::string input;  ///< the path as given
  bool directory = false;
  /// ELF objects with device code. A plain ELF file named directly and the objects of a static
  /// library are listed even without.
  std::vector<ObjectFatbins> objects;
  /// Files or members that could not be read (messages naming file, offset and value).
  std::vector<std::string> errors;
  /// Files and members that could hold device code but were not read, each "<path>: <why>": a
  /// symbolic link that leads out of the directory, a second name (hard link) of a file already
  /// read, a Mach-O file or a thin archive (not supported), a file of a container image's layer
  /// that a later layer deletes (whiteout, opaque directory) or replaces: read, not judged.
  /// Counted apart from files_read.
  std::vector<std::string> skipped;
  /// Files whose bytes were read: 1 for a file, the regular files of a directory (each name of
  /// a hard-linked file once; symbolic links are not followed below the directory).
  std::size_t files_read = 0;
  std::vector<std::shared_ptr<const Storage>> storage;  ///< keeps the objects' spans alive
};

/// Drops from memory the pages of an object's payloads once nothing more will be read from them
/// (a judged object): the bytes stay valid, a later read fetches them again from the page cache.
/// Without it a run's peak memory is the sum of every payload it decoded, with it a few objects'.
/// Built over the storage of the reports that hold the objects; used from several threads.
class PayloadPages {
 public:
  explicit PayloadPages(std::span<const ScanReport> reports);
  void release(const ObjectFatbins& object) const;
  /// The whole pages inside `bytes` (one image's payload, say), when they lie in one storage.
  void release(Bytes bytes) const;

 private:
  struct Range {
    const std::byte* begin;
    const std::byte* end;
    const Storage* storage;
  };
  std::vector<Range> ranges_;  ///< by begin; storages do not overlap
};

/// What identifies the content of a file for the results cache: device, inode, size, and the
/// modification and change times in nanoseconds (any write moves the change time).
struct FileStamp {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
};

/// A regular file below a directory, as the directory walk of scan_path lists it.
struct ListedFile {
  std::string path;
  std::uint32_t mode = 0;          ///< st_mode
  std::optional<FileStamp> stamp;  ///< none when the file changed in the last two seconds
};

/// The regular files below the directory `root`, in path order, listed on up to `threads`
/// threads as scan_path walks a directory: symbolic links below `root` are not followed, a file
/// with several names (hard links) is listed once, under the first. Each directory that cannot
/// be read is named in `errors`.
/// With `shared` of `root`, its walk (see SharedWalk). With `skipped`, the notes scan_path
/// gives of what it does not read (links out of the tree, second names) go there.
std::vector<ListedFile> list_files(const std::string& root, unsigned threads, std::vector<std::string>& errors,
                                   SharedWalk* shared = nullptr, std::vector<std::string>* skipped = nullptr);

/// Reads one path. Fails only when the path itself cannot be opened or is of no supported
/// kind; problems inside archives and directories are collected in ScanReport::errors.
Result<ScanReport> scan_path(const std::string& path, const ScanOptions& options = {});

/// Reads bytes already in memory: an ELF file, a fatbin file or an archive. `name` names them in messages.
/// The bytes must outlive the report.
Result<ScanReport> scan_bytes(Bytes bytes, const std::string& name, const ScanOptions& options = {});

}  // namespace archguard
