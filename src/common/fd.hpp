// SPDX-License-Identifier: Apache-2.0
#pragma once
// An owned POSIX file descriptor: closed exactly once, when the owner goes away, unless it is
// released. Internal to the library (src/common).
#include <unistd.h>

#include <cerrno>

namespace archguard::common {

class UniqueFd {
 public:
  UniqueFd() = default;
  /// Takes ownership of `fd`; a negative value means "none" (a failed open()).
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Gives the descriptor up without closing it.
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  /// Closes the owned descriptor (its error is ignored: use close() where it matters) and owns `fd`.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  /// Closes now and reports: 0, or the errno of close() (a written file's last chance to say
  /// that its data did not reach the disk). Owns nothing afterwards.
  int close() {
    if (fd_ < 0) return 0;
    const int rc = ::close(release());
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_ = -1;
};

}  // namespace archguard::common
