// SPDX-License-Identifier: Apache-2.0
#include <archguard/bytes.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <iterator>
#include <mutex>

namespace archguard {
namespace {

// The copy that faulted jumps back here. Only the thread that armed it: a SIGBUS elsewhere is
// re-raised with the default action, as if no handler existed.
thread_local sigjmp_buf* volatile t_bus_jump = nullptr;
struct sigaction g_previous_bus {};

/// Guarded mappings (guard_mapping): lock-free slots the handler can read. More slots than
/// ScanOptions::max_mappings allows mappings.
constexpr int kGuardSlots = 20000;
struct GuardSlot {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
  std::atomic<bool> damaged{false};
};
GuardSlot g_slots[kGuardSlots];
std::atomic<int> g_slots_used{0};  ///< the handler scans [0, g_slots_used)

/// Maps zeros over the faulting page when it lies in a guarded mapping; false when it does not.
bool repair(const siginfo_t* info) {
  if (info == nullptr) return false;
  const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
  const int used = g_slots_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    GuardSlot& s = g_slots[i];
    const std::uintptr_t b = s.begin.load(std::memory_order_acquire), e = s.end.load(std::memory_order_acquire);
    if (b == 0 || at < b || at >= e) continue;
    const std::uintptr_t page = page_size();  // read before any mapping was guarded (guard_mapping)
    void* p = reinterpret_cast<void*>(at / page * page);
    if (::mmap(p, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) return false;
    s.damaged.store(true, std::memory_order_release);
    return true;
  }
  return false;
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* j = t_bus_jump; j != nullptr) {
    t_bus_jump = nullptr;
    siglongjmp(*j, 1);
  }
  if (repair(info)) return;  // the faulting read is restarted and finds zeros
  if ((g_previous_bus.sa_flags & SA_SIGINFO) != 0 && g_previous_bus.sa_sigaction != nullptr) {
    g_previous_bus.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous_bus.sa_handler != SIG_DFL && g_previous_bus.sa_handler != SIG_IGN &&
      g_previous_bus.sa_handler != nullptr) {
    g_previous_bus.sa_handler(sig);
    return;
  }
  std::signal(SIGBUS, SIG_DFL);
  std::raise(SIGBUS);
}

void install_bus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous_bus);
  });
}

}  // namespace

int guard_mapping(const void* begin, std::size_t size) {
  if (begin == nullptr || size == 0) return -1;
  (void)page_size();  // read here, not first in the signal handler
  install_bus_handler();
  const auto b = reinterpret_cast<std::uintptr_t>(begin);
  for (int i = 0; i < kGuardSlots; ++i) {
    std::uintptr_t expected = 0;
    if (!g_slots[i].begin.compare_exchange_strong(expected, b, std::memory_order_acq_rel)) continue;
    g_slots[i].damaged.store(false, std::memory_order_relaxed);
    g_slots[i].end.store(b + size, std::memory_order_release);
    int used = g_slots_used.load();
    while (used < i + 1 && !g_slots_used.compare_exchange_weak(used, i + 1)) {
    }
    return i;
  }
  return -1;
}

bool mapping_damaged(int slot) {
  return slot >= 0 && slot < kGuardSlots && g_slots[slot].damaged.load(std::memory_order_acquire);
}

void unguard_mapping(int slot) {
  if (slot < 0 || slot >= kGuardSlots) return;
  g_slots[slot].end.store(0, std::memory_order_release);
  g_slots[slot].begin.store(0, std::memory_order_release);
}

bool copy_guarded(void* dst, const void* src, std::size_t n) {
  if (n == 0) return true;
  install_bus_handler();
  sigjmp_buf jump;
  // Plain memcpy between setjmp and the jump: no object with a destructor lives in this frame.
  if (sigsetjmp(jump, 1) != 0) return false;
  t_bus_jump = &jump;
  std::memcpy(dst, src, n);
  t_bus_jump = nullptr;
  return true;
}

std::size_t page_size() {
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

std::string hex(std::uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

Result<std::string_view> ByteReader::cstring(std::uint64_t offset, std::string_view what,
                                             std::uint64_t limit) const {
  const std::uint64_t end = limit < bytes_.size() ? limit : bytes_.size();
  if (offset >= end) return error_past(offset, 1, what);
  const auto* begin = reinterpret_cast<const char*>(bytes_.data());  // char view of bytes: always valid
  for (std::uint64_t i = offset; i < end; ++i) {
    if (begin[i] == '\0') return std::string_view(begin + offset, static_cast<std::size_t>(i - offset));
  }
  return error_at(offset, what, "string is not terminated before " + hex(base_ + end));
}

Result<std::string_view> StringTable::at(std::uint64_t offset, std::string_view what) {
  const Bytes b = reader_.bytes();
  if (offset >= b.size()) return reader_.error_at(offset, what, "offset runs past the string table end " + hex(reader_.base() + b.size()));
  const auto* chars = reinterpret_cast<const char*>(b.data());  // char view of bytes: always valid
  auto view = [&](std::uint64_t nul) -> Result<std::string_view> {
    if (nul - offset > max_length_)
      return reader_.error_at(offset, what, "name of " + hex(nul - offset) + " bytes is longer than the limit " + hex(max_length_) + " bytes (raise it with ARCHGUARD_MAX_NAME_LENGTH)");
    return std::string_view(chars + offset, static_cast<std::size_t>(nul - offset));
  };
  // A run that holds offset answers at once.
  auto next = runs_.upper_bound(offset);
  if (next != runs_.begin()) {
    auto prev = std::prev(next);
    if (offset <= prev->second) return view(prev->second);
  }
  // Scan forward to a NUL or to the next run (whose NUL is then this string's too), but no
  // further than the length limit allows.
  const std::uint64_t stop_at = next != runs_.end() ? next->first : b.size();
  const std::uint64_t limit_end = max_length_ < b.size() - offset ? offset + max_length_ + 1 : b.size();
  const std::uint64_t end = std::min(stop_at, limit_end);
  const void* hit = std::memchr(chars + offset, 0, static_cast<std::size_t>(end - offset));
  std::uint64_t nul = 0;
  if (hit != nullptr) {
    nul = static_cast<std::uint64_t>(static_cast<const char*>(hit) - chars);
  } else if (end == stop_at && next != runs_.end()) {
    nul = next->second;
    runs_.erase(next);  // merged into the run starting here
  } else if (end == limit_end && limit_end < b.size()) {
    return reader_.error_at(offset, what, "name is longer than the limit " + hex(max_length_) + " bytes (raise it with ARCHGUARD_MAX_NAME_LENGTH)");
  } else {
    return reader_.error_at(offset, what, "string is not terminated before " + hex(reader_.base() + b.size()));
  }
  runs_[offset] = nul;
  return view(nul);
}

Error ByteReader::error_at(std::uint64_t offset, std::string_view what, std::string_view detail) const {
  std::string msg = name_;
  msg += ": ";
  msg += what;
  msg += " at ";
  msg += hex(base_ + offset);
  msg += ": ";
  msg += detail;
  return Error{ErrorKind::corrupt, std::move(msg)};
}

Error ByteReader::error_past(std::uint64_t offset, std::uint64_t length, std::string_view what) const {
  return error_at(offset, what,
                  hex(length) + " bytes run past the end " + hex(base_ + bytes_.size()));
}

}  // namespace archguard
