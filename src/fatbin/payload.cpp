// SPDX-License-Identifier: Apache-2.0
// Payloads on demand: bounded decompression and kernel entry points.
#include <archguard/fatbin.hpp>

#include <cxxabi.h>
#include <elf.h>
#ifndef ARCHGUARD_NO_COMPRESSION  // the dependency-free verifier (tools/archguard-verify) decodes no payload
#include <lz4.h>
#include <zstd.h>
#endif

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string.h>  // memmem
#include <memory>
#include <mutex>
#include <new>
#include <thread>

namespace archguard {
namespace {

constexpr std::uint8_t kStoCudaEntry = 0x10;  // st_other bit of a CUDA kernel entry (no <elf.h> name)

std::string entry_where(std::string_view name, const FatbinEntry& e) {
  return std::string(name) + ": entry " + std::to_string(e.index) + " at " + hex(e.offset);
}

bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c == '.';
}

}  // namespace

std::string demangle(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z' || name.size() > kMaxDemangledInput) return std::string(name);
  std::string z(name);
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !out) return z;
  return out.get();
}

struct DecodeBudget::State {
  std::uint64_t most;
  std::uint64_t used = 0;
  std::uint64_t peak = 0;
  mutable std::mutex mutex;
  std::condition_variable room;
};

namespace {
// The budgets whose tickets this thread holds: a nested take() returns an empty ticket.
thread_local std::vector<const DecodeBudget*> held_here;
}  // namespace

DecodeBudget::DecodeBudget(std::uint64_t most) : state_(std::make_shared<State>()) { state_->most = most; }

DecodeBudget::Ticket DecodeBudget::take(std::uint64_t bytes) {
  if (std::find(held_here.begin(), held_here.end(), this) != held_here.end()) return Ticket{};
  State& s = *state_;
  {
    std::unique_lock lock(s.mutex);
    s.room.wait(lock, [&] { return s.used == 0 || (s.used + bytes >= s.used && s.used + bytes <= s.most); });
    s.used += bytes;
    s.peak = std::max(s.peak, s.used);
  }
  held_here.push_back(this);
  return Ticket{this, bytes};
}

std::uint64_t DecodeBudget::in_use() const {
  const std::lock_guard lock(state_->mutex);
  return state_->used;
}

std::uint64_t DecodeBudget::peak() const {
  const std::lock_guard lock(state_->mutex);
  return state_->peak;
}

std::uint64_t DecodeBudget::most() const {
  const std::lock_guard lock(state_->mutex);
  return state_->most;
}

void DecodeBudget::set_most(std::uint64_t most) {
  {
    const std::lock_guard lock(state_->mutex);
    state_->most = most;
  }
  state_->room.notify_all();
}

DecodeBudget::Raised::Raised(std::uint64_t most) : before_(process().most()) {
  if (most > before_) process().set_most(most);
}

DecodeBudget::Raised::~Raised() { process().set_most(before_); }

std::uint64_t judging_decode_bytes(unsigned threads) {
  constexpr std::uint64_t kPerThread = std::uint64_t{32} << 20;
  constexpr std::uint64_t kMost = std::uint64_t{512} << 20;
  return std::clamp<std::uint64_t>(std::uint64_t{threads} * kPerThread, kDecodeBytesAtOnce, kMost);
}

DecodeBudget& DecodeBudget::process() {
  static DecodeBudget budget(kDecodeBytesAtOnce);
  return budget;
}

DecodeBudget::Ticket::Ticket(Ticket&& other) noexcept : budget_(other.budget_), bytes_(other.bytes_) {
  other.budget_ = nullptr;
  other.bytes_ = 0;
}

DecodeBudget::Ticket& DecodeBudget::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    give_back();
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    other.budget_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

DecodeBudget::Ticket::~Ticket() { give_back(); }

void DecodeBudget::Ticket::give_back() {
  if (budget_ == nullptr) return;
  State& s = *budget_->state_;
  {
    const std::lock_guard lock(s.mutex);
    s.used -= bytes_;
  }
  s.room.notify_all();
  // Tickets are given back on the thread that took them (they are not handed between threads).
  if (auto it = std::find(held_here.begin(), held_here.end(), budget_); it != held_here.end()) held_here.erase(it);
  budget_ = nullptr;
  bytes_ = 0;
}

std::uint64_t decode_footprint(const FatbinEntry& e, std::uint64_t limit) {
  if (e.compression == Compression::none) return std::min(e.stored_size, limit);
  return e.payload.size() + std::min(e.uncompressed_size, limit);
}

