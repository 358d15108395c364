// SPDX-License-Identifier: Apache-2.0
// The in-process recorder of `archguard run` (see recorder.hpp for the rules it keeps and
// docs/run.md for the event format). Everything here runs inside the watched program, in CUPTI
// callbacks on the program's own threads: no exceptions escape, nothing is printed, memory is
// fixed or budgeted, and a failure of the recorder only ends the recording.
#include "run/recorder.hpp"

#include <cupti.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace archguard::run::detail {
namespace {

// ---- time, safe memory reads ---------------------------------------------------------------

std::uint64_t now_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

int g_mem_fd = -1;     // /proc/self/mem, the fallback where process_vm_readv is refused
pid_t g_self_pid = 0;  // this process (getpid is a system call; set when the event file opens)

/// Copies `n` bytes at `addr` of this process; false (never a fault) where they are not mapped.
bool safe_read(const void* addr, void* out, std::size_t n) noexcept {
  if (n == 0) return true;
  if (addr == nullptr) return false;
  iovec local{out, n};
  iovec remote{const_cast<void*>(addr), n};
  const ssize_t got = ::process_vm_readv(g_self_pid != 0 ? g_self_pid : ::getpid(), &local, 1, &remote, 1, 0);
  if (got == static_cast<ssize_t>(n)) return true;
  if (got < 0 && (errno == ENOSYS || errno == EPERM) && g_mem_fd >= 0) {
    const ssize_t r = ::pread(g_mem_fd, out, n, static_cast<off_t>(reinterpret_cast<std::uintptr_t>(addr)));
    return r == static_cast<ssize_t>(n);
  }
  return false;
}

template <typename T>
bool read_value(const void* addr, T& out) noexcept {
  return safe_read(addr, &out, sizeof(T));
}

// ---- one event line ----------------------------------------------------------------------

constexpr std::size_t kLineMax = 16384;
constexpr std::size_t kStringMax = 4096;  // longer strings are cut and marked "...(cut)"

/// A JSON object built in a fixed buffer; an overflowing line is cut and still closed.
class Line {
 public:
  explicit Line(const char* event) {
    raw("{\"ev\":\"");
    raw(event);
    raw("\"");
    num("t", static_cast<long long>(now_ns() / 1000));
  }
  void raw(const char* s) noexcept {
    while (*s != 0 && n_ + 4 < kLineMax) buf_[n_++] = *s++;
  }
  void key(const char* k) noexcept {
    raw(",\"");
    raw(k);
    raw("\":");
  }
  void num(const char* k, long long v) noexcept {
    char t[32];
    std::snprintf(t, sizeof t, "%lld", v);
    key(k);
    raw(t);
  }
  void unum(const char* k, unsigned long long v) noexcept {
    char t[32];
    std::snprintf(t, sizeof t, "%llu", v);
    key(k);
    raw(t);
  }
  void ptr(const char* k, const void* p) noexcept {
    char t[32];
    std::snprintf(t, sizeof t, "\"0x%llx\"", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
    key(k);
    raw(t);
  }
  void dbl(const char* k, double v) noexcept {
    char t[40];
    std::snprintf(t, sizeof t, "%.3f", v);
    key(k);
    raw(t);
  }
  /// A string, escaped for JSON; bytes >= 0x80 are written as \u00XX (read back as Latin-1),
  /// so a name that is not UTF-8 still gives a valid line.
  void str(const char* k, const char* s, std::size_t len = static_cast<std::size_t>(-1)) noexcept {
    key(k);
    value(s, len);
  }
  /// A bare string value (an array element), escaped as str() does.
  void value(const char* s, std::size_t len = static_cast<std::size_t>(-1)) noexcept {
    if (s == nullptr) {
      raw("null");
      return;
    }
    raw("\"");
    for (std::size_t i = 0; i < len && s[i] != 0; ++i) {
      if (i == kStringMax) {
        raw("...(cut)");
        break;
      }
      const auto c = static_cast<unsigned char>(s[i]);
      if (n_ + 8 >= kLineMax) break;
      if (c == '"' || c == '\\') {
        buf_[n_++] = '\\';
        buf_[n_++] = static_cast<char>(c);
      } else if (c < 0x20 || c >= 0x7f) {
        char t[8];
        std::snprintf(t, sizeof t, "\\u%04x", c);
        raw(t);
      } else {
        buf_[n_++] = static_cast<char>(c);
      }
    }
    raw("\"");
  }
  /// Ends the object; returns the bytes to write.
  const char* finish(std::size_t& size) noexcept {
    if (n_ + 2 >= kLineMax) n_ = kLineMax - 2;
    buf_[n_++] = '}';
    buf_[n_++] = '\n';
    size = n_;
    return buf_;
  }

 private:
  char buf_[kLineMax];
  std::size_t n_ = 0;
};

// The callbacks the recorder enables (CUPTI calls back only for these).
struct Cb {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId id;
};
const Cb kCallbacks[] = {
    {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleLoad},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFuncSetAttribute_v9000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetFuncBySymbol_v11000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6050},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags_v7000},
};
constexpr std::size_t kCallbackCount = sizeof kCallbacks / sizeof kCallbacks[0];

// ---- process-wide state (static storage, never destroyed) -----------------------------------

using SubscribeV2Fn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*, CUpti_SubscriberParams*);
using SubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
using UnsubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle);
using EnableCallbackFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
using ResultStringFn = CUptiResult (*)(CUptiResult, const char**);
using GetVersionFn = CUptiResult (*)(uint32_t*);

struct Driver {
  CUresult (*ctx_get_device_v2)(CUdevice*, CUcontext) = nullptr;
  CUresult (*ctx_get_device)(CUdevice*) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*device_get_name)(char*, int, CUdevice) = nullptr;
  CUresult (*func_get_name)(const char**, CUfunction) = nullptr;
  CUresult (*func_get_module)(CUmodule*, CUfunction) = nullptr;
  CUresult (*kernel_get_name)(const char**, CUkernel) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
};

