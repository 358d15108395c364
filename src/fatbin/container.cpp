// SPDX-License-Identifier: Apache-2.0
// Inputs: ELF through mmap, archives through libarchive, directories walked in parallel.
#include <archguard/container.hpp>
#include <archguard/deps.hpp>
#include <archguard/pe.hpp>

#include "common/fd.hpp"
#include "common/fs.hpp"
#include "fatbin/file_facts.hpp"
#include "fatbin/zip_directory.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <libdeflate.h>
#include <nlohmann/json.hpp>
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <locale.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>

namespace archguard {
namespace {

/// File mappings held by this process's reports (ScanOptions::max_mappings).
std::atomic<std::size_t> g_mappings{0};

class MappedStorage final : public Storage {
 public:
  MappedStorage(void* addr, std::size_t size) : addr_(addr), size_(size), guard_(guard_mapping(addr, size)) { ++g_mappings; }
  ~MappedStorage() override {
    unguard_mapping(guard_);
    if (addr_ != nullptr) ::munmap(addr_, size_);
    --g_mappings;
  }
  bool damaged() const override { return mapping_damaged(guard_); }
  /// The data extents of a sparse file (SEEK_DATA / SEEK_HOLE at map time); none: dense.
  void set_extents(std::vector<std::pair<std::uint64_t, std::uint64_t>> extents) { extents_ = std::move(extents); }
  std::uint64_t next_data(std::uint64_t offset) const override {
    if (extents_.empty()) return offset;
    auto it = std::upper_bound(extents_.begin(), extents_.end(), offset,
                               [](std::uint64_t o, const auto& e) { return o < e.second; });  // first extent ending after offset
    if (it == extents_.end()) return size_;
    return std::max(offset, it->first);
  }
  MappedStorage(const MappedStorage&) = delete;
  MappedStorage& operator=(const MappedStorage&) = delete;
  Bytes bytes() const override { return {static_cast<const std::byte*>(addr_), size_}; }
  void release(std::uint64_t offset, std::uint64_t length) const override {
    const std::uint64_t page = page_size();
    if (offset >= size_) return;
    const std::uint64_t end = std::min<std::uint64_t>(offset + std::min<std::uint64_t>(length, size_ - offset), size_);
    const std::uint64_t first = (offset + page - 1) / page * page;  // whole pages inside only
    const std::uint64_t last = end / page * page;
    if (last > first)
      ::madvise(static_cast<char*>(addr_) + first, static_cast<std::size_t>(last - first), MADV_DONTNEED);
  }
  void prefetch(std::uint64_t offset, std::uint64_t length) const override {
    const std::uint64_t page = page_size();
    if (offset >= size_) return;
    const std::uint64_t first = offset / page * page;
    const std::uint64_t end = std::min<std::uint64_t>(size_, offset + std::min<std::uint64_t>(length, size_ - offset));
    // Sequential: the window is read once from start to end, then released (undoing the
    // MADV_RANDOM of map_fd for it); slightly less CPU than either alternative measured over
    // cuBLASLt's 96 MB .ldata (19 ms, against 20-27 ms as mapped and 30 ms through pread).
    ::madvise(static_cast<char*>(addr_) + first, static_cast<std::size_t>(end - first), MADV_SEQUENTIAL);
  }

 private:
  void* addr_;
  std::size_t size_;
  int guard_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> extents_;  ///< [start, end) with data, sorted
};

/// The data extents of a file whose blocks on disk cover less than half its size (sparse), or
/// none (dense, or more than 65,536 extents: then every byte is read as before).
std::vector<std::pair<std::uint64_t, std::uint64_t>> data_extents(int fd, const struct stat& st) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  if (st.st_size <= 0 || static_cast<std::uint64_t>(st.st_blocks) * 512 >= static_cast<std::uint64_t>(st.st_size) / 2) return out;
  off_t pos = 0;
  while (pos < st.st_size) {
    const off_t data = ::lseek(fd, pos, SEEK_DATA);
    if (data < 0) break;  // ENXIO: only a hole remains (or no SEEK_DATA support: dense)
    off_t hole = ::lseek(fd, data, SEEK_HOLE);
    if (hole < 0) hole = st.st_size;
    out.emplace_back(static_cast<std::uint64_t>(data), static_cast<std::uint64_t>(hole));
    if (out.size() > 65536) return {};
    pos = hole;
  }
  if (out.empty()) out.emplace_back(static_cast<std::uint64_t>(st.st_size), static_cast<std::uint64_t>(st.st_size));  // all hole
  return out;
}

class BufferStorage final : public Storage {
 public:
  explicit BufferStorage(std::vector<std::byte> data) : data_(std::move(data)) {}
  Bytes bytes() const override { return data_; }

 private:
  std::vector<std::byte> data_;
};

/// Bytes in memory that a decoder writes whole: allocated without being zeroed first.
class HeapStorage final : public Storage {
 public:
  explicit HeapStorage(std::size_t size) : data_(std::make_unique_for_overwrite<std::byte[]>(size)), size_(size) {}
  std::byte* data() { return data_.get(); }
  Bytes bytes() const override { return {data_.get(), size_}; }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t size_;
};

/// A member stored as it is in an archive whose bytes are mapped (a plain `ar` or `tar` read
/// from its file): its bytes are a range of the archive's, not a copy (static libraries of
/// 50 MB were copied member by member, 16 threads at once: 125 MB of a doctor's peak).
class SliceStorage final : public Storage {
 public:
  SliceStorage(std::shared_ptr<const Storage> whole, std::uint64_t offset, std::uint64_t size)
      : whole_(std::move(whole)), offset_(offset), size_(size) {}
  Bytes bytes() const override { return whole_->bytes().subspan(static_cast<std::size_t>(offset_), static_cast<std::size_t>(size_)); }
  void release(std::uint64_t offset, std::uint64_t length) const override {
    if (offset < size_) whole_->release(offset_ + offset, std::min(length, size_ - offset));
  }
  void prefetch(std::uint64_t offset, std::uint64_t length) const override {
    if (offset < size_) whole_->prefetch(offset_ + offset, std::min(length, size_ - offset));
  }
  bool damaged() const override { return whole_->damaged(); }
  std::uint64_t next_data(std::uint64_t offset) const override {
    if (offset >= size_) return offset;
    return std::min(size_, whole_->next_data(offset_ + offset) - offset_);
  }

 private:
  std::shared_ptr<const Storage> whole_;
  std::uint64_t offset_, size_;
};

/// This thread's libdeflate decompressor (a few KiB of tables, allocated once); null when the
/// allocation failed.
libdeflate_decompressor* deflate_decompressor() {
  struct Free {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  thread_local std::unique_ptr<libdeflate_decompressor, Free> d(libdeflate_alloc_decompressor());
  return d.get();
}

using common::errno_text;

/// libarchive's message, which may be absent (a null pointer).
std::string archive_text(archive* a) {
  const char* m = archive_error_string(a);
  return m != nullptr ? m : "unknown libarchive error";
}

std::string_view file_type_text(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  return "not a regular file";
}

/// Opens without blocking: a FIFO named by mistake would otherwise wait for a writer forever.
int open_nonblocking(const std::string& path) { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK); }

/// The whole of a small file, read into memory (no mapping held); an error when it changed size
/// while being read.
Result<std::shared_ptr<const Storage>> read_whole(int fd, const std::string& path, std::uint64_t size) {
  std::vector<std::byte> buf(static_cast<std::size_t>(size));
  std::uint64_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, buf.data() + got, static_cast<std::size_t>(size - got), static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(path + ": cannot read: " + errno_text(errno), errno);
    if (n == 0) return Error{ErrorKind::io, path + ": the file shrank to " + hex(got) + " bytes while it was being read (it had " + hex(size) + ")"};
    got += static_cast<std::uint64_t>(n);
  }
  return std::shared_ptr<const Storage>(std::make_shared<BufferStorage>(std::move(buf)));
}

Result<std::shared_ptr<const Storage>> map_fd(int fd, const std::string& path, std::size_t max_mappings = SIZE_MAX,
                                              std::uint64_t read_below = 0) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(path + ": cannot stat: " + errno_text(errno), errno);
  if (!S_ISREG(st.st_mode))
    return Error{ErrorKind::unsupported, path + ": is " + std::string(file_type_text(st.st_mode)) + ", not a regular file: only files are read"};
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) return std::shared_ptr<const Storage>(std::make_shared<BufferStorage>(std::vector<std::byte>{}));
  if (size < read_below) return read_whole(fd, path, size);
  if (g_mappings.load() >= max_mappings)
    return Error{ErrorKind::limit, path + ": not read: " + std::to_string(max_mappings) +
                                       " files are mapped already, the limit (files with device code are held mapped until the end; "
                                       "name fewer files at once)"};
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) return errno_error(path + ": cannot map: " + errno_text(errno), errno);
  // Only headers are read: keep the kernel from reading ahead megabytes around each one.
  ::madvise(addr, size, MADV_RANDOM);
  auto mapped = std::make_shared<MappedStorage>(addr, size);
  mapped->set_extents(data_extents(fd, st));
  return std::shared_ptr<const Storage>(std::move(mapped));
}

enum class Kind { elf,
                  pe,
                  fatbin,
                  archive,
                  device,
                  unsupported,
                  other };

bool starts_with(Bytes b, std::initializer_list<unsigned> magic, std::size_t at = 0) {
  if (b.size() < at + magic.size()) return false;
  std::size_t i = at;
  for (unsigned m : magic)
    if (b[i++] != std::byte(m)) return false;
  return true;
}