namespace {

/// What the threads' scratch buffers keep between images, all together (16 threads kept up to
/// 2 x 4 MiB each, and their malloc arenas the larger ones); with kDecodeBytesAtOnce in flight
/// the most the decoders hold at once. DecodeScratchKept raises it.
std::atomic<std::size_t> scratch_kept_most{kDecodeScratchKeptDefault};
/// A buffer up to this size is kept in any case, uncounted: most images are smaller.
constexpr std::size_t kScratchAlwaysKept = std::size_t{256} << 10;
std::atomic<std::size_t> scratch_kept_total{0};
/// What every thread's scratch buffers hold mapped now (decode_scratch_bytes).
std::atomic<std::size_t> scratch_mapped{0};

/// Where decode_payload writes: a buffer whose resize keeps the bytes before the new size and
/// leaves new bytes uninitialised (each is written before it is read), reused by one thread
/// from image to image: a fresh, zero-filled vector per image cost a memset and the page
/// faults of new pages (10% of an `inspect --kernels`). What the threads keep between images is
/// bounded together (scratch_kept_most); the memory is mapped and unmapped here rather than
/// taken from malloc, whose per-thread arenas kept every thread's largest images after they
/// were freed (glibc raises its mmap threshold to each large block freed): 16 threads held
/// 650 MB of anonymous memory in a `check` of the toolkit's libraries, 2 threads 340 MB.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { release(); }
  std::byte* data() { return bytes_; }
  std::size_t size() const { return size_; }
  /// Pages of a fresh buffer cost memory only once written (mapped, not filled): sizing it to
  /// an image's claimed size at once costs no more than the bytes a decoder really writes.
  static constexpr bool kSizedLazily = true;
  void resize(std::size_t n) {
    if (n > capacity_) {
      // Grown by half at least: the streaming decoder asks for more in steps.
      const std::size_t want = std::max(n, capacity_ + capacity_ / 2);
      void* grown = map(want);
      if (size_ != 0) std::memcpy(grown, bytes_, size_);
      release();
      scratch_mapped.fetch_add(want);
      bytes_ = static_cast<std::byte*>(grown);
      capacity_ = want;
    }
    size_ = n;
  }
  /// Unmaps the buffer (release_decode_scratch, on a buffer no image is using).
  void release() {
    if (bytes_ != nullptr) unmap(bytes_, capacity_);
    scratch_mapped.fetch_sub(capacity_);
    scratch_kept_total.fetch_sub(counted_);
    bytes_ = nullptr;
    size_ = capacity_ = counted_ = 0;
  }
  /// After an image: keeps the memory for the next one while every thread's kept buffers stay
  /// within scratch_kept_most, else gives it back.
  void done() {
    size_ = 0;
    if (capacity_ <= kScratchAlwaysKept) return;
    if (capacity_ == counted_) {  // kept already: given back once the bound was put lower
      if (scratch_kept_total.load(std::memory_order_relaxed) > scratch_kept_most.load(std::memory_order_relaxed)) release();
      return;
    }
    const std::size_t more = capacity_ - counted_;
    if (scratch_kept_total.fetch_add(more) + more <= scratch_kept_most.load(std::memory_order_relaxed)) {
      counted_ = capacity_;
      return;
    }
    scratch_kept_total.fetch_sub(more);
    release();
  }

 private:
#if defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer from its allocator, so that a decoder writing past the end is caught.
  static void* map(std::size_t n) { return new std::byte[n]; }
  static void unmap(std::byte* p, std::size_t) { delete[] p; }
#else
  static void* map(std::size_t n) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    // Large images in huge pages where the system gives them on request: a fresh buffer then
    // faults once per 2 MiB, not once per 4 KiB (the system time of 16 threads decoding).
    constexpr std::size_t kHugeFrom = std::size_t{4} << 20;
    if (n >= kHugeFrom) (void)::madvise(p, n, MADV_HUGEPAGE);
    return p;
  }
  static void unmap(std::byte* p, std::size_t n) { ::munmap(p, n); }
#endif
  std::byte* bytes_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
  std::size_t counted_ = 0;  ///< what of it scratch_kept_total counts
};

struct ThreadScratch;

/// Every thread's scratch, for release_decode_scratch(): the shared pool's threads live as long
/// as the process, and what they keep between images would stay with them.
struct ScratchRegistry {
  std::mutex mutex;
  std::vector<ThreadScratch*> all;
  static ScratchRegistry& process() {
    static auto* registry = new ScratchRegistry;  // never destroyed: threads may outlive statics
    return *registry;
  }
};

/// This thread's decode buffers (decode_kernels, check_decodes), one image at a time. Done holds
/// them for the image and gives them back (or keeps them for the next image) when it is dealt
/// with; release_decode_scratch() takes the same hold to unmap what an idle thread keeps.
struct ThreadScratch {
  ScratchBuffer in, out;
  std::atomic<bool> held{false};
  ThreadScratch() {
    ScratchRegistry& r = ScratchRegistry::process();
    const std::lock_guard lock(r.mutex);
    r.all.push_back(this);
  }
  ~ThreadScratch() {
    ScratchRegistry& r = ScratchRegistry::process();
    const std::lock_guard lock(r.mutex);
    std::erase(r.all, this);
  }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  struct Done {
    ThreadScratch& s;
    explicit Done(ThreadScratch& scratch) : s(scratch) {
      // Taken from a release only for the moment it unmaps; a thread never holds its own twice.
      while (s.held.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
    }
    Done(const Done&) = delete;
    Done& operator=(const Done&) = delete;
    ~Done() {
      s.in.done();
      s.out.done();
      s.held.store(false, std::memory_order_release);
    }
  };
};

ThreadScratch& thread_scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}