struct State {
  std::mutex write_mutex;  // one line at a time; also guards the tables below
  int fd = -1;
  pid_t pid = 0;
  char dir[2048] = {};
  char file[2304] = {};
  bool predict = false;
  std::uint64_t max_copy = 0;
  std::uint64_t copied = 0;
  unsigned copies = 0;
  void* cupti = nullptr;
  CUpti_SubscriberHandle subscriber = nullptr;
  UnsubscribeFn unsubscribe = nullptr;
  Driver drv;
  std::atomic<bool> active{false};
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> launches{0}, failed_launches{0}, module_loads{0}, modules{0}, lines_dropped{0},
      nested_driver{0};
  bool empty_callback = false;
  // Failures seen, by (api, result, subject): the first is written, the rest counted.
  struct Seen {
    std::uint64_t key;
    std::uint64_t count;
  };
  static constexpr std::size_t kSeen = 4096;
  Seen seen[kSeen] = {};
  std::size_t seen_used = 0;
  // Devices already described, by ordinal.
  static constexpr int kDevices = 64;
  std::atomic<bool> device_written[kDevices] = {};
  // --predict: every distinct kernel launched, by host function (runtime) or CUfunction (driver).
  static constexpr std::size_t kLaunched = 65536;
  std::atomic<std::uintptr_t> launched_host[kLaunched] = {};
  std::atomic<std::uintptr_t> launched_fn[kLaunched] = {};
  std::atomic<std::uint64_t> launched_overflow{0};
  // Contexts whose device has been described (a successful run writes its devices too).
  static constexpr std::size_t kContexts = 32;
  std::atomic<const void*> contexts[kContexts] = {};
  // How often each enabled callback fired (exit sites), for the closing line: which calls a
  // program makes per launch is what the recorder costs.
  std::atomic<std::uint64_t> calls[kCallbackCount] = {};
  char maps_buf[65536];
  char copy_buf[65536];
  char path_buf[4096];
  char real_buf[4096];
};

alignas(State) unsigned char g_state_storage[sizeof(State)];
State* g = nullptr;

// What the calling thread is inside of: the API whose enter callback ran last and has not exited.
struct ThreadCall {
  int depth = 0;
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_INVALID;
  CUpti_CallbackId cbid = 0;
  const char* name = nullptr;
  const void* func = nullptr;  // runtime host function, or CUfunction
  std::uint64_t enter_ns = 0;
  unsigned modules = 0;  // modules loaded inside this call
};
struct ThreadState {
  ThreadCall outer;   // the outermost traced call (a runtime call, or a driver call)
  ThreadCall driver;  // the traced driver call inside it, if any
  int in_recorder = 0;
};
// One thread-local object, reached once per callback (each access to a thread_local of a
// dlopen()ed library is a call to __tls_get_addr).
thread_local ThreadState t_state;
std::atomic<bool> g_forked{false};  // set in a forked child until it has its own event file