/// Why a file of a kind that can hold device code but is not read here is not: "" for others.
std::string_view unsupported_kind(Bytes b) {
  auto be32 = [&b](std::size_t at) {
    return static_cast<std::uint32_t>(std::to_integer<unsigned>(b[at]) << 24 | std::to_integer<unsigned>(b[at + 1]) << 16 |
                                      std::to_integer<unsigned>(b[at + 2]) << 8 | std::to_integer<unsigned>(b[at + 3]));
  };
  if (b.size() >= 8) {
    const std::uint32_t m = be32(0);
    if (m == 0xfeedface || m == 0xfeedfacf || m == 0xcefaedfe || m == 0xcffaedfe)
      return "a mach-o file (macos): not supported, its device code is not read";
    // A universal (fat) Mach-O file; a Java class file shares the magic but has a version >= 45
    // where this has its architecture count.
    if ((m == 0xcafebabe || m == 0xcafebabf) && be32(4) != 0 && be32(4) < 30)
      return "a universal mach-o file (macos): not supported, its device code is not read";
  }
  if (starts_with(b, {'!', '<', 't', 'h', 'i', 'n', '>', '\n'}))
    return "a thin archive (ar T): its members live in other files and are not read; name the object files";
  return {};
}

/// A PE image (Windows .dll, .exe, .pyd): "MZ" and, when the bytes reach e_lfanew, "PE\0\0".
/// A short head whose e_lfanew lies beyond it counts (an archive member's first bytes).
bool pe_head(Bytes b) {
  if (b.size() < 0x40 || b[0] != std::byte{'M'} || b[1] != std::byte{'Z'}) return false;
  std::uint32_t lfanew = 0;
  for (int i = 3; i >= 0; --i) lfanew = lfanew << 8 | std::to_integer<std::uint32_t>(b[0x3c + static_cast<std::size_t>(i)]);
  return std::uint64_t{lfanew} + 4 > b.size() || looks_like_pe(b);
}

Kind classify(Bytes b) {
  if (looks_like_elf(b)) return Kind::elf;
  if (pe_head(b)) return Kind::pe;
  if (!unsupported_kind(b).empty()) return Kind::unsupported;
  if (starts_with(b, {0x50, 0xed, 0x55, 0xba})) return Kind::fatbin;           // nvcc --fatbin output
  if (starts_with(b, {'!', '<', 'a', 'r', 'c', 'h', '>', '\n'}) ||             // ar
      starts_with(b, {'P', 'K', 3, 4}) || starts_with(b, {'P', 'K', 5, 6}) ||  // zip
      starts_with(b, {0x1f, 0x8b}) ||                                          // gzip
      starts_with(b, {0x28, 0xb5, 0x2f, 0xfd}) ||                              // zstd
      starts_with(b, {0xfd, '7', 'z', 'X', 'Z', 0}) ||                         // xz
      starts_with(b, {'B', 'Z', 'h'}) ||                                       // bzip2
      starts_with(b, {'u', 's', 't', 'a', 'r'}, 257))                          // tar
    return Kind::archive;
  if (classify_device_file(b) != DeviceFileKind::none) return Kind::device;  // PTX or LTO-IR
  return Kind::other;
}

/// Whether an ELF file is of a kind this reader does not handle at all (32-bit, big endian):
/// such files cannot carry device code a current driver loads, so directory walks skip them.
bool foreign_elf(Bytes b) {
  return b.size() <= EI_DATA || b[EI_CLASS] != std::byte{ELFCLASS64} || b[EI_DATA] != std::byte{ELFDATA2LSB};
}

std::string size_text(std::uint64_t v) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  unsigned u = 0;
  while (u < 4 && v >= (std::uint64_t{1} << (10 * (u + 1))) && v % (std::uint64_t{1} << (10 * (u + 1))) == 0) ++u;
  return hex(v) + " (" + std::to_string(v >> (10 * u)) + " " + units[u] + ")";
}

/// Makes this thread's locale C.UTF-8 for libarchive while it reads names: it converts the
/// names a zip marks as UTF-8 to the locale's charset, and in the C locale of most runs every
/// non-ASCII name failed to convert and was lost. Names without such a mark stay bytes. The
/// process locale is not touched (uselocale is per thread).
class Utf8NamesLocale {
 public:
  Utf8NamesLocale() {
    static const locale_t utf8 = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
    if (utf8 != static_cast<locale_t>(nullptr)) previous_ = ::uselocale(utf8);
  }
  ~Utf8NamesLocale() {
    if (previous_ != static_cast<locale_t>(nullptr)) ::uselocale(previous_);
  }
  Utf8NamesLocale(const Utf8NamesLocale&) = delete;
  Utf8NamesLocale& operator=(const Utf8NamesLocale&) = delete;

 private:
  locale_t previous_ = static_cast<locale_t>(nullptr);
};

/// An unlinked temporary file in $TMPDIR (else /tmp), where a large archive member is spilled:
/// std::tmpfile() ignores TMPDIR, and a container image's layers filled a small /tmp.
FILE* spill_file() {
  const char* env = std::getenv("TMPDIR");
  const std::string dir = env != nullptr && *env == '/' ? env : "/tmp";
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {  // no O_TMPFILE on this file system: create, then unlink at once
    std::string tmpl = dir + "/archguard-spill-XXXXXX";
    fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
    if (fd < 0) return nullptr;
    ::unlink(tmpl.c_str());
  }
  FILE* f = ::fdopen(fd, "w+b");
  if (f == nullptr) ::close(fd);
  return f;
}

bool same_finds(const EmbeddedFinds& a, const EmbeddedFinds& b) {
  if (a.sections.size() != b.sections.size() || a.no_kernels != b.no_kernels) return false;
  for (std::size_t i = 0; i < a.sections.size(); ++i) {
    const auto &x = a.sections[i], &y = b.sections[i];
    if (x.name != y.name || x.offset != y.offset || x.size != y.size || x.fatbins != y.fatbins) return false;
  }
  return true;
}

/// The fields of a file's identity (file_identity), or nothing for a file that changed in the
/// last two seconds.
std::optional<FileStamp> file_stamp(const struct stat& st) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  // Nanoseconds since the epoch fit in 64 bits until 2262.
  auto ns = [](const timespec& t) { return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; };
  constexpr std::int64_t kSettled = std::int64_t{2} * 1000000000;
  if (ns(st.st_mtim) + kSettled > ns(now) || ns(st.st_ctim) + kSettled > ns(now)) return std::nullopt;
  return FileStamp{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                   static_cast<std::uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
}

/// A file's identity for the results cache (ObjectFatbins::identity): device, inode, size and
/// the modification and change times in nanoseconds. Any write moves the change time, which no
/// one can set back; a file that changed in the last two seconds (a timestamp's granularity on
/// some file systems, and a write may follow within it) has none, and is read anew each time.
std::string file_identity(const struct stat& st) {
  const auto stamp = file_stamp(st);
  if (!stamp) return {};
  return "file " + std::to_string(stamp->dev) + " " + std::to_string(stamp->ino) + " " + std::to_string(stamp->size) + " " +
         std::to_string(stamp->mtime_ns) + " " + std::to_string(stamp->ctime_ns);
}

// ---- container images: layers applied in order ---------------------------------------------