#ifndef ARCHGUARD_NO_COMPRESSION
/// This thread's zstd decoder, reset for each payload: creating one cost 5% of a judging run of
/// the toolkit's libraries (thousands of small images).
std::unique_ptr<ZSTD_DCtx, std::size_t (*)(ZSTD_DCtx*)>& zstd_decoder() {
  thread_local std::unique_ptr<ZSTD_DCtx, std::size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  return dctx;
}
#endif

/// Decodes the payload of `e` into `out` (`in` holds the copy of a compressed payload), for
/// decompress (vectors) and decode_kernels (a thread's scratch buffers). Refuses sizes above
/// `limit` or inconsistent with the header; `where` names the entry in messages.
template <class Buffer>
Status decode_payload_once(const FatbinEntry& e, const std::string& where, std::uint64_t limit, Buffer& in, Buffer& out,
                           const PayloadRelease* release = nullptr) {
  // The payload is copied out of the file's mapping first, with the copy guarded: a file that
  // someone truncates while we read it gives an error here instead of SIGBUS in a decoder.
  // Sizes from the header are claims: memory follows what the payload really yields.
  const std::uint64_t in_size =
      e.compression == Compression::none ? e.stored_size
                                         : (e.compressed_size != 0 ? e.compressed_size : e.stored_size);
  if (e.compression == Compression::none && e.stored_size > limit)
    return Error{ErrorKind::limit, where + ": image size " + hex(e.stored_size) + " exceeds the limit " + hex(limit)};
  if (e.compression != Compression::none && e.uncompressed_size > limit)
    return Error{ErrorKind::limit, where + ": claimed uncompressed size " + hex(e.uncompressed_size) + " exceeds the limit " + hex(limit)};
  if (in_size > e.payload.size())
    return Error{ErrorKind::corrupt, where + ": payload size " + hex(in_size) + " runs past the stored bytes " + hex(e.payload.size())};
  Buffer& copy = e.compression == Compression::none ? out : in;
  copy.resize(static_cast<std::size_t>(in_size));
  if (!copy_guarded(copy.data(), e.payload.data(), copy.size()))
    return Error{ErrorKind::io, where + ": the file shrank while it was being read (truncated by another process?)"};
  if (release != nullptr && *release) (*release)(e.payload.first(static_cast<std::size_t>(in_size)));  // copied: read no more
  if (e.compression == Compression::none) return Ok{};
#ifdef ARCHGUARD_NO_COMPRESSION
  return Error{ErrorKind::unsupported, where + ": " + std::string(to_string(e.compression)) + " payload not decoded (built without compression libraries)"};
#else
  const std::uint64_t claim = e.uncompressed_size;
  if (e.compression == Compression::lz4) {
    // An lz4 block expands at most about 255 times: a claim beyond that cannot be true, and
    // refusing it here keeps a 1-byte payload from allocating what its header says.
    const std::uint64_t most = in_size * 255 + 64;
    if (in_size > INT_MAX || claim > INT_MAX)
      return Error{ErrorKind::unsupported, where + ": lz4 sizes " + hex(in_size) + " / " + hex(claim) + " exceed what lz4 handles"};
    if (claim > most)
      return Error{ErrorKind::corrupt, where + ": lz4 payload of " + hex(in_size) + " bytes cannot decompress to the claimed " + hex(claim) +
                                           " bytes (at most " + hex(most) + ")"};
    out.resize(static_cast<std::size_t>(claim));
    const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()),  // bytes as chars
                                      reinterpret_cast<char*>(out.data()), static_cast<int>(in_size),
                                      static_cast<int>(claim));
    if (n < 0) return Error{ErrorKind::corrupt, where + ": lz4 payload of " + hex(in_size) + " bytes is corrupt"};
    if (static_cast<std::uint64_t>(n) != claim)
      return Error{ErrorKind::corrupt, where + ": lz4 payload decompresses to " + hex(static_cast<std::uint64_t>(n)) +
                                           " bytes, the header claims " + hex(claim)};
    return Ok{};
  }
  std::size_t frame = in.size();
  if (e.compressed_size == 0) {
    frame = ZSTD_findFrameCompressedSize(in.data(), in.size());
    if (ZSTD_isError(frame) != 0)
      return Error{ErrorKind::corrupt, where + ": zstd payload is corrupt (" + ZSTD_getErrorName(frame) + ")"};
  }
  const unsigned long long content = ZSTD_getFrameContentSize(in.data(), frame);
  if (content == ZSTD_CONTENTSIZE_ERROR) return Error{ErrorKind::corrupt, where + ": payload is not a zstd frame"};
  if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != claim)
    return Error{ErrorKind::corrupt, where + ": zstd frame holds " + hex(content) + " bytes, the header claims " + hex(claim)};
  // Streamed into a buffer that grows with the output actually produced, never past the claim.
  auto& dctx = zstd_decoder();
  if (!dctx) return Error{ErrorKind::io, where + ": cannot create a zstd decoder"};
  if (ZSTD_isError(ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_only)) != 0)
    return Error{ErrorKind::io, where + ": cannot reset the zstd decoder"};
  // Right-sized at once where the claim is plausible for the payload (SASS compresses 3 to 10
  // times), or wherever the buffer's pages cost nothing until written (a thread's scratch
  // buffer); otherwise a larger claim is believed only as far as output is really produced.
  constexpr bool lazily = requires { Buffer::kSizedLazily; };
  const bool plausible = content == claim && (lazily || claim <= std::uint64_t{in_size} * 64 + (std::uint64_t{1} << 16));
  out.resize(static_cast<std::size_t>(plausible ? claim : std::min<std::uint64_t>(claim, std::uint64_t{1} << 16)));
  if (plausible) {
    // Single-shot into the right-sized buffer: the decoder needs no window buffer of its own
    // (several MB per thread when streamed). A frame it refuses is decoded again by the
    // streaming loop below, whose messages say what is wrong with it.
    const std::size_t n = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), in.data(), frame);
    if (ZSTD_isError(n) == 0 && n == claim) return Ok{};
    if (ZSTD_isError(ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_only)) != 0)
      return Error{ErrorKind::io, where + ": cannot reset the zstd decoder"};
  }
  ZSTD_inBuffer src{in.data(), frame, 0};
  std::size_t produced = 0;
  for (;;) {
    if (produced == out.size()) {
      if (out.size() == claim) {
        // Full: only the end of the frame may remain.
        std::byte probe[1];
        ZSTD_outBuffer extra{probe, sizeof probe, 0};
        const std::size_t rc = ZSTD_decompressStream(dctx.get(), &extra, &src);
        if (ZSTD_isError(rc) != 0) return Error{ErrorKind::corrupt, where + ": zstd payload is corrupt (" + ZSTD_getErrorName(rc) + ")"};
        if (extra.pos != 0)
          return Error{ErrorKind::corrupt, where + ": zstd payload decompresses to more than the " + hex(claim) + " bytes the header claims"};
        if (rc != 0) return Error{ErrorKind::corrupt, where + ": zstd payload is truncated (the frame does not end)"};
        break;
      }
      out.resize(static_cast<std::size_t>(std::min<std::uint64_t>(claim, std::uint64_t{out.size()} * 2)));
    }
    ZSTD_outBuffer dst{out.data(), out.size(), produced};
    const std::size_t consumed = src.pos;
    const std::size_t rc = ZSTD_decompressStream(dctx.get(), &dst, &src);
    if (ZSTD_isError(rc) != 0) return Error{ErrorKind::corrupt, where + ": zstd payload is corrupt (" + ZSTD_getErrorName(rc) + ")"};
    const bool progressed = dst.pos != produced;
    produced = dst.pos;
    if (rc == 0) break;  // frame complete
    if (!progressed && src.pos == consumed && produced < out.size())
      return Error{ErrorKind::corrupt, where + ": zstd payload is truncated (the frame does not end)"};
  }
  if (produced != claim)
    return Error{ErrorKind::corrupt, where + ": zstd payload decompresses to " + hex(produced) + " bytes, the header claims " + hex(claim)};
  out.resize(produced);
  return Ok{};
