// SPDX-License-Identifier: Apache-2.0
#include <archguard/bytes.hpp>

#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <mutex>

namespace archguard {
namespace {

// The copy that faulted jumps back here. Only the thread that armed it: a SIGBUS elsewhere is
// re-raised with the default action, as if no handler existed.
thread_local sigjmp_buf* volatile t_bus_jump = nullptr;
struct sigaction g_previous_bus {};

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* j = t_bus_jump; j != nullptr) {
    t_bus_jump = nullptr;
    siglongjmp(*j, 1);
  }
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