void write_line(Line& line) noexcept {
  std::size_t size = 0;
  const char* data = line.finish(size);
  if (g == nullptr || g->fd < 0) return;
  std::size_t off = 0;
  while (off < size) {
    const ssize_t w = ::write(g->fd, data + off, size - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      g->lines_dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    off += static_cast<std::size_t>(w);
  }
}

/// Opens this process's event file (after a fork the child gets its own).
bool open_event_file() noexcept {
  g->pid = ::getpid();
  g_self_pid = g->pid;
  std::snprintf(g->file, sizeof g->file, "%s/p%ld.events", g->dir, static_cast<long>(g->pid));
  const int fd = ::open(g->file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  if (g->fd >= 0) ::close(g->fd);
  g->fd = fd;
  return true;
}

void write_process_line(const char* origin) noexcept {
  Line l("process");
  l.num("pid", ::getpid());
  l.num("ppid", ::getppid());
  l.str("origin", origin);
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    l.str("exe", exe);
  }
  // argv from /proc/self/cmdline (NUL separated), as one JSON array
  l.key("argv");
  l.raw("[");
  const int fd = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[8192];
    const ssize_t got = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    bool first = true;
    for (ssize_t i = 0; got > 0 && i < got;) {
      const std::size_t len = ::strnlen(buf + i, static_cast<std::size_t>(got - i));
      if (!first) l.raw(",");
      first = false;
      l.value(buf + i, len);
      i += static_cast<ssize_t>(len) + 1;
    }
  }
  l.raw("]");
  static const char* const kVars[] = {"CUDA_VISIBLE_DEVICES", "CUDA_MODULE_LOADING", "CUDA_FORCE_PTX_JIT",
                                      "CUDA_DISABLE_PTX_JIT", "CUDA_CACHE_DISABLE", "CUDA_CACHE_PATH",
                                      "CUDA_CACHE_MAXSIZE", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_ORDER"};
  l.key("env");
  l.raw("{\"_\":0");
  for (const char* v : kVars) {
    if (const char* val = std::getenv(v)) l.str(v, val);
  }
  l.raw("}");
  // The driver's own version line (no CUDA call needed).
  const int vfd = ::open("/proc/driver/nvidia/version", O_RDONLY | O_CLOEXEC);
  if (vfd >= 0) {
    char buf[512];
    const ssize_t got = ::read(vfd, buf, sizeof buf - 1);
    ::close(vfd);
    if (got > 0) {
      buf[got] = 0;
      char* nl = std::strchr(buf, '\n');
      if (nl != nullptr) *nl = 0;
      l.str("driver_version_line", buf);
    }
  }
  write_line(l);
}

// ---- where a pointer lives ------------------------------------------------------------------

struct Place {
  bool mapped = false;  // inside a file mapping
  char path[2048] = {};
  std::uint64_t offset = 0;  // in that file
  bool readable = false;     // inside any mapping we could read
};

/// Looks `p` up in /proc/self/maps (no loader lock, no fault). Caller holds write_mutex.
Place place_of(const void* p) noexcept {
  Place out;
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char* buf = g->maps_buf;
  std::size_t have = 0;
  bool done = false;
  while (!done) {
    const ssize_t got = ::read(fd, buf + have, sizeof g->maps_buf - 1 - have);
    if (got <= 0) {
      if (have == 0) break;
      done = true;
    } else {
      have += static_cast<std::size_t>(got);
    }
    buf[have] = 0;
    std::size_t start = 0;
    for (;;) {
      char* nl = static_cast<char*>(std::memchr(buf + start, '\n', have - start));
      if (nl == nullptr && !done) break;
      if (nl != nullptr) *nl = 0;
      // "start-end perms offset dev inode   path"
      unsigned long long lo = 0, hi = 0, off = 0;
      char perms[8] = {};
      int consumed = 0;
      if (std::sscanf(buf + start, "%llx-%llx %7s %llx %*s %*s%n", &lo, &hi, perms, &off, &consumed) >= 4 &&
          addr >= lo && addr < hi) {
        out.readable = perms[0] == 'r';
        const char* path = buf + start + consumed;
        while (*path == ' ') ++path;
        if (*path == '/') {
          out.mapped = true;
          std::snprintf(out.path, sizeof out.path, "%s", path);
          // a deleted file keeps its name with " (deleted)"
          out.offset = off + (addr - lo);
        }
        ::close(fd);
        return out;
      }
      if (nl == nullptr) break;
      start = static_cast<std::size_t>(nl - buf) + 1;
      if (start >= have) break;
    }
    // keep the partial last line
    std::memmove(buf, buf + start, have - start);
    have -= start;
    if (have >= sizeof g->maps_buf - 1) have = 0;  // a line longer than the buffer: skip it
  }
  ::close(fd);
  return out;
}

void add_place(Line& l, const char* key, const void* p) noexcept {
  const Place pl = place_of(p);
  l.ptr(key, p);
  if (pl.mapped) {
    char k[64];
    std::snprintf(k, sizeof k, "%s_file", key);
    l.str(k, pl.path);
    std::snprintf(k, sizeof k, "%s_offset", key);
    l.unum(k, pl.offset);
  }
}

// ---- images held in memory ---------------------------------------------------------------

constexpr std::uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr std::uint32_t kWrapperMagic = 0x466243B1u;
constexpr std::uint32_t kLtoMagic = 0x7F4E43EDu;
constexpr std::uint64_t kMaxImage = std::uint64_t{256} << 20;

struct ImageShape {
  const char* kind = "unknown";  // fatbin, wrapper, elf, ptx, ltoir, unknown, unreadable
  const void* start = nullptr;   // where the bytes to copy begin (a wrapper's fatbin)
  std::uint64_t size = 0;        // 0: unknown
};

ImageShape shape_of(const void* image) noexcept {
  ImageShape s;
  s.start = image;
  unsigned char head[64];
  if (!safe_read(image, head, sizeof head)) {
    s.kind = "unreadable";
    return s;
  }
  std::uint32_t magic = 0;
  std::memcpy(&magic, head, 4);
  if (magic == kWrapperMagic) {
    const void* data = nullptr;
    std::memcpy(&data, head + 8, sizeof data);
    unsigned char fh[16];
    s.kind = "wrapper";
    if (!safe_read(data, fh, sizeof fh)) return s;
    std::memcpy(&magic, fh, 4);
    if (magic != kFatbinMagic) return s;
    std::uint16_t hs = 0;
    std::uint64_t fs = 0;
    std::memcpy(&hs, fh + 6, 2);
    std::memcpy(&fs, fh + 8, 8);
    s.start = data;
    if (fs < kMaxImage) s.size = hs + fs;
    return s;
  }
  if (magic == kFatbinMagic) {
    std::uint16_t hs = 0;
    std::uint64_t fs = 0;
    std::memcpy(&hs, head + 6, 2);
    std::memcpy(&fs, head + 8, 8);
    s.kind = "fatbin";
    if (fs < kMaxImage) s.size = hs + fs;
    return s;
  }
  if (head[0] == 0x7f && head[1] == 'E' && head[2] == 'L' && head[3] == 'F') {
    s.kind = "elf";
    if (head[4] != 2) return s;  // 64-bit only
    std::uint64_t phoff = 0, shoff = 0;
    std::uint16_t phentsize = 0, phnum = 0, shentsize = 0, shnum = 0;
    std::memcpy(&phoff, head + 0x20, 8);
    std::memcpy(&shoff, head + 0x28, 8);
    std::memcpy(&phentsize, head + 0x36, 2);
    std::memcpy(&phnum, head + 0x38, 2);
    std::memcpy(&shentsize, head + 0x3a, 2);
    std::memcpy(&shnum, head + 0x3c, 2);
    std::uint64_t end = 64;
    if (phoff < kMaxImage) end = std::max<std::uint64_t>(end, phoff + std::uint64_t{phentsize} * phnum);
    if (shoff < kMaxImage) end = std::max<std::uint64_t>(end, shoff + std::uint64_t{shentsize} * shnum);
    // sections may lie after the section table: take each one's end (bounded reads)
    if (shoff < kMaxImage && shentsize >= 64) {
      for (std::uint16_t i = 0; i < shnum; ++i) {
        unsigned char sh[64];
        if (!safe_read(static_cast<const unsigned char*>(image) + shoff + std::uint64_t{i} * shentsize, sh, 64)) break;
        std::uint32_t type = 0;
        std::uint64_t off = 0, size = 0;
        std::memcpy(&type, sh + 4, 4);
        std::memcpy(&off, sh + 0x18, 8);
        std::memcpy(&size, sh + 0x20, 8);
        if (type != 8 /* SHT_NOBITS */ && off < kMaxImage && size < kMaxImage) end = std::max(end, off + size);
      }
    }
    if (end <= kMaxImage) s.size = end;
    return s;
  }
  if (magic == kLtoMagic) {
    s.kind = "ltoir";
    return s;
  }
  // PTX (or other text): up to the terminating NUL
  s.kind = "text";
  const auto* p = static_cast<const char*>(image);
  char chunk[4096];
  for (std::uint64_t off = 0; off < (std::uint64_t{64} << 20); off += sizeof chunk) {
    std::size_t want = sizeof chunk;
    if (!safe_read(p + off, chunk, want)) {
      // the last page may be short: read byte by byte up to the end of the mapping
      for (std::size_t i = 0; i < sizeof chunk; ++i) {
        char c = 0;
        if (!safe_read(p + off + i, &c, 1)) return s;
        if (c == 0) {
          s.size = off + i;
          return s;
        }
      }
      return s;
    }
    if (const void* z = std::memchr(chunk, 0, want)) {
      s.size = off + static_cast<std::uint64_t>(static_cast<const char*>(z) - chunk);
      return s;
    }
  }
  return s;
}

/// Copies an image held in memory to <dir>/m<pid>-<n>.bin within the budget. Caller holds write_mutex.
void copy_image(Line& l, const ImageShape& s) noexcept {
  if (s.size == 0) {
    l.str("copy", "skipped: size unknown");
    return;
  }
  if (s.size > (std::uint64_t{64} << 20) || g->copied + s.size > g->max_copy) {
    l.str("copy", "skipped: over the copy budget (ARCHGUARD_RUN_MAX_COPY)");
    return;
  }
  char name[2400];
  std::snprintf(name, sizeof name, "%s/m%ld-%u.bin", g->dir, static_cast<long>(g->pid), g->copies);
  const int fd = ::open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    l.str("copy", "skipped: cannot create the copy");
    return;
  }
  char* buf = g->copy_buf;
  std::uint64_t done = 0;
  bool ok = true;
  while (done < s.size && ok) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(sizeof g->copy_buf, s.size - done));
    ok = safe_read(static_cast<const char*>(s.start) + done, buf, n) && ::write(fd, buf, n) == static_cast<ssize_t>(n);
    done += n;
  }
  ::close(fd);
  if (!ok) {
    ::unlink(name);
    l.str("copy", "skipped: the bytes could not be read");
    return;
  }
  ++g->copies;
  g->copied += s.size;
  const char* base = std::strrchr(name, '/');
  l.str("copy", base != nullptr ? base + 1 : name);
}

