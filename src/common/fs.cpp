// SPDX-License-Identifier: Apache-2.0
#include "common/fs.hpp"

#include "common/fd.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace archguard::common {

std::string errno_text(int err) { return std::strerror(err); }

std::string octal_mode(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

Status make_dirs(const std::string& path, mode_t mode) {
  std::size_t pos = 0;
  while (pos <= path.size()) {
    const std::size_t next = path.find('/', pos);
    const std::string cur = path.substr(0, next == std::string::npos ? path.size() : next);
    if (!cur.empty() && ::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) {
      const int e = errno;
      return errno_error("mkdir " + cur + " failed: " + errno_text(e), e);
    }
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return Ok{};
}

Status write_all(int fd, std::span<const std::byte> bytes, const std::string& what) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      return errno_error(what + ": write failed: " + errno_text(e), e);
    }
    done += static_cast<std::size_t>(n);
  }
  return Ok{};
}

Result<std::vector<std::byte>> read_all(int fd, std::size_t size, const std::string& what) {
  std::vector<std::byte> buf(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, buf.data() + done, size - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      return errno_error(what + ": read failed: " + errno_text(e), e);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  buf.resize(done);
  return buf;
}

Result<std::string> read_file(const std::string& path, bool regular_only) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    const int e = errno;
    return errno_error(path + ": cannot open: " + errno_text(e), e);
  }
  if (regular_only) {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return make_error(ErrorKind::unsupported, path + ": not a regular file");
  }
  std::string data;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      return errno_error(path + ": read failed: " + errno_text(e), e);
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  return data;
}

std::vector<std::string> list_dir(int dirfd) {
  std::vector<std::string> names;
  // fdopendir takes the descriptor over: give it a duplicate so that the caller's stays open.
  UniqueFd dup(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
  if (!dup.valid()) return names;
  DIR* d = ::fdopendir(dup.get());
  if (d == nullptr) return names;
  dup.release();   // owned by d now
  ::rewinddir(d);  // the duplicate shares the original's position
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  return names;
}

std::string dir_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace archguard::common