#endif
}

/// decode_payload_once, then gives back a window buffer the thread's zstd decoder
/// grew for a streamed frame (up to the frame's window, 8 MiB and more): the decoder lives as
/// long as its thread, and 16 threads kept 100 MB of windows in an `inspect --kernels`.
template <class Buffer>
Status decode_payload(const FatbinEntry& e, const std::string& where, std::uint64_t limit, Buffer& in, Buffer& out,
                      const PayloadRelease* release = nullptr) {
  Status status = decode_payload_once(e, where, limit, in, out, release);
#ifndef ARCHGUARD_NO_COMPRESSION
  constexpr std::size_t kDecoderKept = std::size_t{1} << 20;
  if (e.compression == Compression::zstd && ZSTD_sizeof_DCtx(zstd_decoder().get()) > kDecoderKept) zstd_decoder().reset(ZSTD_createDCtx());
#endif
  return status;
}

// ---- Sparse decoding: a large cubin's kernel list from the few parts of it that hold it ----

std::atomic<std::uint64_t> sparse_from{std::uint64_t{16} << 20};
std::atomic<std::uint64_t> sparse_one_pass{0}, sparse_two_passes{0}, sparse_whole{0};
/// What the first pass keeps from the start of an image: nvcc and nvlink put the section names,
/// the symbol strings and the symbol table first (their end lies within 1 MiB for the toolkit's
/// libraries, within 6 MiB for 17 of libtorch_cuda's 372 images of 4 MiB and more: those are
/// decoded a second time, keeping exactly what the first pass found they need).
constexpr std::uint64_t kSparseHead = std::uint64_t{4} << 20;
/// Input read from the file, and output passed over, per step.
constexpr std::size_t kSparseStep = std::size_t{256} << 10;

#ifndef ARCHGUARD_NO_COMPRESSION