/// Where an image handed to a load call comes from: a file mapping (path and offset), or memory
/// (kind, size and, within the budget, a copy).
void describe_image(Line& l, const void* image, bool failed) noexcept {
  const ImageShape s = shape_of(image);
  l.str("image_kind", s.kind);
  if (s.size != 0) l.unum("image_size", s.size);
  const Place pl = place_of(s.start);
  l.ptr("image", s.start);
  if (pl.mapped) {
    l.str("image_file", pl.path);
    l.unum("image_offset", pl.offset);
  } else {
    (void)failed;  // every image from memory is copied (within the budget): a later lookup needs it
    copy_image(l, s);
  }
}

// ---- devices -----------------------------------------------------------------------------

struct DeviceInfo {
  int ordinal = -1;
  bool describe = false;  // not written yet: the fields below are filled
  int major = 0, minor = 0, integrated = 0, driver_cuda = 0;
  char name[256] = {};
};

/// Asks the driver which device a context is on and, the first time, what it is. Called at
/// the exit of an API call, outside the recorder's lock (the driver may take its own locks).
DeviceInfo query_device(CUcontext ctx) noexcept {
  DeviceInfo d;
  CUdevice dev = -1;
  CUresult r = CUDA_ERROR_NOT_INITIALIZED;
  if (ctx != nullptr && g->drv.ctx_get_device_v2 != nullptr) r = g->drv.ctx_get_device_v2(&dev, ctx);
  if (r != CUDA_SUCCESS && g->drv.ctx_get_device != nullptr) r = g->drv.ctx_get_device(&dev);
  if (r != CUDA_SUCCESS || dev < 0) return d;
  d.ordinal = dev;
  if (dev >= State::kDevices || g->device_written[dev].load(std::memory_order_relaxed)) return d;
  d.describe = true;
  if (g->drv.device_get_attribute != nullptr) {
    g->drv.device_get_attribute(&d.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    g->drv.device_get_attribute(&d.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    g->drv.device_get_attribute(&d.integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, dev);
  }
  if (g->drv.device_get_name != nullptr) g->drv.device_get_name(d.name, sizeof d.name - 1, dev);
  if (g->drv.driver_get_version != nullptr) g->drv.driver_get_version(&d.driver_cuda);
  return d;
}

/// Writes the "device" line of a first-seen device. Caller holds write_mutex.
void emit_device(const DeviceInfo& d) noexcept {
  if (!d.describe || d.ordinal < 0 || d.ordinal >= State::kDevices) return;
  if (g->device_written[d.ordinal].exchange(true)) return;
  Line l("device");
  l.num("ordinal", d.ordinal);
  l.num("cc_major", d.major);
  l.num("cc_minor", d.minor);
  l.num("integrated", d.integrated);
  l.str("name", d.name);
  l.num("driver_cuda", d.driver_cuda);
  write_line(l);
}

/// What the driver says of a CUfunction, asked outside the recorder's lock.
struct FunctionInfo {
  const void* function = nullptr;
  const char* name = nullptr;
  CUmodule module = nullptr;
};

FunctionInfo query_function(const void* f) noexcept {
  FunctionInfo fi;
  fi.function = f;
  auto* fn = static_cast<CUfunction>(const_cast<void*>(f));
  if (fn == nullptr) return fi;
  if (g->drv.func_get_name != nullptr && g->drv.func_get_name(&fi.name, fn) != CUDA_SUCCESS) fi.name = nullptr;
  if (g->drv.func_get_module != nullptr && g->drv.func_get_module(&fi.module, fn) != CUDA_SUCCESS) fi.module = nullptr;
  return fi;
}

void write_function(Line& l, const FunctionInfo& fi) noexcept {
  l.ptr("function", fi.function);
  if (fi.name != nullptr) l.str("kernel", fi.name);
  if (fi.module != nullptr) l.ptr("module", fi.module);
}

// ---- failures ----------------------------------------------------------------------------

/// True the first time (api, result, subject) is seen; later ones are counted.
bool first_failure(std::uint64_t key) noexcept {
  std::size_t i = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 52) % State::kSeen;
  for (std::size_t probe = 0; probe < State::kSeen; ++probe, i = (i + 1) % State::kSeen) {
    if (g->seen[i].count == 0) {
      if (g->seen_used + 1 >= State::kSeen) return false;  // full: count nothing more, write nothing
      g->seen[i] = {key, 1};
      ++g->seen_used;
      return true;
    }
    if (g->seen[i].key == key) {
      ++g->seen[i].count;
      return false;
    }
  }
  return false;
}

std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept { return (a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2))); }
std::uint64_t hash_str(const char* s) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; s != nullptr && s[i] != 0 && i < 4096; ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 1099511628211ull;
  return h;
}