/// A member path as layers and manifests name it: no leading "./" or "/", no trailing "/".
std::string layer_path(std::string p) {
  while (p.starts_with("./")) p.erase(0, 2);
  while (p.starts_with("/")) p.erase(0, 1);
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

/// One entry of a layer of a container image, as the walk met it, with the objects read from it.
struct LayerEntry {
  std::string path;     ///< layer_path of the entry
  std::string display;  ///< "<image>:<layer>:<path>"
  bool directory = false;
  std::size_t objects_begin = 0, objects_end = 0;  ///< report.objects read from it
  std::size_t errors_begin = 0, errors_end = 0;    ///< report.errors it caused
  bool unreadable = false;                         ///< its bytes could not be read: the layer's rest was not read, the error stays
};

/// What the top level of a tar archive showed that may make it a container image: its small JSON
/// members (manifest.json, index.json, blobs) and every archive member read, with its entries.
struct ImageFacts {
  std::map<std::string, std::string> json;  ///< by layer_path
  std::map<std::string, std::vector<LayerEntry>> layers;
};

/// Whether JSON text nests no deeper than `most` arrays and objects. The parser and the
/// destructor of nlohmann::json recurse per level: a 1 MiB manifest.json of `[[[[...]]]]`
/// overflowed the stack. Manifests nest 4 levels.
bool shallow_json(std::string_view text, unsigned most) {
  unsigned depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > most) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

/// The JSON text of a member, or null when it is not there, nests deeper than 64 levels or does
/// not parse (never throws).
nlohmann::json json_member(const ImageFacts& f, const std::string& path) {
  auto it = f.json.find(path);
  if (it == f.json.end() || !shallow_json(it->second, 64)) return nullptr;
  nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}

const nlohmann::json* json_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

/// The layer members of the image, bottom first: from a `docker save` manifest.json
/// ([{"Layers": [...]}]), else from an OCI layout's index.json (its one manifest, through nested
/// indexes, and that manifest's "layers" digests as blobs/<algorithm>/<hex>). Nothing when the
/// archive is no image; `why` says why an image's layers are not applied (several images).
std::optional<std::vector<std::string>> image_layers(const ImageFacts& f, std::string& why) {
  const nlohmann::json manifest = json_member(f, "manifest.json");
  if (manifest.is_array() && !manifest.empty()) {
    if (manifest.size() != 1) {
      why = "manifest.json names " + std::to_string(manifest.size()) +
            " images: their layers are not applied, every layer's files are judged";
      return std::nullopt;
    }
    const nlohmann::json* layers = json_field(manifest[0], "Layers");
    if (layers == nullptr || !layers->is_array()) return std::nullopt;
    std::vector<std::string> out;
    for (const auto& l : *layers)
      if (l.is_string()) out.push_back(layer_path(l.get<std::string>()));
    return out;
  }
  nlohmann::json index = json_member(f, "index.json");
  for (int depth = 0; depth < 4 && index.is_object(); ++depth) {
    auto blob = [](const nlohmann::json& descriptor) -> std::string {
      const nlohmann::json* d = json_field(descriptor, "digest");
      if (d == nullptr || !d->is_string()) return {};
      std::string digest = d->get<std::string>();
      const std::size_t colon = digest.find(':');
      if (colon == std::string::npos) return {};
      return "blobs/" + digest.substr(0, colon) + "/" + digest.substr(colon + 1);
    };
    if (const nlohmann::json* layers = json_field(index, "layers"); layers != nullptr && layers->is_array()) {
      std::vector<std::string> out;
      for (const auto& l : *layers)
        if (std::string b = blob(l); !b.empty()) out.push_back(b);
      return out;
    }
    const nlohmann::json* manifests = json_field(index, "manifests");
    if (manifests == nullptr || !manifests->is_array() || manifests->empty()) return std::nullopt;
    if (manifests->size() != 1) {
      why = "index.json names " + std::to_string(manifests->size()) +
            " manifests: their layers are not applied, every layer's files are judged";
      return std::nullopt;
    }
    index = json_member(f, blob((*manifests)[0]));
  }
  return std::nullopt;
}

/// Applies the layers of an image in order: an object read from a layer is judged only when
/// the file it came from is visible in the final filesystem. A path that a later layer deletes
/// (a whiteout `dir/.wh.name` of it or of a directory above it, an opaque marker
/// `dir/.wh..wh..opq` of a directory above it) or replaces (an entry at the same path, or a
/// non-directory at a directory above it) is moved to `skipped` with the reason.
/// Errors that a hidden file caused are dropped with it (a file not in the image cannot be
/// loaded), unless `keep_errors` (a budget stopped the read: the errors say so, and stay).
void apply_layers(const ImageFacts& f, const std::vector<std::string>& order, ScanReport& report, bool keep_errors) {
  struct Cover {
    std::size_t layer = 0;  ///< 1-based, bottom first
    std::string how;        ///< "deleted by layer N (whiteout X)" ...
  };
  std::unordered_map<std::string, Cover> exact;    // the path itself is hidden
  std::unordered_map<std::string, Cover> subtree;  // everything below the path is hidden
  std::vector<bool> drop(report.objects.size(), false), drop_error(report.errors.size(), false);
  const std::string of = " of " + std::to_string(order.size());
  for (std::size_t i = order.size(); i-- > 0;) {
    auto it = f.layers.find(order[i]);
    if (it == f.layers.end()) continue;  // not read as an archive: nothing of it was judged
    for (const LayerEntry& e : it->second) {
      if (e.objects_end == e.objects_begin && e.errors_end == e.errors_begin) continue;
      const Cover* c = nullptr;
      if (auto x = exact.find(e.path); x != exact.end()) c = &x->second;
      for (std::size_t slash = e.path.find('/'); c == nullptr && slash != std::string::npos; slash = e.path.find('/', slash + 1))
        if (auto x = subtree.find(e.path.substr(0, slash)); x != subtree.end()) c = &x->second;
      if (c == nullptr) continue;
      for (std::size_t k = e.objects_begin; k < e.objects_end && k < drop.size(); ++k) drop[k] = true;
      if (!keep_errors && !e.unreadable)
        for (std::size_t k = e.errors_begin; k < e.errors_end && k < drop_error.size(); ++k) drop_error[k] = true;
      report.skipped.push_back(e.display + ": " + c->how + ": not in the image's final filesystem, not judged (layer " +
                               std::to_string(i + 1) + of + ")");
    }
    const std::string n = std::to_string(i + 1) + of;
    for (const LayerEntry& e : it->second) {
      const std::size_t slash = e.path.rfind('/');
      const std::string dir = slash == std::string::npos ? std::string() : e.path.substr(0, slash);
      const std::string base = slash == std::string::npos ? e.path : e.path.substr(slash + 1);
      if (base == ".wh..wh..opq") {
        subtree[dir] = Cover{i + 1, "deleted by layer " + n + " (opaque directory " + e.display + ")"};
      } else if (base.starts_with(".wh.")) {
        const std::string target = (dir.empty() ? std::string() : dir + "/") + base.substr(4);
        Cover c{i + 1, "deleted by layer " + n + " (whiteout " + e.display + ")"};
        exact[target] = c;
        subtree[target] = std::move(c);
      } else {
        Cover c{i + 1, "replaced by layer " + n + " (" + e.display + ")"};
        if (!e.directory) subtree[e.path] = c;
        exact[e.path] = std::move(c);
      }
    }
  }
  std::size_t kept = 0;
  for (std::size_t k = 0; k < report.objects.size(); ++k)
    if (k >= drop.size() || !drop[k]) {
      if (kept != k) report.objects[kept] = std::move(report.objects[k]);
      ++kept;
    }
  report.objects.resize(kept);
  kept = 0;
  for (std::size_t k = 0; k < report.errors.size(); ++k)
    if (k >= drop_error.size() || !drop_error[k]) {
      if (kept != k) report.errors[kept] = std::move(report.errors[k]);
      ++kept;
    }
  report.errors.resize(kept);
}

struct Scanner {
  const ScanOptions& options;
  ScanReport& report;
  std::uint64_t input_size = 0;  ///< bytes of the input file: the base of the ratio budget
  std::uint64_t inflated = 0;    ///< bytes inflated from this input's archives so far
  bool stopped = false;          ///< a budget was hit: read no further member of this input
  /// Threads for the embedded-fatbin scan of one ELF file: 1 inside a directory walk, whose
  /// files are already read in parallel.
  unsigned scan_threads = 1;
  /// The identity of the object being read (ObjectFatbins::identity): the file's, then with the
  /// member's ordinal and path inside archives. Empty without a store, or for bytes in memory.
  std::string id = {};
  /// The top-level archive being read, as a container image candidate (scan_archive at depth 1),
  /// and the entries of the layer being read (its members at `layer_depth`).
  ImageFacts* image = nullptr;
  std::vector<LayerEntry>* layer = nullptr;
  unsigned layer_depth = 0;
  /// The storage of the input's bytes (a file's mapping), when the caller has one: a zip read
  /// from it has its deflated members paged in and out around their inflation.
  const Storage* input_storage = nullptr;

  /// A member stored as it is (plain ar or tar, not sparse) in an archive whose bytes are the
  /// input's storage, shared: where its bytes begin there.
  struct InPlace {
    std::shared_ptr<const Storage> archive;
    std::uint64_t at = 0;
  };

  /// A deflated zip member libdeflate may inflate whole (zip_directory.hpp): the zip's bytes,
  /// their storage when they are the input's mapping, and the member.
  struct Deflated {
    Bytes zip;
    const Storage* storage = nullptr;
    detail::ZipMember member;
  };

  void add(ObjectFatbins o) {
    o.identity = id;
    report.objects.push_back(std::move(o));
  }

  /// Which budget `mine` bytes inflated from this input and `run` from all inputs exceed, as
  /// the reason a message gives; empty when none is: the one rule of charge() and within_budget().
  std::string budget_breach(std::uint64_t mine, std::uint64_t run) const {
    const InflateBudget& b = options.budget;
    if (mine > b.per_input)
      return "the input's archives inflate to more than the limit " + size_text(b.per_input) +
             " per input (raise it with --max-inflated or ARCHGUARD_MAX_INFLATED)";
    if (run > b.per_run)
      return "the inputs' archives inflate to more than the limit " + size_text(b.per_run) +
             " per run (raise it with --max-inflated-total or ARCHGUARD_MAX_INFLATED_TOTAL)";
    if (mine > b.ratio_floor && b.max_ratio != 0 && mine / std::max<std::uint64_t>(input_size, 1) >= b.max_ratio)
      return "the input of " + hex(input_size) + " bytes inflates more than " + std::to_string(b.max_ratio) +
             " times (raise the ratio with --max-ratio or ARCHGUARD_MAX_RATIO)";
    return {};
  }

  /// Whether `n` more inflated bytes stay within every budget (nothing is charged).
  bool within_budget(std::uint64_t n) const {
    const InflateBudget& b = options.budget;
    return budget_breach(inflated + n, b.run_total ? b.run_total->load() + n : inflated + n).empty();
  }

  /// Counts `n` more inflated bytes of `member`; an error once a budget is exceeded.
  Status charge(std::uint64_t n, const std::string& member) {
    inflated += n;
    const InflateBudget& b = options.budget;
    const std::uint64_t run = b.run_total ? b.run_total->fetch_add(n) + n : inflated;
    const std::string why = budget_breach(inflated, run);
    if (why.empty()) return Ok{};
    stopped = true;
    return Error{ErrorKind::limit, member + ": stopped after inflating " + hex(inflated) + " bytes: " + why};
  }

  void add_elf(Bytes bytes, const std::string& display, const std::string& archive,
               const std::string& member, bool named_directly, const Storage* storage = nullptr) {
    // 32-bit or big-endian objects carry no device code a current driver loads: skipped in
    // directory walks and archives, an error only for a file the user named.
    if ((!named_directly || !archive.empty()) && foreign_elf(bytes)) return;
    auto elf = ElfFile::parse(bytes, display, options.limits.max_name_length);
    if (!elf) {
      report.errors.push_back(elf.message());
      return;
    }
    ReleaseHook release;
    DataHook next_data;
    if (storage != nullptr && storage->bytes().data() == bytes.data()) {
      release = [storage](std::uint64_t offset, std::uint64_t length) { storage->release(offset, length); };
      next_data = [storage](std::uint64_t offset) { return storage->next_data(offset); };
    }
    if (elf->machine() == kElfMachineCuda) {  // a cubin: device code by itself
      add_standalone(bytes, display, archive, member);
      return;
    }
    // Where an earlier run found this object's embedded fatbins, they are parsed there and the
    // data sections are not searched (the results cache, by the object's identity).
    FactsStore* facts = options.embedded && !id.empty() ? options.facts : nullptr;
    std::optional<EmbeddedFinds> known;
    if (facts != nullptr) known = facts->find_embedded(id);
    EmbeddedFinds found;
    // No prefetch hook: no madvise hint made the scan cheaper (docs/benchmarks-inspect.md).
    auto fatbins = read_elf_fatbins(*elf, release, {}, scan_threads, next_data, options.embedded, known ? &*known : nullptr,
                                    facts != nullptr ? &found : nullptr, options.limits);
    if (fatbins && facts != nullptr && (!known || !same_finds(*known, found))) facts->keep_embedded(id, found);
    if (!fatbins) {
      report.errors.push_back(fatbins.message());
      return;
    }
    if (fatbins->empty() && !named_directly) return;
    add(ObjectFatbins::of_elf(*elf, display, archive, member, std::move(*fatbins)));
    if (elf->type() == ET_DYN) {
      // A PIE is ET_DYN too; only its DF_1_PIE flag tells it from a shared library.
      if (auto dyn = read_dynamic(*elf)) report.objects.back().pie = dyn->pie;
    }
  }

  /// A Windows binary: its .nv_fatb and __nv_rel sections (pe.hpp).
  void add_pe(Bytes bytes, const std::string& display, const std::string& archive, const std::string& member,
              bool named_directly) {
    auto o = read_pe(bytes, display, archive, member);
    if (!o) {
      report.errors.push_back(o.message());
      return;
    }
    if (o->fatbins.empty() && !named_directly) return;
    add(std::move(*o));
  }

  /// An object without fatbins yet, named as the report names it.
  static ObjectFatbins named_object(const std::string& display, const std::string& archive, const std::string& member) {
    ObjectFatbins obj;
    obj.path = display;
    obj.archive = archive;
    obj.member = member;
    return obj;
  }

  void add_standalone(Bytes bytes, const std::string& display, const std::string& archive, const std::string& member) {
    auto fb = read_standalone(bytes, display);
    if (!fb) {
      report.errors.push_back(fb.message());
      return;
    }
    ObjectFatbins obj = named_object(display, archive, member);
    if (looks_like_elf(bytes)) {
      constexpr std::size_t at = offsetof(Elf64_Ehdr, e_type);  // read_standalone took it as a 64-bit little-endian cubin
      obj.elf_type = static_cast<std::uint16_t>(std::to_integer<unsigned>(bytes[at]) | std::to_integer<unsigned>(bytes[at + 1]) << 8);
      obj.machine = kElfMachineCuda;
    }
    obj.fatbins.push_back(std::move(*fb));
    add(std::move(obj));
  }

  void add_fatbin(Bytes bytes, const std::string& display, const std::string& archive, const std::string& member) {
    auto fatbins = Fatbin::parse_all(bytes, display, FatbinSection::memory);
    if (!fatbins) {
      report.errors.push_back(fatbins.message());
      return;
    }
    ObjectFatbins obj = named_object(display, archive, member);
    obj.fatbins = std::move(*fatbins);
    add(std::move(obj));
  }

  /// The member whose first bytes libarchive just read (`head`, classified as a kind that is
  /// read) as a view of the archive's storage, when they are found where `in_place` says and the
  /// whole member lies inside it within the member limit; null when it is to be copied after all
  /// (read_member goes on with `head`, and reports the limit itself).
  std::shared_ptr<const Storage> view_in_place(archive* a, const InPlace& in_place, std::int64_t size, Bytes head) {
    const Bytes whole = in_place.archive->bytes();
    if (size < 0 || in_place.at > whole.size() || static_cast<std::uint64_t>(size) > whole.size() - in_place.at ||
        head.size() > static_cast<std::uint64_t>(size) || static_cast<std::uint64_t>(size) > options.max_member_size)
      return nullptr;
    // The first bytes as libarchive read them, compared: the offset is trusted only then.
    if (std::memcmp(head.data(), whole.data() + in_place.at, head.size()) != 0) return nullptr;
    archive_read_data_skip(a);
    return std::make_shared<SliceStorage>(in_place.archive, in_place.at, static_cast<std::uint64_t>(size));
  }

  /// Reads the current libarchive entry into storage (memory, or a spilled temporary file), or
  /// nothing when its first bytes show no ELF file, fatbin or archive: such members are skipped
  /// without inflating them (zip, ar, plain tar) or drained under the budget (a compressed
  /// stream must be decoded to reach the next member anyway).
  /// A deflated zip member (`deflated`, not null) is inflated in one pass by libdeflate once its
  /// first bytes, inflated by libarchive, showed a kind that is read (inflate_whole).
  Result<std::shared_ptr<const Storage>> read_member(archive* a, const std::string& name, std::int64_t size_hint,
                                                     const Deflated* deflated = nullptr, const InPlace* in_place = nullptr) {
    std::vector<std::byte> buf;
    FILE* spill = nullptr;
    std::uint64_t total = 0;
    bool classified = false;
    std::vector<char> chunk_buf(std::size_t{1} << 16);
    char* chunk = chunk_buf.data();
    const int format = archive_format(a) & ARCHIVE_FORMAT_BASE_MASK;
    const bool stored = archive_filter_count(a) <= 1 && (format == ARCHIVE_FORMAT_TAR || format == ARCHIVE_FORMAT_AR);
    auto fail = [&spill](Error e) -> Result<std::shared_ptr<const Storage>> {
      if (spill != nullptr) std::fclose(spill);
      return e;
    };
    // The size the header announces is a claim: reserve no more than the spill threshold.
    if (size_hint > 0) buf.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(
        static_cast<std::uint64_t>(size_hint), std::min<std::uint64_t>(options.spill_threshold, 1u << 20))));
    for (;;) {
      // Classified once the 264 bytes classify() looks at have arrived (smaller members: whole).
      la_ssize_t n = archive_read_data(a, chunk, chunk_buf.size());
      if (n < 0) return fail(Error{ErrorKind::corrupt, name + ": cannot read: " + archive_text(a)});
      if (n == 0) break;
      total += static_cast<std::uint64_t>(n);
      // Only bytes a decoder produced are inflated: a member of a plain tar or ar is stored as
      // it is (its bytes are part of the input), and charging it made a plain tar layer inside
      // a plain image count twice.
      if (!stored)
        if (auto st = charge(static_cast<std::uint64_t>(n), name); !st) return fail(st.error());
      if (total > options.max_member_size)
        return fail(Error{ErrorKind::limit, name + ": member larger than the limit " + size_text(options.max_member_size)});
      const auto* p = reinterpret_cast<const std::byte*>(chunk);  // char buffer viewed as bytes
      if (!classified && buf.size() + static_cast<std::size_t>(n) >= 264) {
        classified = true;
        std::vector<std::byte> head(buf);
        head.insert(head.end(), p, p + n);
        const Kind head_kind = classify(head);
        if (head_kind == Kind::unsupported) report.skipped.push_back(name + ": " + std::string(unsupported_kind(head)));
        if (head_kind == Kind::other || head_kind == Kind::unsupported) {
          if (archive_filter_count(a) <= 1) {
            archive_read_data_skip(a);  // seeks or skips stored bytes: nothing is inflated
            return std::shared_ptr<const Storage>{};
          }
          for (;;) {  // a compressed stream: decoded to reach the next member, counted
            n = archive_read_data(a, chunk, chunk_buf.size());
            if (n < 0) return fail(Error{ErrorKind::corrupt, name + ": cannot read: " + archive_text(a)});
            if (n == 0) return std::shared_ptr<const Storage>{};
            if (auto st = charge(static_cast<std::uint64_t>(n), name); !st) return fail(st.error());
          }
        }
        // Read, and stored as it is in a mapped archive: its bytes where they lie (a member
        // classified on its first chunk only; one that arrives in smaller pieces is copied).
        if (in_place != nullptr && stored && buf.empty())
          if (auto view = view_in_place(a, *in_place, size_hint, head)) return view;
        if (deflated != nullptr && spill == nullptr) {
          if (auto whole = inflate_whole(*deflated, head, total, name)) {
            if (*whole) archive_read_data_skip(a);  // libarchive goes on with the next member
            return std::move(*whole);
          }
        }
      }
      if (spill == nullptr && buf.size() + static_cast<std::size_t>(n) > options.spill_threshold) {
        spill = spill_file();  // unlinked: disappears with the last reference to it
        if (spill == nullptr) return fail(errno_error(name + ": cannot create a temporary file: " + errno_text(errno), errno));
        if (!buf.empty() && std::fwrite(buf.data(), 1, buf.size(), spill) != buf.size())
          return fail(errno_error(name + ": cannot write a temporary file: " + errno_text(errno), errno));
        buf = {};
      }
      if (spill != nullptr) {
        if (std::fwrite(p, 1, static_cast<std::size_t>(n), spill) != static_cast<std::size_t>(n))
          return fail(errno_error(name + ": cannot write a temporary file: " + errno_text(errno), errno));
      } else {
        buf.insert(buf.end(), p, p + n);
      }
    }
    if (spill == nullptr) return std::shared_ptr<const Storage>(std::make_shared<BufferStorage>(std::move(buf)));
    std::fflush(spill);
    auto mapped = map_fd(::fileno(spill), name);
    std::fclose(spill);  // the mapping keeps the pages
    return mapped;
  }

  /// `d`'s member inflated whole by libdeflate from the zip's bytes into a buffer of the size
  /// the zip's headers give (above the spill threshold, a mapped temporary file), its size and
  /// CRC-32 checked; `head` is what libarchive inflated of it so far (`charged` bytes, charged),
  /// and must begin what libdeflate inflates. Nothing where the member is left to libarchive: a
  /// size over max_member_size or over a budget (libarchive's path stops with its message at
  /// the same member), a head that differs (libarchive and the zip's directory disagree).
  std::optional<Result<std::shared_ptr<const Storage>>> inflate_whole(const Deflated& d, Bytes head, std::uint64_t charged,
                                                                      const std::string& name) {
    using R = Result<std::shared_ptr<const Storage>>;
    const detail::ZipMember& m = d.member;
    if (m.size > options.max_member_size || head.size() > m.size || charged > m.size || !within_budget(m.size - charged))
      return std::nullopt;
    // Deflate expands at most 1032 times (258 bytes from one 2-bit code at best): a larger claim
    // is a lie, and a buffer (a temporary file of gigabytes) is not allocated for it.
    if (m.size / 1032 > m.compressed + 1) return std::nullopt;
    libdeflate_decompressor* decompressor = deflate_decompressor();
    if (decompressor == nullptr) return std::nullopt;
    const auto size = static_cast<std::size_t>(m.size);
    // The output: memory, or above the spill threshold an unlinked temporary file, its blocks
    // allocated first (a write through the mapping into a full file system would fault).
    std::shared_ptr<HeapStorage> heap;
    FILE* spill = nullptr;
    std::byte* out = nullptr;
    if (m.size > options.spill_threshold) {
      spill = spill_file();
      if (spill == nullptr) return R(errno_error(name + ": cannot create a temporary file: " + errno_text(errno), errno));
      const int rc = ::posix_fallocate(::fileno(spill), 0, static_cast<off_t>(size));
      void* addr = rc != 0 ? MAP_FAILED : ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, ::fileno(spill), 0);
      if (addr == MAP_FAILED) {
        const int e = rc != 0 ? rc : errno;
        std::fclose(spill);
        return R(errno_error(name + ": cannot write a temporary file: " + errno_text(e), e));
      }
      out = static_cast<std::byte*>(addr);
    } else {
      heap = std::make_shared<HeapStorage>(size);
      out = heap->data();
    }
    auto unmap = [&] {
      if (spill != nullptr) ::munmap(out, size);
    };
    auto close = [&] {
      unmap();
      if (spill != nullptr) std::fclose(spill);
    };
    auto done = [&](R r) -> std::optional<R> {
      close();
      return r;
    };
    if (d.storage != nullptr) d.storage->prefetch(m.data, m.compressed);
    std::size_t used = 0, got = 0;
    const libdeflate_result rc = libdeflate_deflate_decompress_ex(decompressor, d.zip.data() + m.data,
                                                                  static_cast<std::size_t>(m.compressed), out, size, &used, &got);
    if (d.storage != nullptr) d.storage->release(m.data, m.compressed);
    const std::string where = "the deflated data at " + hex(m.data) + " (" + hex(m.compressed) + " bytes)";
    auto corrupt = [&](const std::string& why) { return done(Error{ErrorKind::corrupt, name + ": " + why}); };
    if (rc == LIBDEFLATE_BAD_DATA) return corrupt("cannot inflate " + where + ": not a valid deflate stream");
    if (rc == LIBDEFLATE_INSUFFICIENT_SPACE)
      return corrupt(where + " inflates to more than the " + hex(m.size) + " bytes the zip's headers say");
    if (rc != LIBDEFLATE_SUCCESS) return corrupt("cannot inflate " + where + ": libdeflate error " + std::to_string(static_cast<int>(rc)));
    if (got < head.size() || std::memcmp(out, head.data(), head.size()) != 0) {  // not the member libarchive reads
      close();
      return std::nullopt;
    }
    if (got != size) return corrupt(where + " inflates to " + hex(got) + " bytes, not the " + hex(m.size) + " the zip's headers say");
    if (used != m.compressed)
      return corrupt(where + " ends after " + hex(used) + " bytes, not the " + hex(m.compressed) + " the zip's headers say");
    if (const std::uint32_t crc = libdeflate_crc32(0, out, size); crc != m.crc)
      return corrupt("the bytes inflated from " + where + " have the crc-32 " + hex(crc) + ", not the " + hex(m.crc) +
                     " the zip's headers say");
    if (auto st = charge(m.size - charged, name); !st) return done(st.error());
    if (spill == nullptr) return R(std::shared_ptr<const Storage>(std::move(heap)));
    unmap();
    auto mapped = map_fd(::fileno(spill), name);
    std::fclose(spill);  // the mapping keeps the pages
    return mapped;
  }

  /// The current entry's bytes, whole (at most `limit`), charged as read_member charges them:
  /// the small members of an image (manifest.json, index.json, blobs) whose JSON says how its
  /// layers stack; the bytes are then read as any member.
  Result<std::vector<std::byte>> read_whole(archive* a, const std::string& name, std::uint64_t limit) {
    const int format = archive_format(a) & ARCHIVE_FORMAT_BASE_MASK;
    const bool stored = archive_filter_count(a) <= 1 && (format == ARCHIVE_FORMAT_TAR || format == ARCHIVE_FORMAT_AR);
    std::vector<std::byte> buf;
    std::vector<char> chunk(std::size_t{1} << 16);
    for (;;) {
      const la_ssize_t n = archive_read_data(a, chunk.data(), chunk.size());
      if (n < 0) return Error{ErrorKind::corrupt, name + ": cannot read: " + archive_text(a)};
      if (n == 0) return buf;
      if (!stored)
        if (auto st = charge(static_cast<std::uint64_t>(n), name); !st) return st.error();
      if (buf.size() + static_cast<std::uint64_t>(n) > limit)
        return Error{ErrorKind::limit, name + ": member larger than its header said (" + size_text(limit) + ")"};
      const auto* p = reinterpret_cast<const std::byte*>(chunk.data());  // char buffer viewed as bytes
      buf.insert(buf.end(), p, p + n);
    }
  }

  /// A libarchive reader for every format and filter an input may use, opened on `file` (read
  /// through read()) or on `bytes`; null when the bytes are no readable archive (an error unless
  /// `quiet`).
  archive* open_archive(Bytes bytes, const std::string& display, bool quiet, const std::string* file) {
    archive* a = archive_read_new();
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_zstd(a);
    archive_read_support_filter_xz(a);
    archive_read_support_filter_bzip2(a);
    archive_read_support_format_ar(a);
    archive_read_support_format_zip(a);
    archive_read_support_format_tar(a);
    archive_read_support_format_gnutar(a);
    const int opened = file != nullptr ? archive_read_open_filename(a, file->c_str(), std::size_t{1} << 16)
                                       : archive_read_open_memory(a, bytes.data(), bytes.size());
    if (opened == ARCHIVE_OK) return a;
    if (!quiet) report.errors.push_back(display + ": not a readable archive: " + archive_text(a));
    archive_read_free(a);
    return nullptr;
  }

  /// Inside a layer every entry counts (directories, whiteouts, links): kept for apply_layers.
  void add_layer_entry(archive_entry* entry, const std::string& display) {
    const char* lp = archive_entry_pathname_utf8(entry);
    if (lp == nullptr) lp = archive_entry_pathname(entry);
    LayerEntry le;
    le.path = layer_path(lp != nullptr ? lp : "");
    le.display = display + ":" + le.path;
    le.directory = archive_entry_filetype(entry) == AE_IFDIR;
    le.objects_begin = le.objects_end = report.objects.size();
    le.errors_begin = le.errors_end = report.errors.size();
    if (!le.path.empty()) layer->push_back(std::move(le));
  }

  /// The current entry's bytes: whole for the small JSON members of a container image at the
  /// top (`image_json`, their text kept in `facts`), else as read_member reads any member.
  Result<std::shared_ptr<const Storage>> read_entry(archive* a, const std::string& member_display, const std::string& top_path,
                                                    std::int64_t size, bool image_json, ImageFacts& facts,
                                                    const Deflated* deflated = nullptr, const InPlace* in_place = nullptr) {
    if (!image_json) return read_member(a, member_display, size, deflated, in_place);
    AG_TRY(auto whole, read_whole(a, member_display, static_cast<std::uint64_t>(size)));
    if (!whole.empty() && (static_cast<char>(whole[0]) == '{' || static_cast<char>(whole[0]) == '['))
      facts.json[top_path].assign(reinterpret_cast<const char*>(whole.data()), whole.size());  // bytes as text
    return std::shared_ptr<const Storage>(std::make_shared<BufferStorage>(std::move(whole)));
  }

  /// Reads one member's bytes by their kind: an object, or an archive read one level deeper (at
  /// the top, perhaps a layer of a container image: its entries are kept in `facts`).
  void scan_member(const std::shared_ptr<const Storage>& storage, archive* a, const std::string& display, const std::string& member,
                   unsigned depth, bool top, const std::string& top_path, bool image_json, ImageFacts& facts) {
    const std::string member_display = display + ":" + member;
    const Bytes mb = storage->bytes();
    const Kind k = classify(mb);
    if (k == Kind::unsupported && (mb.size() < 264 || image_json))  // classified here, not in read_member
      report.skipped.push_back(member_display + ": " + std::string(unsupported_kind(mb)));
    if (k == Kind::other || k == Kind::unsupported) return;
    const std::size_t before = report.objects.size();
    // Static libraries: every object is listed (as cuobjdump does), with device code or not.
    const bool ar = (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_AR;
    if (k == Kind::elf) {
      add_elf(mb, member_display, display, member, ar, storage.get());
    } else if (k == Kind::pe) {
      add_pe(mb, member_display, display, member, false);
    } else if (k == Kind::fatbin) {
      add_fatbin(mb, member_display, display, member);
    } else if (k == Kind::device) {
      add_standalone(mb, member_display, display, member);
    } else {
      // An archive in an archive: its stored members are views of this member's bytes in turn.
      const Storage* outer_input = input_storage;
      input_storage = storage.get();
      if (top) {  // a layer, perhaps: its entries are kept for apply_layers
        std::vector<LayerEntry>* outer = layer;
        const unsigned outer_depth = layer_depth;
        layer = &facts.layers[top_path];
        layer_depth = depth + 1;
        scan_archive(mb, member_display, depth + 1, true);
        layer = outer;
        layer_depth = outer_depth;
      } else {
        scan_archive(mb, member_display, depth + 1, true);
      }
      input_storage = outer_input;
    }
    // Keep the member's bytes only when an object with device code points into them.
    bool used = false;
    for (std::size_t i = before; i < report.objects.size(); ++i) used = used || !report.objects[i].fatbins.empty();
    if (used) report.storage.push_back(storage);
    else storage->release(0, mb.size());  // a view of a mapped archive: its pages leave with the member
  }

  /// `quiet`: bytes that only looked like an archive (a gzip file that is no tar) are skipped
  /// without a message, as in directory walks and inside other archives.
  /// `file`: read the archive through read() from this path rather than from `bytes`, so that a
  /// 2 GB wheel does not become 2 GB of resident mapped pages.
  void scan_archive(Bytes bytes, const std::string& display, unsigned depth, bool quiet,
                    const std::string* file = nullptr) {
    const std::string archive_id = id;  // members: the archive's identity, the ordinal and the path
    std::uint64_t ordinal = 0;
    if (depth > options.max_depth) {
      report.errors.push_back(display + ": archives nested deeper than " + std::to_string(options.max_depth) + " are not opened");
      return;
    }
    const Utf8NamesLocale names;
    archive* a = open_archive(bytes, display, quiet, file);
    if (a == nullptr) return;
    archive_entry* entry = nullptr;
    // The top level of an input may be a container image: its small JSON members and the
    // entries of each archive member (a layer) are kept, and the layers applied at the end.
    ImageFacts image_facts;
    const bool top = depth == 1 && image == nullptr;
    if (top) image = &image_facts;
    const bool in_layer = layer != nullptr && depth == layer_depth;
    // A zip's central directory, read at its first member: where its deflated members start.
    std::optional<detail::ZipDirectory> zip;
    const Storage* input_bytes_storage = input_storage != nullptr && input_storage->bytes().data() == bytes.data() &&
                                                 input_storage->bytes().size() == bytes.size()
                                             ? input_storage
                                             : nullptr;
    // Stored members of a plain ar or tar are views of the input's storage when it is shared.
    const std::shared_ptr<const Storage> archive_owner = input_bytes_storage != nullptr ? input_bytes_storage->weak_from_this().lock() : nullptr;
    auto close_entry = [&] {
      if (in_layer && !layer->empty()) {
        layer->back().objects_end = report.objects.size();
        layer->back().errors_end = report.errors.size();
      }
    };
    while (!stopped) {
      const int rc = archive_read_next_header(a, &entry);
      close_entry();
      if (rc == ARCHIVE_EOF) break;
      if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
        report.errors.push_back(display + ": bad archive entry: " + archive_text(a));
        break;
      }
      const auto type = archive_entry_filetype(entry);
      if (in_layer) add_layer_entry(entry, display);
      // Deterministic `ar` (the default of GNU ar) stores mode 644 without a file type: 0.
      if (type != AE_IFREG && type != 0) continue;
      // The name as stored in UTF-8 when the archive says it is (zip's flag, pax headers):
      // converted to the locale (C in most runs) a non-ASCII name became "?". Else the bytes.
      const char* path = archive_entry_pathname_utf8(entry);
      if (path == nullptr) path = archive_entry_pathname(entry);
      std::string member = path != nullptr ? path : "?";
      if (member == "/" || member == "//" || member.empty()) continue;  // ar symbol/name tables
      id = archive_id.empty() ? std::string() : archive_id + "\n" + std::to_string(ordinal++) + " " + member;
      const std::string top_path = top ? layer_path(member) : std::string();
      const std::int64_t size = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : -1;
      constexpr std::int64_t kImageJsonLimit = std::int64_t{1} << 20;
      const bool image_json = top && size >= 0 && size <= kImageJsonLimit &&
                              (top_path == "manifest.json" || top_path == "index.json" || top_path.starts_with("blobs/"));
      // Where libarchive stands now: at the member's data, after its local header.
      const std::int64_t data_at = archive_filter_bytes(a, 0);
      if (!zip && !bytes.empty() && archive_filter_count(a) <= 1 &&
          (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_ZIP)
        zip = detail::ZipDirectory::read(bytes);
      std::optional<Deflated> deflated;
      if (zip && data_at > 0 && zip->size() > 0)
        if (auto m = zip->at(static_cast<std::uint64_t>(data_at));
            m && m->name == member && size >= 0 && m->size == static_cast<std::uint64_t>(size))
          deflated = Deflated{bytes, input_bytes_storage, *m};
      std::optional<InPlace> in_place;
      if (archive_owner && data_at >= 0 && size >= 0 && archive_filter_count(a) <= 1 && archive_entry_sparse_count(entry) == 0 &&
          ((archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_AR ||
           (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_TAR))
        in_place = InPlace{archive_owner, static_cast<std::uint64_t>(data_at)};
      auto storage = read_entry(a, display + ":" + member, top_path, size, image_json, image_facts, deflated ? &*deflated : nullptr,
                                in_place ? &*in_place : nullptr);
      if (!storage) {
        report.errors.push_back(storage.message());
        if (in_layer && !layer->empty()) layer->back().unreadable = true;
        break;
      }
      if (*storage) scan_member(*storage, a, display, member, depth, top, top_path, image_json, image_facts);  // else not inflated
    }
    close_entry();
    id = archive_id;
    archive_read_free(a);
    if (top) {
      image = nullptr;
      std::string why;
      if (auto order = image_layers(image_facts, why)) apply_layers(image_facts, *order, report, stopped);
      else if (!why.empty()) report.skipped.push_back(display + ": " + why);
    }
  }

  Status scan(Bytes bytes, const std::string& display, bool named_directly, const Storage* storage = nullptr,
              const std::string* file = nullptr) {
    input_size = bytes.size();
    input_storage = storage;
    switch (classify(bytes)) {
      case Kind::elf:
        add_elf(bytes, display, {}, {}, named_directly, storage);
        return Ok{};
      case Kind::pe:
        add_pe(bytes, display, {}, {}, named_directly);
        return Ok{};
      case Kind::fatbin:
        add_fatbin(bytes, display, {}, {});
        return Ok{};
      case Kind::device:
        add_standalone(bytes, display, {}, {});
        return Ok{};
      case Kind::archive:
        scan_archive(bytes, display, 1, !named_directly, file);
        return Ok{};
      case Kind::unsupported:
        if (named_directly) return Error{ErrorKind::unsupported, display + ": " + std::string(unsupported_kind(bytes))};
        report.skipped.push_back(display + ": " + std::string(unsupported_kind(bytes)));
        return Ok{};
      case Kind::other:
        break;
    }
    if (named_directly)
      return Error{ErrorKind::unsupported, display + ": not an elf file, a fatbin or a supported archive (ar, zip, tar), nor a ptx or lto-ir file"};
    return Ok{};
  }
};

/// When `storage` lost pages while it was read (truncated under the mapping), what was read
/// from it is dropped (objects from `before` on) and the file is an error; true then.
bool drop_if_damaged(const Storage& storage, const std::string& path, ScanReport& report, std::size_t before) {
  if (!storage.damaged()) return false;
  report.objects.resize(before);
  report.errors.push_back(path + ": the file shrank while it was being read (truncated by another process?): not judged");
  return true;
}

/// Reads the whole file at `path` (its bytes in `storage`, its identity `id`, empty for none):
/// from what the store kept of it when the same file was read with the same options, else by
/// scanning it (an ELF file, a cubin or a fatbin file that gave no error is then kept).
Status scan_whole_file(const Storage& storage, const std::string& path, const std::string& id, bool named_directly,
                       unsigned threads, const ScanOptions& options, ScanReport& report) {
  const Bytes whole = storage.bytes();
  const Kind kind = classify(whole);
  // An archive is kept too, when it holds no device code (encode_file_facts): a static library
  // of host objects was read member by member on every walk (758 of them under /usr/lib).
  const bool keepable = options.facts != nullptr && !id.empty() &&
                        (kind == Kind::elf || kind == Kind::fatbin || kind == Kind::device || kind == Kind::archive);
  const std::string key = keepable ? detail::file_facts_key(id, options, named_directly) : std::string();
  if (keepable)
    if (auto facts = options.facts->find_file(key); facts && detail::decode_file_facts(*facts, whole, path, report))
      return Ok{};
  const std::size_t objects = report.objects.size(), skipped = report.skipped.size(), errors = report.errors.size();
  Scanner s{options, report};
  s.scan_threads = threads;
  s.id = id;
  auto status = s.scan(whole, path, named_directly, &storage, &path);
  if (keepable && status && report.errors.size() == errors && !storage.damaged())
    if (auto facts = detail::encode_file_facts(report, objects, skipped, whole, path)) options.facts->keep_file(key, std::move(*facts));
  return status;
}

/// Maps and scans a file of a walk whose first bytes may hold device code.
void scan_peeked(int fd, const struct stat& st, const std::string& path, const ScanOptions& options, ScanReport& report) {
  auto storage = map_fd(fd, path, options.max_mappings, options.read_small_files_below);
  if (!storage) {
    report.errors.push_back(storage.message());
    return;
  }
  const std::size_t before = report.objects.size();
  (void)scan_whole_file(**storage, path, options.facts != nullptr ? file_identity(st) : std::string(), false, 1, options, report);
  if (drop_if_damaged(**storage, path, report, before)) return;
  // Kept only when an object with device code points into it (else unmapped or freed here).
  bool used = false;
  for (std::size_t i = before; i < report.objects.size(); ++i) used = used || !report.objects[i].fatbins.empty();
  if (used) report.storage.push_back(*storage);
}

/// Reads one file of a directory walk into `report` (its errors there too).
void scan_file_quietly(const std::string& path, const ScanOptions& options, ScanReport& report) {
  const common::UniqueFd fd(open_nonblocking(path));
  if (!fd.valid()) {
    report.errors.push_back(path + ": cannot open: " + errno_text(errno));
    return;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return;  // replaced by a FIFO since the walk saw it
  // Peek first: most files in a tree are neither ELF nor archives.
  unsigned char head[4096] = {};  // a PTX file's .target follows a few lines of comments
  const ssize_t got = ::pread(fd.get(), head, sizeof head, 0);
  ++report.files_read;
  if (got <= 0) return;
  const Bytes head_bytes(reinterpret_cast<const std::byte*>(head), static_cast<std::size_t>(got));
  const Kind kind = classify(head_bytes);
  if (kind == Kind::other) return;
  if (kind == Kind::unsupported) {
    report.skipped.push_back(path + ": " + std::string(unsupported_kind(head_bytes)));
    --report.files_read;
    return;
  }
  scan_peeked(fd.get(), st, path, options, report);
}

/// Lists the regular files under `root`, recursively, without following symbolic links below it
/// (`root` itself may be one: /usr/local/cuda/lib64 is a link to lib). Every directory that
/// cannot be opened or read (permissions, too many open files) is reported in `errors`: a walk
/// never passes over part of its input in silence.
/// The kind of the file at `path` from its first bytes (Kind::other when it cannot be read).
Kind peek_kind(const std::string& path, std::string* why) {
  const common::UniqueFd fd(open_nonblocking(path));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Kind::other;
  unsigned char head[4096] = {};
  const ssize_t got = ::pread(fd.get(), head, sizeof head, 0);
  if (got <= 0) return Kind::other;
  const Bytes b(reinterpret_cast<const std::byte*>(head), static_cast<std::size_t>(got));
  if (why != nullptr) *why = unsupported_kind(b);
  return classify(b);
}

/// Whether `path` (canonical) is `root` (canonical) or lies below it.
bool inside(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

/// A regular file a walk found, with its identity as the walk saw it (none unless asked for,
/// or when it changed in the last seconds).
struct WalkedFile {
  std::string path;
  std::optional<FileStamp> stamp;
  std::uint32_t mode = 0;
};

/// Whether `a` (followed by "/" when `a_dir`) sorts before `b` (followed by "/" when `b_dir`),
/// as std::string compares: the files of a directory and the paths below its subdirectories
/// come out in path order when each directory's entries are merged by this key.
bool path_key_less(std::string_view a, bool a_dir, std::string_view b, bool b_dir) {
  const std::size_t n = std::min(a.size(), b.size());
  if (const int c = a.substr(0, n).compare(b.substr(0, n)); c != 0) return c < 0;
  auto at = [](std::string_view v, bool dir, std::size_t i) -> int {
    if (i < v.size()) return static_cast<unsigned char>(v[i]);
    return i == v.size() && dir ? '/' : -1;  // -1: ended
  };
  for (std::size_t i = n;; ++i) {  // one has ended at n: two more characters at most decide
    const int x = at(a, a_dir, i), y = at(b, b_dir, i);
    if (x != y) return x < y;
    if (x < 0) return false;
  }
}

/// What a walk found in one directory, in the order readdir() gave it.
struct WalkedDir {
  std::string path;
  bool named = false;                     ///< the directory the user named: a symbolic link to it is followed
  std::vector<std::string> subdirs = {};  ///< read by read_directory, then made nodes
  std::vector<std::size_t> children;      ///< the nodes of `subdirs`
  std::vector<WalkedFile> files;
  std::vector<std::string> errors;
  std::vector<std::string> skipped;
  std::vector<std::pair<std::pair<dev_t, ino_t>, std::string>> linked;  ///< files with several names
};

/// Lists one directory: its regular files (with their identities when asked for) and its
/// subdirectories; symbolic links are not followed.
void read_directory(WalkedDir& node, const std::string& real_root, bool identities) {
  const std::string& dir = node.path;
  const int follow = node.named ? 0 : O_NOFOLLOW;
  common::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY | follow | O_NONBLOCK));
  DIR* d = fd.valid() ? ::fdopendir(fd.get()) : nullptr;
  if (d == nullptr) {
    const int err = errno;
    node.errors.push_back(dir + ": cannot read the directory: " + errno_text(err) + "; its files were not checked");
    return;
  }
  fd.release();  // closedir() closes it
  std::error_code ec;
  for (;;) {
    errno = 0;
    const dirent* ent = ::readdir(d);
    if (ent == nullptr) {
      if (errno != 0)
        node.errors.push_back(dir + ": cannot read the directory: " + errno_text(errno) + "; some of its files were not checked");
      break;
    }
    const std::string_view leaf = ent->d_name;
    if (leaf == "." || leaf == "..") continue;
    std::string child = dir;
    if (child.empty() || child.back() != '/') child += '/';
    child += leaf;
    // A directory needs no stat: readdir says what it is (where the file system tells), and it
    // is opened without following links. One fstatat in seven saved in a Python environment.
    if (ent->d_type == DT_DIR) {
      node.subdirs.push_back(std::move(child));
      continue;
    }
    struct stat st {};
    if (::fstatat(::dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      node.errors.push_back(child + ": cannot stat: " + errno_text(errno) + "; not checked");
      continue;
    }
    // Symbolic links are not followed: libfoo.so -> libfoo.so.1 would list the same code twice.
    // One that leads out of the tree leads to code that is not read otherwise: named, when
    // what it points at could hold device code.
    if (S_ISLNK(st.st_mode)) {
      const std::string target = std::filesystem::canonical(child, ec).string();
      if (ec || real_root.empty() || inside(target, real_root)) continue;  // dangling, or read under its own name
      if (std::filesystem::is_directory(target, ec))
        node.skipped.push_back(child + ": a symbolic link to the directory " + target +
                               " outside the tree: not followed (name it to check it)");
      else if (peek_kind(target, nullptr) != Kind::other)
        node.skipped.push_back(child + ": a symbolic link to " + target + " outside the tree: not followed (name it to check it)");
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      node.subdirs.push_back(std::move(child));
    } else if (S_ISREG(st.st_mode)) {
      if (st.st_nlink > 1) node.linked.emplace_back(std::pair{st.st_dev, st.st_ino}, child);
      node.files.push_back(WalkedFile{std::move(child), identities ? file_stamp(st) : std::nullopt, static_cast<std::uint32_t>(st.st_mode)});
    }
  }
  ::closedir(d);
  // In path order here, on the reading thread: the walk then merges the directories' lists
  // instead of sorting every path of the tree on one thread.
  std::sort(node.files.begin(), node.files.end(), [](const WalkedFile& a, const WalkedFile& b) { return a.path < b.path; });
  std::sort(node.subdirs.begin(), node.subdirs.end(),
            [](const std::string& a, const std::string& b) { return path_key_less(a, true, b, true); });
}

/// Lists the directories below `root` on `threads` threads (a tree of many small directories
/// costs one readdir and one fstatat per entry: on an overlay file system most of a cached
/// run's time). The result does not depend on the scheduling: files come out in path order,
/// errors and notes in the order of a walk that reads each directory's entries in path order.
void walk_directory(const std::string& root, bool identities, unsigned threads, std::vector<WalkedFile>& files,
                    std::vector<std::string>& errors, std::vector<std::string>& skipped) {
  std::error_code ec;
  const std::string real_root = std::filesystem::canonical(root, ec).string();
  std::deque<WalkedDir> nodes;  // grows while read: references to its elements stay valid
  nodes.emplace_back().path = root;
  nodes.back().named = true;
  std::vector<std::size_t> ready{0};
  std::mutex mutex;
  std::condition_variable changed;
  unsigned busy = 0;
  auto work = [&] {
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return !ready.empty() || busy == 0; });
      if (ready.empty()) return;  // nothing left to read, and no reader that could add any
      WalkedDir& node = nodes[ready.back()];
      ready.pop_back();
      ++busy;
      lock.unlock();
      read_directory(node, real_root, identities);
      lock.lock();
      for (auto& sub : node.subdirs) {
        node.children.push_back(nodes.size());
        ready.push_back(nodes.size());
        nodes.emplace_back().path = std::move(sub);
      }
      node.subdirs.clear();
      --busy;
      changed.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  // Depth first, each directory's files and subdirectories merged in path order: the files
  // come out sorted by path.
  std::vector<std::pair<std::pair<dev_t, ino_t>, std::string>> linked;
  struct Frame {
    std::size_t node, file = 0, child = 0;
  };
  auto enter = [&](std::size_t n) {
    WalkedDir& node = nodes[n];
    std::move(node.errors.begin(), node.errors.end(), std::back_inserter(errors));
    std::move(node.skipped.begin(), node.skipped.end(), std::back_inserter(skipped));
    std::move(node.linked.begin(), node.linked.end(), std::back_inserter(linked));
    return Frame{n};
  };
  std::size_t total = 0;
  for (const WalkedDir& node : nodes) total += node.files.size();
  files.reserve(files.size() + total);
  for (std::vector<Frame> stack{enter(0)}; !stack.empty();) {
    Frame& f = stack.back();
    WalkedDir& node = nodes[f.node];
    if (f.child < node.children.size() &&
        (f.file == node.files.size() || !path_key_less(node.files[f.file].path, false, nodes[node.children[f.child]].path, true))) {
      const std::size_t next = node.children[f.child++];
      stack.push_back(enter(next));  // f is not used after this
    } else if (f.file < node.files.size()) {
      files.push_back(std::move(node.files[f.file++]));
    } else {
      stack.pop_back();
    }
  }
  // Hard links: each file read once, under the first of its names in path order.
  std::sort(linked.begin(), linked.end());
  std::set<std::string> again;
  for (std::size_t k = 1, first = 0; k < linked.size(); ++k) {
    if (linked[k].first != linked[k - 1].first) {
      first = k;
      continue;
    }
    again.insert(linked[k].second);
    skipped.push_back(linked[k].second + ": the same file as " + linked[first].second + " (a hard link): read once, under that name");
  }
  if (!again.empty()) std::erase_if(files, [&again](const WalkedFile& f) { return again.count(f.path) != 0; });
}

}  // namespace

struct SharedWalk::State {
  std::string root;
  std::once_flag once;
  std::vector<WalkedFile> files;
  std::vector<std::string> errors, skipped;
};

/// What walk_once reaches of a SharedWalk.
struct SharedWalkAccess {
  static SharedWalk::State& state(SharedWalk& w) { return *w.state_; }
};

SharedWalk::SharedWalk(std::string root) : state_(std::make_unique<State>()) { state_->root = std::move(root); }
SharedWalk::SharedWalk(std::string root, std::vector<ListedFile> files, std::vector<std::string> errors, std::vector<std::string> skipped)
    : SharedWalk(std::move(root)) {
  std::call_once(state_->once, [&] {
    state_->files.reserve(files.size());
    for (ListedFile& f : files) state_->files.push_back(WalkedFile{std::move(f.path), f.stamp, f.mode});
    state_->errors = std::move(errors);
    state_->skipped = std::move(skipped);
  });
}
SharedWalk::~SharedWalk() = default;
const std::string& SharedWalk::root() const { return state_->root; }

namespace {

/// walk_directory, or a copy of the walk `shared` made (made now by this thread if it is the
/// first to ask) when it is of `root`. A shared walk always records identities.
void walk_once(const std::string& root, bool identities, unsigned threads, SharedWalk* shared, std::vector<WalkedFile>& files,
               std::vector<std::string>& errors, std::vector<std::string>& skipped) {
  if (shared == nullptr || shared->root() != root) return walk_directory(root, identities, threads, files, errors, skipped);
  SharedWalk::State& st = SharedWalkAccess::state(*shared);
  std::call_once(st.once, [&] { walk_directory(root, true, threads, st.files, st.errors, st.skipped); });
  files.insert(files.end(), st.files.begin(), st.files.end());
  errors.insert(errors.end(), st.errors.begin(), st.errors.end());
  skipped.insert(skipped.end(), st.skipped.begin(), st.skipped.end());
}

/// ScanOptions::threads, 0 meaning the hardware concurrency.
unsigned thread_count(const ScanOptions& options) {
  return std::min(std::max(1u, options.max_threads), options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

PayloadPages::PayloadPages(std::span<const ScanReport> reports) {
  for (const ScanReport& r : reports)
    for (const auto& st : r.storage) {
      const Bytes b = st->bytes();
      if (!b.empty()) ranges_.push_back(Range{b.data(), b.data() + b.size(), st.get()});
    }
  std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
}

void PayloadPages::release(const ObjectFatbins& object) const {
  // The object's payloads lie in one storage (its file, or its archive member): one range.
  const std::byte* lo = nullptr;
  const std::byte* hi = nullptr;
  for (const Fatbin& fb : object.fatbins)
    for (const FatbinEntry& e : fb.entries) {
      if (e.payload.empty()) continue;
      if (lo == nullptr || e.payload.data() < lo) lo = e.payload.data();
      if (hi == nullptr || e.payload.data() + e.payload.size() > hi) hi = e.payload.data() + e.payload.size();
    }
  if (lo != nullptr) release(Bytes{lo, static_cast<std::size_t>(hi - lo)});
}

void PayloadPages::release(Bytes bytes) const {
  const std::byte* lo = bytes.data();
  const std::byte* hi = lo + bytes.size();
  if (bytes.empty()) return;
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), lo, [](const std::byte* p, const Range& r) { return p < r.begin; });
  if (it == ranges_.begin()) return;
  --it;
  if (lo < it->begin || hi > it->end) return;  // not in one storage (bytes in memory): nothing to drop
  it->storage->release(static_cast<std::uint64_t>(lo - it->begin), static_cast<std::uint64_t>(hi - lo));
}

Result<std::shared_ptr<const Storage>> map_file(const std::string& path) {
  const common::UniqueFd fd(open_nonblocking(path));
  if (!fd.valid()) return errno_error(path + ": cannot open: " + errno_text(errno), errno);
  return map_fd(fd.get(), path);
}

std::vector<ListedFile> list_files(const std::string& root, unsigned threads, std::vector<std::string>& errors, SharedWalk* shared,
                                   std::vector<std::string>* skipped) {
  std::vector<WalkedFile> walked;
  std::vector<std::string> not_listed;  // links out of the tree and second names
  walk_once(root, true, std::clamp(threads, 1u, 16u), shared, walked, errors, not_listed);
  if (skipped != nullptr) {
    std::sort(not_listed.begin(), not_listed.end());  // in path order, as scan_path gives them
    *skipped = std::move(not_listed);
  }
  std::vector<ListedFile> out;
  out.reserve(walked.size());
  for (auto& f : walked) out.push_back(ListedFile{std::move(f.path), f.mode, f.stamp});
  return out;
}

Result<ScanReport> scan_bytes(Bytes bytes, const std::string& name, const ScanOptions& options) {
  ScanReport report;
  report.input = name;
  Scanner s{options, report};
  s.scan_threads = thread_count(options);
  AG_TRY_STATUS(s.scan(bytes, name, true));
  return report;
}

Result<ScanReport> scan_path(const std::string& path, const ScanOptions& options) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec) return errno_error(path + ": cannot open: " + ec.message(), ec.value());
  ScanReport report;
  report.input = path;
  if (std::filesystem::is_directory(status)) {
    report.directory = true;
    std::vector<WalkedFile> files;
    walk_once(path, options.facts != nullptr, std::min(thread_count(options), 16u), options.walk, files, report.errors, report.skipped);
    // The files an earlier walk with the same options found to hold no device code (nothing
    // reported of them: no object, note or error) are not opened again while they have the same
    // identity (any write moves a file's change time).
    const std::string tree = options.facts != nullptr ? detail::file_facts_key(detail::tree_key(path), options, false) : std::string();
    std::optional<detail::StampedValues> known;
    if (options.facts != nullptr)
      if (auto record = options.facts->find_tree(tree)) known = detail::StampedValues::decode(*record);
    // Per file: 0 read and holding device code (or not judged), 1 known or found to hold none
    // and counted as read, 2 the same but not counted (0 bytes). One byte each: written by
    // several threads.
    std::vector<std::uint8_t> no_code(files.size(), 0);
    std::vector<detail::StampedValues::Digest> digests(options.facts != nullptr ? files.size() : 0);
    std::atomic<std::size_t> hits{0};
    unsigned threads = thread_count(options);
    threads = std::min<unsigned>(threads, static_cast<unsigned>(std::max<std::size_t>(1, files.size())));
    // Only the files read get a report: a cache hit of 70,000 files builds none.
    std::vector<std::unique_ptr<ScanReport>> parts(files.size());
    // A file's part merged into the report: its counts, notes and errors always, its objects
    // and storage too unless they are handed over (ScanOptions::each_file).
    const bool streamed = static_cast<bool>(options.each_file);
    auto merge = [&](std::size_t i) {
      if (!parts[i]) {
        report.files_read += no_code[i] == 1 ? 1 : 0;
        return;
      }
      ScanReport& p = *parts[i];
      report.files_read += p.files_read;
      for (auto& k : p.skipped) report.skipped.push_back(std::move(k));
      for (auto& e : p.errors) report.errors.push_back(std::move(e));
      if (streamed) {
        p.skipped.clear();
        p.errors.clear();
        p.files_read = 0;
        p.input = files[i].path;
        if (!p.objects.empty()) options.each_file(p);
        parts[i].reset();  // the file's objects and mapping go now
        return;
      }
      for (auto& o : p.objects) report.objects.push_back(std::move(o));
      for (auto& st : p.storage) report.storage.push_back(std::move(st));
    };
    // Streamed: files handed over in path order by whichever thread finds the next one read,
    // one at a time; none started more than `ahead` files past the last handed over.
    std::mutex hand_mutex;
    std::condition_variable handed_on;
    std::size_t handed = 0;
    bool handing = false;
    std::vector<std::uint8_t> read_done(streamed ? files.size() : 0, 0);
    const std::size_t ahead = options.stream_ahead != 0 ? options.stream_ahead : std::size_t{2} * threads;
    auto finished = [&](std::size_t i) {
      std::unique_lock lock(hand_mutex);
      read_done[i] = 1;
      if (handing) return;  // the thread handing over will see it
      handing = true;
      while (handed < files.size() && read_done[handed] != 0) {
        const std::size_t k = handed;
        lock.unlock();
        merge(k);
        lock.lock();
        ++handed;
        handed_on.notify_all();
      }
      handing = false;
    };
    ScanOptions inner = options;  // a file's own reading hands nothing over
    inner.each_file = nullptr;
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      std::size_t hit = 0;
      for (std::size_t i; (i = next.fetch_add(1)) < files.size();) {
        if (streamed) {
          std::unique_lock lock(hand_mutex);
          handed_on.wait(lock, [&] { return i < handed + ahead; });
        }
        const bool stamped = files[i].stamp.has_value() && options.facts != nullptr;
        if (stamped) digests[i] = detail::StampedValues::digest(*files[i].stamp);
        if (const auto counted = stamped && known ? known->find(digests[i]) : std::nullopt) {
          no_code[i] = *counted != 0 ? 1 : 2;
          ++hit;
          if (streamed) finished(i);
          continue;
        }
        parts[i] = std::make_unique<ScanReport>();
        ScanReport& p = *parts[i];
        scan_file_quietly(files[i].path, inner, p);
        if (stamped && p.objects.empty() && p.skipped.empty() && p.errors.empty() && p.files_read <= 1) no_code[i] = p.files_read == 1 ? 1 : 2;
        // Nothing more is read from the file now: its pages leave this process (the mapping
        // stays, and a later decode refetches what it needs from the page cache), so a walk's
        // peak is a few files', not the sum of every file's.
        for (const auto& st : p.storage) st->release(0, st->bytes().size());
        if (streamed) finished(i);
      }
      hits += hit;
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    if (!streamed)
      for (std::size_t i = 0; i < files.size(); ++i) merge(i);  // in path order: the output does not depend on scheduling
    std::sort(report.skipped.begin(), report.skipped.end());    // in path order, as everything else
    if (options.facts != nullptr) {
      // The files of this walk only: those gone are forgotten. When every file without device
      // code was known and every known one is still here, the record stands as it is.
      const std::size_t none = static_cast<std::size_t>(std::count_if(no_code.begin(), no_code.end(), [](std::uint8_t v) { return v != 0; }));
      if (!(known && hits == none && hits == known->size())) {
        detail::StampedValues now;
        for (std::size_t i = 0; i < files.size(); ++i)
          if (no_code[i] != 0) now.add(digests[i], no_code[i] == 1 ? 1 : 0);
        now.finish();
        if (now.size() > 0 && (!known || !(*known == now))) options.facts->keep_tree(tree, now.encode());
      }
    }
    return report;
  }
  const common::UniqueFd fd(open_nonblocking(path));
  if (!fd.valid()) return errno_error(path + ": cannot open: " + errno_text(errno), errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(path + ": cannot stat: " + errno_text(errno), errno);
  AG_TRY(auto storage, map_fd(fd.get(), path));
  report.files_read = 1;
  const std::string id = options.facts != nullptr && S_ISREG(st.st_mode) ? file_identity(st) : std::string();
  AG_TRY_STATUS(scan_whole_file(*storage, path, id, true, thread_count(options), options, report));
  if (drop_if_damaged(*storage, path, report, 0)) return report;
  report.storage.push_back(storage);
  return report;
}

}  // namespace archguard