/// Byte ranges of an image, sorted and merged.
class Ranges {
 public:
  void add(std::uint64_t begin, std::uint64_t end) {
    if (begin >= end) return;
    r_.emplace_back(begin, end);
    std::sort(r_.begin(), r_.end());
    std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;
    for (const auto& x : r_) {
      if (!merged.empty() && x.first <= merged.back().second) merged.back().second = std::max(merged.back().second, x.second);
      else merged.push_back(x);
    }
    r_ = std::move(merged);
  }
  bool covers(std::uint64_t begin, std::uint64_t end) const {
    if (begin >= end) return true;
    for (const auto& x : r_)
      if (x.first <= begin && end <= x.second) return true;
    return false;
  }
  /// The range holding `at`, else the gap up to the next one (its end: where output is kept again).
  bool holds(std::uint64_t at, std::uint64_t& until) const {
    for (const auto& x : r_) {
      if (at < x.first) {
        until = x.first;
        return false;
      }
      if (at < x.second) {
        until = x.second;
        return true;
      }
    }
    until = UINT64_MAX;
    return false;
  }
  const std::vector<std::pair<std::uint64_t, std::uint64_t>>& list() const { return r_; }

 private:
  std::vector<std::pair<std::uint64_t, std::uint64_t>> r_;
};

std::uint64_t load64(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
std::uint32_t load32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
std::uint16_t load16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Where the section table of a decoded ELF header lies: [begin, end), or nothing when the
/// header is not one sparse decoding can follow (no table, extended numbering, sizes out of the
/// image): the image is then decoded whole.
std::optional<std::pair<std::uint64_t, std::uint64_t>> section_table(const std::byte* image, std::uint64_t size) {
  if (size < sizeof(Elf64_Ehdr) || !looks_like_elf(Bytes(image, size)) || image[EI_CLASS] != std::byte{ELFCLASS64} ||
      image[EI_DATA] != std::byte{ELFDATA2LSB})
    return std::nullopt;
  const std::uint64_t shoff = load64(image + offsetof(Elf64_Ehdr, e_shoff));
  const std::uint64_t entsize = load16(image + offsetof(Elf64_Ehdr, e_shentsize));
  const std::uint64_t count = load16(image + offsetof(Elf64_Ehdr, e_shnum));
  const std::uint64_t names = load16(image + offsetof(Elf64_Ehdr, e_shstrndx));
  if (shoff == 0 || entsize < sizeof(Elf64_Shdr) || count == 0 || names == 0xffff || count > 65535) return std::nullopt;
  if (shoff > size || count * entsize > size - shoff) return std::nullopt;
  return std::pair{shoff, shoff + count * entsize};
}

/// What listing the kernels of the image reads (ElfFile::parse and symbols()): the header, the
/// section table, the section-name table, the first symbol table and its strings. Nothing when
/// the table says something sparse decoding cannot follow.
std::optional<Ranges> needed_ranges(const std::byte* image, std::uint64_t size) {
  const auto table = section_table(image, size);
  if (!table) return std::nullopt;
  const std::uint64_t entsize = load16(image + offsetof(Elf64_Ehdr, e_shentsize));
  const std::uint64_t count = load16(image + offsetof(Elf64_Ehdr, e_shnum));
  const std::uint64_t names = load16(image + offsetof(Elf64_Ehdr, e_shstrndx));
  Ranges need;
  need.add(0, sizeof(Elf64_Ehdr));
  need.add(table->first, table->second);
  auto header = [&](std::uint64_t i) { return image + table->first + i * entsize; };
  auto section = [&](std::uint64_t i) -> bool {  // its bytes, unless it has none in the file
    const std::byte* h = header(i);
    if (load32(h + offsetof(Elf64_Shdr, sh_type)) == SHT_NOBITS) return true;
    const std::uint64_t off = load64(h + offsetof(Elf64_Shdr, sh_offset));
    const std::uint64_t len = load64(h + offsetof(Elf64_Shdr, sh_size));
    if (off > size || len > size - off) return false;  // the whole image decides the error
    need.add(off, off + len);
    return true;
  };
  if (names != 0 && (names >= count || !section(names))) return std::nullopt;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (load32(header(i) + offsetof(Elf64_Shdr, sh_type)) != SHT_SYMTAB) continue;
    const std::uint64_t link = load32(header(i) + offsetof(Elf64_Shdr, sh_link));
    if (!section(i) || link >= count || !section(link)) return std::nullopt;
    break;  // the first symbol table only, as ElfFile::symbols()
  }
  return need;
}