bool insert_launched(std::atomic<std::uintptr_t>* table, std::uintptr_t key) noexcept {
  if (key == 0) return false;
  std::size_t i = static_cast<std::size_t>((static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> 48) % State::kLaunched;
  for (std::size_t probe = 0; probe < 64; ++probe, i = (i + 1) % State::kLaunched) {
    std::uintptr_t cur = table[i].load(std::memory_order_relaxed);
    if (cur == key) return false;
    if (cur == 0) {
      if (table[i].compare_exchange_strong(cur, key, std::memory_order_relaxed)) return true;
      if (cur == key) return false;
    }
  }
  g->launched_overflow.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool is_launch(CUpti_CallbackDomain d, CUpti_CallbackId id) noexcept {
  if (d == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (id) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
        return true;
      default:
        return false;
    }
  }
  if (d == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (id) {
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
        return true;
      default:
        return false;
    }
  }
  return false;
}

/// The host function (runtime) or CUfunction (driver) a call is about; null when none.
const void* subject_of(CUpti_CallbackDomain d, CUpti_CallbackId id, const void* params) noexcept {
  if (params == nullptr) return nullptr;
  if (d == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (id) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
        return static_cast<const cudaLaunchKernel_v7000_params*>(params)->func;
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
        return static_cast<const cudaLaunchKernelExC_v11060_params*>(params)->func;
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
        return static_cast<const cudaLaunchCooperativeKernel_v9000_params*>(params)->func;
      case CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020:
        return static_cast<const cudaFuncGetAttributes_v3020_params*>(params)->func;
      case CUPTI_RUNTIME_TRACE_CBID_cudaFuncSetAttribute_v9000:
        return static_cast<const cudaFuncSetAttribute_v9000_params*>(params)->func;
      case CUPTI_RUNTIME_TRACE_CBID_cudaGetFuncBySymbol_v11000:
        return static_cast<const cudaGetFuncBySymbol_v11000_params*>(params)->symbolPtr;
      case CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6050:
        return static_cast<const cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6050_params*>(params)->func;
      case CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags_v7000:
        return static_cast<const cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags_v7000_params*>(params)->func;
      default:
        return nullptr;
    }
  }
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      return static_cast<const cuLaunchKernel_params*>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return static_cast<const cuLaunchKernelEx_params*>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return static_cast<const cuLaunchCooperativeKernel_params*>(params)->f;
    default:
      return nullptr;
  }
}

