// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// The shared libraries a program loads, found as the GNU dynamic loader (ld.so) finds them,
/// without running anything: DT_NEEDED entries resolved through DT_RPATH (only when the object
/// has no DT_RUNPATH, and then also the loaders' DT_RPATH up to the executable),
/// LD_LIBRARY_PATH, DT_RUNPATH, /etc/ld.so.cache (its file format is read here; ldconfig is
/// never run) and the default directories, with $ORIGIN, $LIB and $PLATFORM expanded. A
/// candidate file whose ELF class or machine differs from the loading object's is skipped, as
/// ld.so skips it. The walk is transitive, visits each library once (by soname and by real
/// path, so cycles end) and is bounded.
///
/// Reads bytes, never prints. Only ELF64 little-endian objects are followed (what the rest of
/// the library reads).

#include <archguard/bytes.hpp>
#include <archguard/container.hpp>
#include <archguard/elf.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace archguard {

/// What the dynamic section of an object says about loading.
struct DynamicInfo {
  std::vector<std::string> needed;   ///< DT_NEEDED, in order
  std::vector<std::string> rpath;    ///< DT_RPATH split at ':' (unexpanded)
  std::vector<std::string> runpath;  ///< DT_RUNPATH split at ':' (unexpanded)
  bool has_runpath = false;          ///< a DT_RUNPATH entry exists (even empty): DT_RPATH is ignored
  std::string soname;                ///< DT_SONAME, empty when none
  bool nodefaultlib = false;         ///< DF_1_NODEFLIB: neither the cache nor the default dirs
  bool pie = false;                  ///< DF_1_PIE: a position-independent executable (ET_DYN)
};

/// Reads the SHT_DYNAMIC section (empty info for a static or relocatable object).
Result<DynamicInfo> read_dynamic(const ElfFile& elf);

/// One entry of /etc/ld.so.cache.
struct LdCacheEntry {
  std::string name;         ///< the soname, "libc.so.6"
  std::string path;         ///< "/lib/x86_64-linux-gnu/libc.so.6"
  std::uint32_t flags = 0;  ///< FLAG_ELF_LIBC6 | FLAG_X8664_LIB64 ...: says the ELF class/machine
  std::uint64_t hwcap = 0;
};

/// Parses the cache file format of glibc: the "glibc-ld.so.cache1.1" format, alone or after the
/// old "ld.so-1.7.0" one. `name` names the file in messages (offsets in hex).
Result<std::vector<LdCacheEntry>> parse_ld_so_cache(Bytes bytes, const std::string& name);

/// Whether a cache entry's flags say it is for objects of `machine` (an ELF e_machine).
bool ld_cache_entry_matches(const LdCacheEntry& entry, std::uint16_t machine);

/// Expands $ORIGIN, ${ORIGIN}, $LIB, ${LIB}, $PLATFORM, ${PLATFORM} in one search-path element.
/// Unknown tokens are kept as written (ld.so drops such an element; the caller then finds no
/// file there).
std::string expand_dst(std::string_view element, std::string_view origin, std::string_view lib,
                       std::string_view platform);

struct DependencyOptions {
  /// LD_LIBRARY_PATH split at ':' and ';' (empty elements mean the current directory, as in
  /// ld.so). Nullopt: taken from the environment.
  std::optional<std::vector<std::string>> ld_library_path;
  /// The cache file; empty: no cache.
  std::string ld_so_cache = "/etc/ld.so.cache";
  /// The directories searched last. Nullopt: the multiarch directories of the object's machine
  /// (/lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu), then /lib64, /usr/lib64, /lib, /usr/lib.
  std::optional<std::vector<std::string>> default_dirs;
  /// What $LIB expands to; empty: "lib/<multiarch>" when that directory exists, else "lib64".
  std::string lib;
  /// What $PLATFORM expands to; empty: the machine name ("x86_64", "aarch64").
  std::string platform;
  std::size_t max_libraries = 2048;  ///< the walk stops there (and says so)
  unsigned max_depth = 64;
};

/// One library the program loads.
struct Dependency {
  std::string needed;     ///< the DT_NEEDED string, "libfoo.so.1"
  std::string path;       ///< where it was found; empty when not found
  std::string loaded_by;  ///< the object whose DT_NEEDED named it first (the input or a library)
  std::string how;        ///< "runpath", "rpath", "LD_LIBRARY_PATH", "ld.so.cache", "default", "path"
  unsigned depth = 1;     ///< 1: needed by the input itself
};

struct DependencyWalk {
  std::vector<Dependency> libraries;  ///< breadth first, each library once; not-found ones included
  std::vector<std::string> problems;  ///< unreadable dynamic sections, the bound reached
};

/// Walks the libraries `path` (an executable or a shared library) loads. Fails only when `path`
/// itself cannot be read as ELF. The input is not listed.
Result<DependencyWalk> walk_dependencies(const std::string& path, const DependencyOptions& options = {});

/// Whether an ELF object may carry device code: a .nv_fatbin / __nv_relfatbin section, or the
/// fatbin magic anywhere in its allocated read-only data. Cheap (no decoding), so that system
/// libraries (libc, libm, libstdc++) are skipped quickly.
bool may_have_device_code(const ElfFile& elf);

/// Whether a scan report is one ELF executable or shared library named directly (the inputs
/// whose libraries are followed; a directory, archive or wheel is judged file by file).
bool is_program(const ScanReport& report);

/// What following an input's libraries found.
struct LoadedLibraries {
  std::size_t libraries = 0;         ///< libraries found (with or without device code)
  std::size_t files_read = 0;        ///< of those, read here (not judged already)
  std::size_t with_device_code = 0;  ///< objects added to the report
  std::vector<Dependency> missing;   ///< libraries not found (ld.so would refuse to start it)
  std::vector<std::string> notes;    ///< problems of the walk; unreadable libraries
};

/// Walks the libraries `report.input` loads and adds to `report` the objects of those with
/// device code, ObjectFatbins::loaded_by set (the input as written for its own DT_NEEDED).
/// Libraries whose real path is in `seen` are skipped, and each one read is added to it: give
/// the same set for every input so that a library is judged once. Libraries without
/// device-code sections are only mapped, never decoded.
LoadedLibraries add_loaded_libraries(ScanReport& report, std::set<std::string>& seen,
                                     const DependencyOptions& options = {}, const ScanOptions& scan = {});

/// The real path of `path` (symlinks resolved), or `path` when that fails.
std::string real_path_or_self(const std::string& path);

}  // namespace archguard
