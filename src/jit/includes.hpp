// SPDX-License-Identifier: Apache-2.0
#pragma once
// The include tree of a compilation, found without compiling: NVRTC 13 cannot report the
// headers it opened (no -M/-MD, no dependency query), so the cache key is built from a scan of
// the sources. The scan over-approximates: it ignores #if (every branch counts but that of a
// literal `#if 0`), follows every
// candidate location of a header (the including file's directory, the main source's directory,
// each -I directory, the provided header strings) and records names that resolve nowhere, so a
// header appearing later changes the key too. A computed #include (#include MACRO) is resolved
// through the `#define MACRO "file"` / `<file>` definitions seen in the scanned files; one that
// still cannot be resolved makes the compilation uncacheable (the note says where).

#include <archguard/cache.hpp>
#include <archguard/jit.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace archguard::jit::detail {

struct IncludeDep {
  std::string spelling;  ///< as written: "h.h" or <h.h>
  std::string location;  ///< file path, "provided:<name>" or "" when it resolved nowhere
  std::string digest;    ///< hex SHA-256 of the content, "" when unresolved
  friend bool operator==(const IncludeDep&, const IncludeDep&) = default;
  friend auto operator<=>(const IncludeDep&, const IncludeDep&) = default;
};

struct IncludeScan {
  std::vector<IncludeDep> deps;  ///< sorted, unique
  bool complete = true;
  std::string note;  ///< why not complete
  /// Steps taken: directives and definitions met, definitions tried for a computed include.
  /// Linear in the size of what was scanned (tests bound it; no test times the scan).
  std::uint64_t work = 0;
};

/// Headers larger than this are not read for the key (64 MiB): a 3 GB sparse file named in an
/// `#include` was read whole and aborted the compile. The key of such a source is incomplete:
/// the result is compiled, not cached. CacheOptions::max_header_bytes (ARCHGUARD_CACHE_MAX_HEADER).
inline constexpr std::uint64_t kMaxHeaderBytes = std::uint64_t{64} << 20;

/// -I / --include-path directories and -include / --pre-include headers found in NVRTC options.
struct IncludeOptions {
  std::vector<std::string> dirs;
  std::vector<std::string> pre_includes;
};
IncludeOptions parse_include_options(const std::vector<std::string>& options);

/// Files are memoised per process and re-read unless stat shows them unchanged and their ctime
/// lies more than `window` (default 2 s) before the moment they were read. Tests shrink it.
void set_memo_racy_window(std::chrono::nanoseconds window);

/// Scans the request's source and everything it can reach; what `#if 0` holds is not followed.
IncludeScan scan_includes(const CompileRequest& request, std::uint64_t max_header_bytes = kMaxHeaderBytes);

}  // namespace archguard::jit::detail