/// One streamed decode of `e`'s zstd payload into `out` (sized to the claim, written only where
/// `keep` says; with `learn`, the section table and what it names are added to `keep` as soon
/// as the header and the table are decoded, where they still lie ahead). The checks and their
/// messages are decode_payload_once's: any failure is left to the whole decode, which reports it.
bool zstd_sparse_pass(const FatbinEntry& e, std::uint64_t in_size, ScratchBuffer& in, ScratchBuffer& out, Ranges& keep, bool learn,
                      const PayloadRelease* release) {
  const std::uint64_t claim = e.uncompressed_size;
  auto& dctx = zstd_decoder();
  if (!dctx || ZSTD_isError(ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_only)) != 0) return false;
  out.resize(static_cast<std::size_t>(claim));
  thread_local std::unique_ptr<std::byte[]> passed(new std::byte[kSparseStep]);
  std::uint64_t read = 0, produced = 0;
  ZSTD_inBuffer src{nullptr, 0, 0};
  bool header_seen = !learn, table_seen = !learn;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> table;
  for (;;) {
    if (src.pos == src.size && read < in_size) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kSparseStep, in_size - read));
      in.resize(n);
      if (!copy_guarded(in.data(), e.payload.data() + read, n)) return false;
      // The payload read so far leaves the process every 4 MiB (a second pass reads it again).
      constexpr std::uint64_t kReleaseEvery = std::uint64_t{4} << 20;
      if (release != nullptr && *release && (read + n) / kReleaseEvery != read / kReleaseEvery)
        (*release)(e.payload.first(static_cast<std::size_t>(read + n)));
      if (read == 0) {
        const unsigned long long content = ZSTD_getFrameContentSize(in.data(), n);
        if (content == ZSTD_CONTENTSIZE_ERROR || (content != ZSTD_CONTENTSIZE_UNKNOWN && content != claim)) return false;
      }
      read += n;
      src = ZSTD_inBuffer{in.data(), n, 0};
    }
    std::uint64_t until = 0;
    const bool kept = keep.holds(produced, until);
    ZSTD_outBuffer dst{};
    if (produced == claim) {
      dst = ZSTD_outBuffer{passed.get(), 1, 0};  // full: only the end of the frame may remain
    } else if (kept) {
      dst = ZSTD_outBuffer{out.data(), static_cast<std::size_t>(std::min(until, claim)), static_cast<std::size_t>(produced)};
    } else {
      dst = ZSTD_outBuffer{passed.get(), static_cast<std::size_t>(std::min<std::uint64_t>({kSparseStep, until - produced, claim - produced})), 0};
    }
    const std::size_t consumed = src.pos, started = dst.pos;
    const std::size_t rc = ZSTD_decompressStream(dctx.get(), &dst, &src);
    if (ZSTD_isError(rc) != 0) return false;
    if (produced == claim) {
      if (dst.pos != 0) return false;  // more than the claim
      if (rc == 0) return true;
      if (src.pos == consumed && read >= in_size) return false;  // the frame does not end
      continue;
    }
    produced += dst.pos - started;
    if (!header_seen && produced >= sizeof(Elf64_Ehdr)) {
      header_seen = true;
      table = section_table(out.data(), claim);
      if (!table) return false;  // decoded whole instead
      if (table->first >= produced) keep.add(table->first, table->second);
      else if (!keep.covers(table->first, table->second)) table_seen = true;  // lost: the second pass keeps what it names
    }
    if (!table_seen && table && produced >= table->second) {
      table_seen = true;
      if (auto need = needed_ranges(out.data(), claim))
        for (const auto& [b, x] : need->list())
          if (b >= produced) keep.add(b, x);
    }
    if (rc == 0) return produced == claim;
    if (dst.pos == started && src.pos == consumed && read >= in_size) return false;  // truncated
  }
}

/// decode_kernels for a large zstd cubin: its kernels from the parts its list reads, or nothing
/// when that cannot be done (the caller then decodes it whole: the same list, or the error).
std::optional<Result<std::vector<Kernel>>> sparse_kernels(const FatbinEntry& e, std::string_view name, const DerivedLimits& limits,
                                                          ScratchBuffer& in, ScratchBuffer& out, const PayloadRelease* release) {
  const std::uint64_t in_size = e.compressed_size != 0 ? e.compressed_size : e.stored_size;
  if (in_size > e.payload.size() || e.uncompressed_size > kMaxImageSize) return std::nullopt;
  const std::uint64_t claim = e.uncompressed_size;
  // The pages written leave with the image: a kept buffer would otherwise keep every image's
  // tables at their own offsets.
  struct Drop {
    ScratchBuffer& out;
    const Ranges& kept;
    ~Drop() {
#if !defined(__SANITIZE_ADDRESS__)
      constexpr std::uint64_t kPage = 4096;
      for (const auto& [b, x] : kept.list()) {
        const std::uint64_t lo = b / kPage * kPage, hi = std::min<std::uint64_t>((x + kPage - 1) / kPage * kPage, out.size());
        if (lo >= kSparseHead && hi > lo) (void)::madvise(out.data() + lo, hi - lo, MADV_DONTNEED);
      }
#endif
    }
  };
  Ranges keep;
  keep.add(0, std::min(kSparseHead, claim));
  const Drop drop{out, keep};
  struct Read {  // what is left of the payload's pages goes with the image
    const FatbinEntry& e;
    std::uint64_t size;
    const PayloadRelease* release;
    ~Read() {
      if (release != nullptr && *release) (*release)(e.payload.first(static_cast<std::size_t>(size)));
    }
  } const read{e, in_size, release};
  // What a pass kept decides the next: the ranges a kernel list reads are derived from the
  // section table, and trusted only once the table itself was kept (a buffer reused from an
  // earlier image holds its bytes where nothing was written).
  for (int pass = 0; pass < 3; ++pass) {
    if (!zstd_sparse_pass(e, in_size, in, out, keep, pass == 0, release)) return std::nullopt;
    auto need = needed_ranges(out.data(), claim);
    if (!need) return std::nullopt;
    bool covered = true;
    for (const auto& [b, x] : need->list()) covered = covered && keep.covers(b, x);
    if (covered) {
      ++(pass == 0 ? sparse_one_pass : sparse_two_passes);
      return list_kernels(e, Bytes(out.data(), static_cast<std::size_t>(claim)), name, limits);
    }
    for (const auto& [b, x] : need->list()) keep.add(b, x);
  }
  return std::nullopt;
}
#endif

}  // namespace

