// SPDX-License-Identifier: Apache-2.0
#pragma once
// Small POSIX file helpers shared by the layers: whole reads and writes that retry on EINTR,
// mkdir -p, directory listings. Internal to the library (src/common). Messages follow the
// library's rule (lower case, the path first); callers that add context put it in `what`.
#include <archguard/result.hpp>

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace archguard::common {

/// strerror(err) as a string.
std::string errno_text(int err);

/// A file mode's permission bits as four octal digits: "0755".
std::string octal_mode(mode_t mode);

/// mkdir -p: creates `path` and its missing parents with `mode`; existing ones are left as they
/// are. The error names the component that could not be made ("mkdir <component> failed: ...")
/// and carries its errno.
Status make_dirs(const std::string& path, mode_t mode);

/// Writes every byte to `fd`. Error: "<what>: write failed: <errno text>", with the errno.
Status write_all(int fd, std::span<const std::byte> bytes, const std::string& what);

/// Reads up to `size` bytes from offset 0 of `fd` (pread: the file offset is left alone);
/// fewer when the file is shorter. Error: "<what>: read failed: <errno text>", with the errno.
Result<std::vector<std::byte>> read_all(int fd, std::size_t size, const std::string& what);

/// The whole content of the file at `path`, read to its end (a pipe or /dev/stdin too, unless
/// `regular_only`). Errors: "<path>: cannot open: ...", "<path>: read failed: ..." (with the
/// errno), "<path>: not a regular file".
Result<std::string> read_file(const std::string& path, bool regular_only = false);

/// The directory part of `path` as dirname(1) gives it for a path without a trailing slash:
/// "." for a bare name, "/" for "/name", else everything before the last '/'.
std::string dir_of(const std::string& path);

/// The names in an open directory, without "." and ".."; empty when it cannot be read. The
/// descriptor stays open and usable.
std::vector<std::string> list_dir(int dirfd);

}  // namespace archguard::common