/// The exit of a driver call that loads code.
void on_driver_load(CUpti_CallbackId id, const CUpti_CallbackData* cb, CUresult result, double ms, unsigned modules) noexcept {
  ThreadState& TS = t_state;
  const void* image = nullptr;
  const char* path = nullptr;
  const void* handle_out = nullptr;
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoad: {
      const auto* p = static_cast<const cuModuleLoad_params*>(cb->functionParams);
      path = p->fname;
      handle_out = p->module;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData: {
      const auto* p = static_cast<const cuModuleLoadData_params*>(cb->functionParams);
      image = p->image;
      handle_out = p->module;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx: {
      const auto* p = static_cast<const cuModuleLoadDataEx_params*>(cb->functionParams);
      image = p->image;
      handle_out = p->module;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary: {
      const auto* p = static_cast<const cuModuleLoadFatBinary_params*>(cb->functionParams);
      image = p->fatCubin;
      handle_out = p->module;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData: {
      const auto* p = static_cast<const cuLibraryLoadData_params*>(cb->functionParams);
      image = p->code;
      handle_out = p->library;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile: {
      const auto* p = static_cast<const cuLibraryLoadFromFile_params*>(cb->functionParams);
      path = p->fileName;
      handle_out = p->library;
      break;
    }
    default:
      return;
  }
  g->module_loads.fetch_add(1, std::memory_order_relaxed);
  const DeviceInfo dev = query_device(cb->context);
  std::lock_guard<std::mutex> lock(g->write_mutex);
  emit_device(dev);
  Line l("load");
  l.str("api", cb->functionName);
  l.num("result", result);
  l.dbl("ms", ms);
  if (TS.outer.depth > 0 && TS.outer.domain == CUPTI_CB_DOMAIN_RUNTIME_API) l.str("inside", TS.outer.name);
  void* handle = nullptr;
  if (result == CUDA_SUCCESS && handle_out != nullptr) read_value(handle_out, handle);
  l.ptr("handle", handle);
  l.unum("modules", modules);
  if (path != nullptr) {
    char* p = g->path_buf;
    std::size_t i = 0;
    for (; i + 1 < sizeof g->path_buf && safe_read(path + i, p + i, 1) && p[i] != 0; ++i) {
    }
    p[i] = 0;
    l.str("path", p);
    if (::realpath(p, g->real_buf) != nullptr) l.str("realpath", g->real_buf);
  }
  if (image != nullptr) describe_image(l, image, result != CUDA_SUCCESS);
  l.num("device", dev.ordinal);
  write_line(l);
}

void on_failure(CUpti_CallbackDomain d, CUpti_CallbackId id, const CUpti_CallbackData* cb, int result) noexcept {
  ThreadState& TS = t_state;
  const void* subject = subject_of(d, id, cb->functionParams);
  const char* name = nullptr;   // the kernel name the call names (driver lookups by name)
  const void* owner = nullptr;  // the module or library of a lookup
  if (d == CUPTI_CB_DOMAIN_DRIVER_API && cb->functionParams != nullptr) {
    if (id == CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction) {
      const auto* p = static_cast<const cuModuleGetFunction_params*>(cb->functionParams);
      name = p->name;
      owner = p->hmod;
    } else if (id == CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel) {
      const auto* p = static_cast<const cuLibraryGetKernel_params*>(cb->functionParams);
      name = p->name;
      owner = p->library;
    } else if (id == CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction) {
      const auto* p = static_cast<const cuKernelGetFunction_params*>(cb->functionParams);
      subject = p->kernel;
      if (g->drv.kernel_get_name != nullptr) g->drv.kernel_get_name(&name, p->kernel);
    }
  }
  char name_copy[kStringMax + 1] = {};
  if (name != nullptr) {
    std::size_t i = 0;
    for (; i < kStringMax && safe_read(name + i, name_copy + i, 1) && name_copy[i] != 0; ++i) {
    }
    name_copy[i] = 0;
  }
  const std::uint64_t key = mix(mix(mix(static_cast<std::uint64_t>(d), id), static_cast<std::uint64_t>(result)),
                                mix(reinterpret_cast<std::uintptr_t>(subject) ^ reinterpret_cast<std::uintptr_t>(owner),
                                    hash_str(name_copy)));
  FunctionInfo fi;
  if (d == CUPTI_CB_DOMAIN_DRIVER_API && id != CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction && subject != nullptr)
    fi = query_function(subject);
  const DeviceInfo dev = query_device(cb->context);
  std::lock_guard<std::mutex> lock(g->write_mutex);
  emit_device(dev);
  if (!first_failure(key)) return;
  Line l("fail");
  l.str("api", cb->functionName);
  l.str("domain", d == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver");
  l.num("result", result);
  l.unum("key", key);
  if (d == CUPTI_CB_DOMAIN_DRIVER_API && TS.outer.depth > 0 && TS.outer.domain == CUPTI_CB_DOMAIN_RUNTIME_API)
    l.str("inside", TS.outer.name);
  if (name != nullptr) l.str("kernel", name_copy);
  if (owner != nullptr) l.ptr("owner", owner);
  if (d == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (subject != nullptr) add_place(l, "func", subject);
  } else if (fi.function != nullptr) {
    write_function(l, fi);
  }
  l.num("device", dev.ordinal);
  write_line(l);
}

void on_module_loaded(const CUpti_ResourceData* rd) noexcept {
  ThreadState& TS = t_state;
  g->modules.fetch_add(1, std::memory_order_relaxed);
  ++TS.outer.modules;
  if (TS.driver.depth > 0) ++TS.driver.modules;
  const auto* m = static_cast<const CUpti_ModuleResourceData*>(rd->resourceDescriptor);
  if (m == nullptr) return;
  std::lock_guard<std::mutex> lock(g->write_mutex);
  Line l("module");
  l.unum("id", m->moduleId);
  l.unum("size", m->cubinSize);
  unsigned char head[64];
  if (m->pCubin != nullptr && m->cubinSize >= 64 && safe_read(m->pCubin, head, sizeof head) && head[0] == 0x7f &&
      head[1] == 'E') {
    std::uint32_t flags = 0;
    std::memcpy(&flags, head + 0x30, 4);
    l.unum("elf_flags", flags);
    l.num("elf_abi", head[8]);
  }
  if (TS.outer.depth > 0) {
    l.str("during", TS.outer.name);
    if (TS.outer.func != nullptr) {
      // a CUfunction is described by the lazy/fail line of the call; a host function is placed here
      if (TS.outer.domain == CUPTI_CB_DOMAIN_RUNTIME_API) add_place(l, "func", TS.outer.func);
      else l.ptr("function", TS.outer.func);
    }
  }
  if (g->predict && m->pCubin != nullptr) {
    ImageShape s;
    s.kind = "elf";
    s.start = m->pCubin;
    s.size = m->cubinSize;
    copy_image(l, s);
  }
  l.ptr("context", rd->context);
  write_line(l);
}

/// Whether the device of `ctx` was described; claims a slot when not (then the caller describes it).
bool context_new(const void* ctx) noexcept {
  if (ctx == nullptr) return false;
  for (auto& slot : g->contexts) {
    const void* cur = slot.load(std::memory_order_relaxed);
    if (cur == ctx) return false;
    if (cur == nullptr) {
      if (slot.compare_exchange_strong(cur, ctx)) return true;
      if (cur == ctx) return false;
    }
  }
  return false;  // more contexts than slots: the rest are described when something fails
}

void on_api(ThreadState& TS, CUpti_CallbackDomain domain, CUpti_CallbackId id, const CUpti_CallbackData* cb) noexcept {
  const bool driver = domain == CUPTI_CB_DOMAIN_DRIVER_API;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    ThreadCall& slot = (TS.outer.depth == 0) ? TS.outer : TS.driver;
    if (&slot == &TS.driver && !driver) return;  // a runtime call inside a runtime call: not traced
    slot.depth = 1;
    slot.domain = domain;
    slot.cbid = id;
    slot.name = cb->functionName;
    slot.func = subject_of(domain, id, cb->functionParams);
    slot.enter_ns = now_ns();
    slot.modules = 0;
    return;
  }
  // exit
  for (std::size_t i = 0; i < kCallbackCount; ++i)
    if (kCallbacks[i].id == id && kCallbacks[i].domain == domain) {
      g->calls[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  ThreadCall* slot = nullptr;
  if (TS.driver.depth > 0 && driver && TS.driver.cbid == id) slot = &TS.driver;
  else if (TS.outer.depth > 0 && TS.outer.domain == domain && TS.outer.cbid == id) slot = &TS.outer;
  const double ms = slot != nullptr ? static_cast<double>(now_ns() - slot->enter_ns) / 1e6 : 0.0;
  int result = 0;
  if (cb->functionReturnValue != nullptr) {
    if (driver) result = static_cast<int>(*static_cast<const CUresult*>(cb->functionReturnValue));
    else result = static_cast<int>(*static_cast<const cudaError_t*>(cb->functionReturnValue));
  }
  const bool launch = is_launch(domain, id);
  const bool nested_driver = driver && slot == &TS.driver;
  if (launch && !nested_driver) g->launches.fetch_add(1, std::memory_order_relaxed);
  if (launch && nested_driver) g->nested_driver.fetch_add(1, std::memory_order_relaxed);
  if (driver && (id == CUPTI_DRIVER_TRACE_CBID_cuModuleLoad || id == CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData ||
                 id == CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx || id == CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary ||
                 id == CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData || id == CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile)) {
    on_driver_load(id, cb, static_cast<CUresult>(result), ms, slot != nullptr ? slot->modules : 0);
  } else if (result != 0) {
    if (launch && !nested_driver) g->failed_launches.fetch_add(1, std::memory_order_relaxed);
    on_failure(domain, id, cb, result);
  } else if (launch) {
    if (!nested_driver && context_new(cb->context)) {
      const DeviceInfo dev = query_device(cb->context);
      std::lock_guard<std::mutex> lock(g->write_mutex);
      emit_device(dev);
    }
    if (slot != nullptr && slot->modules > 0 && !nested_driver) {
      FunctionInfo fi;
      if (driver && slot->func != nullptr) fi = query_function(slot->func);
      const DeviceInfo dev = query_device(cb->context);
      std::lock_guard<std::mutex> lock(g->write_mutex);
      emit_device(dev);
      Line l("lazy");
      l.num("device", dev.ordinal);
      l.ptr("context", cb->context);
      l.str("api", cb->functionName);
      l.dbl("ms", ms);
      l.unum("modules", slot->modules);
      if (slot->func != nullptr) {
        if (!driver) add_place(l, "func", slot->func);
        else write_function(l, fi);
      }
      write_line(l);
    }
    if (g->predict && slot != nullptr && slot->func != nullptr) {
      const auto key = reinterpret_cast<std::uintptr_t>(slot->func);
      if (!driver) {
        insert_launched(g->launched_host, key);
      } else if (insert_launched(g->launched_fn, key)) {
        // a CUfunction may be gone at exit: describe it at its first launch
        const FunctionInfo fi = query_function(slot->func);
        std::lock_guard<std::mutex> lock(g->write_mutex);
        Line l("launched");
        write_function(l, fi);
        write_line(l);
      }
    }
  }
  if (slot != nullptr) slot->depth = 0;
}

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (g == nullptr || !g->active.load(std::memory_order_acquire) || data == nullptr || g->empty_callback) return;
  ThreadState& ts = t_state;
  if (ts.in_recorder != 0) return;
  ++ts.in_recorder;
  if (g_forked.load(std::memory_order_relaxed)) {  // a forked child: its own file
    std::lock_guard<std::mutex> lock(g->write_mutex);
    if (g_forked.load() && open_event_file()) write_process_line("fork");
    g_forked.store(false);
  }
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    const auto* rd = static_cast<const CUpti_ResourceData*>(data);
    if (id == CUPTI_CBID_RESOURCE_MODULE_LOADED) on_module_loaded(rd);
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API || domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    on_api(ts, domain, id, static_cast<const CUpti_CallbackData*>(data));
  }
  --ts.in_recorder;
}

void write_counts() noexcept {
  std::lock_guard<std::mutex> lock(g->write_mutex);
  for (std::size_t i = 0; i < State::kSeen; ++i) {
    if (g->seen[i].count > 1) {
      Line l("repeat");
      l.unum("key", g->seen[i].key);
      l.unum("count", g->seen[i].count);
      write_line(l);
    }
  }
  if (g->predict) {
    for (std::size_t i = 0; i < State::kLaunched; ++i) {
      const std::uintptr_t f = g->launched_host[i].load(std::memory_order_relaxed);
      if (f == 0) continue;
      Line l("launched");
      add_place(l, "func", reinterpret_cast<const void*>(f));
      write_line(l);
    }
  }
  Line l("counts");
  l.unum("launches", g->launches.load());
  l.unum("failed_launches", g->failed_launches.load());
  l.unum("module_loads", g->module_loads.load());
  l.unum("modules", g->modules.load());
  l.unum("launched_overflow", g->launched_overflow.load());
  l.unum("nested_driver_launches", g->nested_driver.load());
  l.unum("lines_dropped", g->lines_dropped.load());
  l.unum("copied_bytes", g->copied);
  l.key("calls");
  l.raw("{\"_\":0");
  for (std::size_t i = 0; i < kCallbackCount; ++i) {
    const std::uint64_t n = g->calls[i].load(std::memory_order_relaxed);
    if (n == 0) continue;
    char k[48];
    std::snprintf(k, sizeof k, "%s/%u", kCallbacks[i].domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "rt" : "drv",
                  static_cast<unsigned>(kCallbacks[i].id));
    l.unum(k, n);
  }
  l.raw("}");
  write_line(l);
}

void at_exit() { stop(); }

void after_fork_child() {
  // The child inherits the parent's descriptor; its first callback opens its own file.
  g_forked.store(true);
}

template <typename F>
F sym(void* lib, const char* name) noexcept {
  return lib != nullptr ? reinterpret_cast<F>(::dlsym(lib, name)) : nullptr;
}

void fail_why(char* why, std::size_t n, const char* fmt, ...) noexcept {
  if (why == nullptr || n == 0) return;
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(why, n, fmt, ap);
  va_end(ap);
}

void write_recorder_line(const char* status, const char* detail, const char* cupti_path) noexcept {
  Line l("recorder");
  l.str("status", status);
  l.str("detail", detail);
  if (cupti_path != nullptr) l.str("cupti", cupti_path);
  l.num("predict", g->predict ? 1 : 0);
  write_line(l);
}

/// CUPTI: the configured one, then the usual names (LD_LIBRARY_PATH, the loader cache). Sets
/// g->cupti and `loaded_from`; on failure `errors` holds the first loader error.
void load_cupti(const RecorderConfig& config, const char*& loaded_from, char* errors, std::size_t errors_size) noexcept {
  const char* candidates[] = {config.cupti, "libcupti.so.13", "libcupti.so.12", "libcupti.so"};
  const bool named = config.cupti != nullptr && *config.cupti != 0;  // named: that one or none
  for (const char* c : candidates) {
    if (c == nullptr || *c == 0 || (named && c != config.cupti)) continue;
    g->cupti = ::dlopen(c, RTLD_NOW | RTLD_LOCAL);
    if (g->cupti != nullptr) {
      loaded_from = c;
      return;
    }
    const char* e = ::dlerror();
    if (errors[0] == 0 && e != nullptr) std::snprintf(errors, errors_size, "%s", e);
  }
}

/// The file the loaded CUPTI came from (the name it was loaded by when the loader does not say).
void cupti_file(const char* loaded_from, char* cupti_path, std::size_t size) noexcept {
  if (void* any = ::dlsym(g->cupti, "cuptiSubscribe")) {
    Dl_info info{};
    if (::dladdr(any, &info) != 0 && info.dli_fname != nullptr) std::snprintf(cupti_path, size, "%s", info.dli_fname);
  }
  if (cupti_path[0] == 0) std::snprintf(cupti_path, size, "%s", loaded_from);
}

/// The driver's entry points used to describe devices and kernels (never traced themselves).
void resolve_driver() noexcept {
  const char* libcuda_name = std::getenv("ARCHGUARD_RUN_LIBCUDA");
  void* libcuda = ::dlopen(libcuda_name != nullptr && *libcuda_name != 0 ? libcuda_name : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  g->drv.ctx_get_device_v2 = sym<decltype(g->drv.ctx_get_device_v2)>(libcuda, "cuCtxGetDevice_v2");
  g->drv.ctx_get_device = sym<decltype(g->drv.ctx_get_device)>(libcuda, "cuCtxGetDevice");
  g->drv.ctx_get_current = sym<decltype(g->drv.ctx_get_current)>(libcuda, "cuCtxGetCurrent");
  g->drv.device_get_attribute = sym<decltype(g->drv.device_get_attribute)>(libcuda, "cuDeviceGetAttribute");
  g->drv.device_get_name = sym<decltype(g->drv.device_get_name)>(libcuda, "cuDeviceGetName");
  g->drv.func_get_name = sym<decltype(g->drv.func_get_name)>(libcuda, "cuFuncGetName");
  g->drv.func_get_module = sym<decltype(g->drv.func_get_module)>(libcuda, "cuFuncGetModule");
  g->drv.kernel_get_name = sym<decltype(g->drv.kernel_get_name)>(libcuda, "cuKernelGetName");
  g->drv.driver_get_version = sym<decltype(g->drv.driver_get_version)>(libcuda, "cuDriverGetVersion");
}

/// Subscribes `callback` (through cuptiSubscribe_v2 where CUPTI has it, which names the
/// subscriber already there in `old_name`).
CUptiResult subscribe_callback(SubscribeV2Fn subscribe_v2, SubscribeFn subscribe, char* old_name,
                               std::size_t old_name_size) noexcept {
  if (subscribe_v2 == nullptr) return subscribe(&g->subscriber, callback, nullptr);
  CUpti_SubscriberParams params{};
  params.structSize = sizeof params;
  params.subscriberName = "archguard run";
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = old_name_size;
  return subscribe_v2(&g->subscriber, callback, nullptr, &params);
}

void subscribe_failed(CUptiResult r, ResultStringFn result_string, const char* old_name, char* why,
                      std::size_t why_size) noexcept {
  const char* text = nullptr;
  if (result_string != nullptr) result_string(r, &text);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    fail_why(why, why_size, "CUPTI is already used by another tool%s%s%s (only one may subscribe); nothing recorded",
             old_name[0] != 0 ? " ('" : "", old_name, old_name[0] != 0 ? "')" : "");
  else
    fail_why(why, why_size, "cuptiSubscribe failed with %d (%s); nothing recorded", static_cast<int>(r),
             text != nullptr ? text : "unknown");
}

/// Enables the callbacks the configuration wants; returns how many CUPTI accepted.
int enable_callbacks(const RecorderConfig& config, EnableCallbackFn enable, int& wanted) noexcept {
  int enabled = 0;
  for (const Cb& c : kCallbacks) {
    if (is_launch(c.domain, c.id) && !(c.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? config.runtime_launches : config.driver_launches))
      continue;
    ++wanted;
    if (enable(1, g->subscriber, c.domain, c.id) == CUPTI_SUCCESS) ++enabled;
  }
  return enabled;
}

/// The end of a start that fails after CUPTI loaded: `why` in the recorder line.
bool unavailable(const char* why, const char* cupti_path) noexcept {
  write_recorder_line("unavailable", why, cupti_path);
  return false;
}

}  // namespace

const char* event_file() noexcept { return g != nullptr ? g->file : ""; }

bool start(const RecorderConfig& config, char* why, std::size_t why_size) noexcept {
  if (g != nullptr) {
    fail_why(why, why_size, "already recording");
    return g->active.load();
  }
  if (config.dir == nullptr || *config.dir == 0) {
    fail_why(why, why_size, "no directory for the event file");
    return false;
  }
  g = new (g_state_storage) State();
  std::snprintf(g->dir, sizeof g->dir, "%s", config.dir);
  g->predict = config.predict;
  g->max_copy = config.max_copy_bytes;
  g_mem_fd = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  if (!open_event_file()) {
    fail_why(why, why_size, "cannot create the event file %s: %s", g->file, std::strerror(errno));
    return false;
  }
  write_process_line(config.origin);

  const char* loaded_from = nullptr;
  char errors[1024] = {};
  load_cupti(config, loaded_from, errors, sizeof errors);
  if (g->cupti == nullptr) {
    fail_why(why, why_size, "CUPTI could not be loaded (%s); install the CUDA toolkit's CUPTI or the nvidia-cuda-cupti wheel, or name it with --cupti",
             errors[0] != 0 ? errors : "no candidate");
    return unavailable(why, nullptr);
  }
  char cupti_path[4096] = {};
  cupti_file(loaded_from, cupti_path, sizeof cupti_path);
  auto subscribe_v2 = sym<SubscribeV2Fn>(g->cupti, "cuptiSubscribe_v2");
  auto subscribe = sym<SubscribeFn>(g->cupti, "cuptiSubscribe");
  auto enable = sym<EnableCallbackFn>(g->cupti, "cuptiEnableCallback");
  auto result_string = sym<ResultStringFn>(g->cupti, "cuptiGetResultString");
  g->unsubscribe = sym<UnsubscribeFn>(g->cupti, "cuptiUnsubscribe");
  if ((subscribe_v2 == nullptr && subscribe == nullptr) || enable == nullptr) {
    fail_why(why, why_size, "%s lacks cuptiSubscribe or cuptiEnableCallback (too old)", cupti_path);
    return unavailable(why, cupti_path);
  }
  resolve_driver();

  char old_name[256] = {};
  if (CUptiResult r = subscribe_callback(subscribe_v2, subscribe, old_name, sizeof old_name); r != CUPTI_SUCCESS) {
    subscribe_failed(r, result_string, old_name, why, why_size);
    return unavailable(why, cupti_path);
  }

  int wanted = 0;
  g->empty_callback = config.empty_callback;
  const int enabled = enable_callbacks(config, enable, wanted);
  if (enabled == 0) {
    fail_why(why, why_size, "CUPTI accepted the subscription but no callback (%s)", cupti_path);
    write_recorder_line("unavailable", why, cupti_path);
    if (g->unsubscribe != nullptr) g->unsubscribe(g->subscriber);
    return false;
  }
  char detail[256];
  std::snprintf(detail, sizeof detail, "%d of %d callbacks enabled%s%s%s", enabled, wanted,
                config.runtime_launches ? "" : "; runtime launches not watched",
                config.driver_launches ? "" : "; driver launches not watched", config.empty_callback ? "; empty callback (measurement)" : "");
  write_recorder_line("ok", detail, cupti_path);
  g->active.store(true, std::memory_order_release);
  ::pthread_atfork(nullptr, nullptr, after_fork_child);
  std::atexit(at_exit);
  return true;
}

void stop() noexcept {
  if (g == nullptr || g->stopped.exchange(true)) return;
  const bool was_active = g->active.exchange(false);
  if (was_active) write_counts();
  // Unsubscribing at exit can race CUDA's own teardown; the subscription ends with the process.
}

}  // namespace archguard::run::detail