std::size_t zstd_decoder_bytes() {
#ifdef ARCHGUARD_NO_COMPRESSION
  return 0;
#else
  return ZSTD_sizeof_DCtx(zstd_decoder().get());
#endif
}

Result<std::vector<std::byte>> decompress(const FatbinEntry& e, std::string_view name, std::uint64_t limit) {
  const DecodeBudget::Ticket ticket = DecodeBudget::process().take(decode_footprint(e, limit));
  std::vector<std::byte> in, out;
  AG_TRY_STATUS(decode_payload(e, entry_where(name, e), limit, in, out));
  return out;
}

Status check_decodes(const FatbinEntry& e, std::string_view name) {
  if (e.kind == CodeKind::ltoir) return Ok{};
  const DecodeBudget::Ticket ticket = DecodeBudget::process().take(decode_footprint(e));
  ThreadScratch& scratch = thread_scratch();
  const ThreadScratch::Done done{scratch};
  return decode_payload(e, entry_where(name, e), kMaxImageSize, scratch.in, scratch.out);
}

Status check_cubin_image(const FatbinEntry& e, Bytes image, std::string_view name) {
  if (e.kind != CodeKind::sass || e.raw_kind != kEntryKindElf) return Ok{};
  const ByteReader r(image, entry_where(name, e) + ": sass image");
  std::string why;
  if (!looks_like_elf(image)) {
    std::string first;
    for (std::size_t i = 0; i < std::min<std::size_t>(4, image.size()); ++i)
      first += (i != 0 ? " " : "") + hex(std::to_integer<unsigned>(image[i]));
    why = "no elf magic (first bytes " + (first.empty() ? std::string("none") : first) + ")";
  } else if (image.size() < sizeof(Elf64_Ehdr)) {
    why = "an elf header cut short at " + hex(image.size()) + " bytes";
  } else if (image[EI_CLASS] != std::byte{ELFCLASS64} || image[EI_DATA] != std::byte{ELFDATA2LSB}) {
    why = "not a 64-bit little-endian elf file";
  } else if (auto machine = r.u16(offsetof(Elf64_Ehdr, e_machine), "elf header"); machine && *machine != kElfMachineCuda) {
    why = "an elf file for machine " + std::to_string(*machine) + ", not cuda (190)";
  }
  if (why.empty()) return Ok{};
  return Error{ErrorKind::corrupt, entry_where(name, e) + ": the sass image decodes to " + hex(image.size()) + " bytes that are no cubin: " + why};
}

void release_decode_scratch() {
  ScratchRegistry& r = ScratchRegistry::process();
  const std::lock_guard lock(r.mutex);
  for (ThreadScratch* s : r.all) {
    if (s->held.exchange(true, std::memory_order_acquire)) continue;  // decoding: its own to keep
    s->in.release();
    s->out.release();
    s->held.store(false, std::memory_order_release);
  }
}

std::size_t decode_scratch_bytes() { return scratch_mapped.load(); }

DecodeScratchKept::DecodeScratchKept(std::size_t most, Bound bound) : before_(scratch_kept_most.load()) {
  if (bound == Bound::at_least ? most > before_ : most < before_) scratch_kept_most.store(most);
}

DecodeScratchKept::~DecodeScratchKept() { scratch_kept_most.store(before_); }

std::size_t DecodeScratchKept::most() { return scratch_kept_most.load(); }

std::size_t judging_scratch_kept_bytes(unsigned threads) {
  constexpr std::size_t kPerThread = std::size_t{12} << 20;
  constexpr std::size_t kMost = std::size_t{192} << 20;
  return std::clamp<std::size_t>(std::size_t{threads} * kPerThread, kDecodeScratchKeptDefault, kMost);
}

std::uint64_t sparse_decode_from() { return sparse_from.load(); }
std::uint64_t set_sparse_decode_from(std::uint64_t bytes) { return sparse_from.exchange(bytes); }
SparseDecodeCounts sparse_decode_counts() { return {sparse_one_pass.load(), sparse_two_passes.load(), sparse_whole.load()}; }

Result<std::vector<Kernel>> decode_kernels(const FatbinEntry& e, std::string_view name, const DerivedLimits& limits,
                                           const PayloadRelease& release) {
  if (e.kind == CodeKind::ltoir) return std::vector<Kernel>{};  // LTO-IR is not decoded
#ifndef ARCHGUARD_NO_COMPRESSION
  const bool sparse = e.kind == CodeKind::sass && e.raw_kind == kEntryKindElf && e.compression == Compression::zstd &&
                      e.uncompressed_size >= sparse_from.load(std::memory_order_relaxed);
#else
  const bool sparse = false;
#endif
  // Sparse: the steps of input and output, what is kept (the first 4 MiB and the tables named
  // beyond) and the decoder's window (up to 8 MiB in the toolkit's and PyTorch's frames).
  const std::uint64_t footprint = sparse ? std::min(decode_footprint(e), 2 * kSparseStep + kSparseHead + (std::uint64_t{9} << 20))
                                         : decode_footprint(e);
  const DecodeBudget::Ticket ticket = DecodeBudget::process().take(footprint);
  // The image lives in this thread's scratch buffers only until its kernels are listed.
  ThreadScratch& scratch = thread_scratch();
  ScratchBuffer& in = scratch.in;
  ScratchBuffer& out = scratch.out;
  const ThreadScratch::Done done{scratch};
#ifndef ARCHGUARD_NO_COMPRESSION
  if (sparse) {
    auto listed = sparse_kernels(e, name, limits, in, out, &release);
    if (zstd_decoder_bytes() > (std::size_t{1} << 20)) zstd_decoder().reset(ZSTD_createDCtx());  // its window goes
    if (listed) return std::move(*listed);
    ++sparse_whole;
  }
#endif
  AG_TRY_STATUS(decode_payload(e, entry_where(name, e), kMaxImageSize, in, out, &release));
  return list_kernels(e, Bytes(out.data(), out.size()), name, limits);
}

Result<std::vector<Kernel>> list_kernels(const FatbinEntry& e, Bytes image, std::string_view name, const DerivedLimits& limits) {
  std::vector<Kernel> out;
  if (e.kind == CodeKind::ltoir) return out;
  const std::uint64_t most = limits.max_kernel_name_bytes;
  std::uint64_t spent = 0;  // name bytes derived so far, against `most`
  auto add = [&](std::string_view n) -> Status {
    spent += n.size();
    if (spent <= most) {
      std::string d = demangle(n);
      spent += d.size();
      if (spent <= most) {
        out.push_back(Kernel{std::string(n), std::move(d)});
        return Ok{};
      }
    }
    return Error{ErrorKind::limit, entry_where(name, e) + ": kernel names after " + std::to_string(out.size()) +
                                       " kernels exceed the limit " + hex(most) +
                                       " bytes per image (raise it with ARCHGUARD_MAX_KERNEL_NAMES)"};
  };
  if (e.kind == CodeKind::sass) {
    AG_TRY(ElfFile cubin, ElfFile::parse(image, entry_where(name, e) + ": cubin", limits.max_name_length));
    // Every name is read and checked, not only the entries': a symbol table with a name past its
    // string table is reported as a damaged image, whichever symbol the damage hits.
    AG_TRY(std::vector<ElfSymbol> syms, cubin.symbols());
    for (const auto& s : syms) {
      if (s.type() != STT_FUNC || (s.other & kStoCudaEntry) == 0 || s.name.empty()) continue;
      AG_TRY_STATUS(add(s.name));
    }
    return out;
  }
  // PTX: lines "[.visible|.weak|.extern] .entry <name>[(...]", comments removed. Only the lines
  // that hold ".entry" can declare one: they are found with memmem, not by reading every line
  // (a PTX image is megabytes of instructions; splitting it into lines was 8% of a listing).
  std::string_view text(reinterpret_cast<const char*>(image.data()), image.size());  // bytes as chars
  if (auto nul = text.find('\0'); nul != std::string_view::npos) text = text.substr(0, nul);
  static constexpr std::string_view kEntry = ".entry";
  while (!text.empty()) {
    const void* hit = ::memmem(text.data(), text.size(), kEntry.data(), kEntry.size());
    if (hit == nullptr) break;
    const auto at = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
    const std::size_t before = text.rfind('\n', at);
    const std::size_t start = before == std::string_view::npos ? 0 : before + 1;
    const std::size_t nl = text.find('\n', at);
    std::string_view line = text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (auto c = line.find("//"); c != std::string_view::npos) line = line.substr(0, c);
    auto next_token = [&line]() {
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t' || line.front() == '\r')) line.remove_prefix(1);
      std::size_t n = 0;
      while (n < line.size() && line[n] != ' ' && line[n] != '\t' && line[n] != '\r' && line[n] != '(') ++n;
      std::string_view t = line.substr(0, n);
      line.remove_prefix(n);
      return t;
    };
    std::string_view t = next_token();
    while (t == ".visible" || t == ".weak" || t == ".extern") t = next_token();
    if (t != ".entry") continue;
    std::string_view n = next_token();
    std::size_t len = 0;
    while (len < n.size() && is_ident(n[len])) ++len;
    if (len == 0) continue;
    n = n.substr(0, len);
    AG_TRY_STATUS(add(n));
  }
  return out;
}

}  // namespace archguard
