// SPDX-License-Identifier: Apache-2.0
// The libraries a program loads, resolved as glibc's ld.so resolves them (elf/dl-load.c:
// _dl_map_object's search order), read from the files alone.
#include <archguard/deps.hpp>

#include <archguard/container.hpp>
#include <archguard/fatbin.hpp>

#include "common/fs.hpp"
#include "common/text.hpp"

#include <elf.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <set>
#include <string_view>
#include <system_error>

namespace archguard {
namespace {

// glibc's sysdeps/generic/ldconfig.h.
constexpr std::uint32_t kFlagTypeMask = 0x00ff;
constexpr std::uint32_t kFlagElfLibc6 = 0x0003;
constexpr std::uint32_t kFlagRequiredMask = 0xff00;
constexpr std::uint32_t kFlagX8664Lib64 = 0x0300;
constexpr std::uint32_t kFlagAarch64Lib64 = 0x0a00;
constexpr std::string_view kCacheOldMagic = "ld.so-1.7.0";
constexpr std::string_view kCacheNewMagic = "glibc-ld.so.cache1.1";
constexpr std::uint64_t kMaxCacheEntries = 1u << 20;

std::vector<std::string> split_path(std::string_view text, std::string_view separators) {
  std::vector<std::string> out;
  for (std::string_view piece : common::split(text, separators)) out.emplace_back(piece);
  return out;
}

/// How a machine's libraries are found: its multiarch triplet and its platform name (both ""
/// for a machine not listed).
struct MachineNames {
  std::uint16_t machine;
  std::string_view triplet;
  std::string_view platform;
};

MachineNames machine_names(std::uint16_t machine) {
  static constexpr MachineNames known[] = {{kElfMachineX86_64, "x86_64-linux-gnu", "x86_64"}, {kElfMachineAarch64, "aarch64-linux-gnu", "aarch64"}};
  for (const MachineNames& m : known)
    if (m.machine == machine) return m;
  return {machine, "", ""};
}

bool is_dir(const std::string& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;  // an empty LD_LIBRARY_PATH element: the current directory
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

/// A loaded object during the walk.
struct Node {
  std::string path;
  std::uint16_t machine = 0;
  DynamicInfo info;
  int parent = -1;  ///< index of the loader (for the DT_RPATH chain), -1 for the input
  unsigned depth = 0;
};

struct Opened {
  std::shared_ptr<const Storage> storage;
  std::optional<ElfFile> elf;
};

/// Opens `path` when it is an ELF64 object of `machine` (ld.so skips other files and goes on).
std::optional<Opened> open_matching(const std::string& path, std::uint16_t machine) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  auto m = map_file(path);
  if (!m) return std::nullopt;
  Bytes b = (*m)->bytes();
  if (!looks_like_elf(b)) return std::nullopt;
  auto elf = ElfFile::parse(b, path);
  if (!elf || elf->machine() != machine) return std::nullopt;
  Opened o;
  o.storage = *m;
  o.elf.emplace(std::move(*elf));
  return o;
}

}  // namespace

Result<DynamicInfo> read_dynamic(const ElfFile& elf) {
  DynamicInfo info;
  const ElfSection* dynamic = nullptr;
  for (const auto& s : elf.sections())
    if (s.type == SHT_DYNAMIC) {
      dynamic = &s;
      break;
    }
  if (dynamic == nullptr || dynamic->type == SHT_NOBITS) return info;
  const ByteReader r(elf.bytes(), elf.name());
  if (dynamic->link >= elf.sections().size())
    return r.error_at(dynamic->offset, "dynamic section", "string table index " + hex(dynamic->link) + " is out of range");
  const ElfSection& strtab = elf.sections()[dynamic->link];
  AG_TRY(auto entries, r.sub(dynamic->offset, dynamic->size, "dynamic section"));
  AG_TRY(auto strs, r.sub(strtab.offset, strtab.size, "dynamic string table"));
  for (std::uint64_t o = 0; dynamic->size - o >= 16; o += 16) {
    AG_TRY(auto tag, entries.u64(o, "dynamic entry"));
    if (tag == DT_NULL) break;
    AG_TRY(auto value, entries.u64(o + 8, "dynamic entry"));
    switch (tag) {
      case DT_NEEDED: {
        AG_TRY(auto s, strs.cstring(value, "DT_NEEDED name"));
        info.needed.emplace_back(s);
        break;
      }
      case DT_SONAME: {
        AG_TRY(auto s, strs.cstring(value, "DT_SONAME"));
        info.soname = std::string(s);
        break;
      }
      case DT_RPATH: {
        AG_TRY(auto s, strs.cstring(value, "DT_RPATH"));
        for (auto& e : split_path(s, ":")) info.rpath.push_back(std::move(e));
        break;
      }
      case DT_RUNPATH: {
        AG_TRY(auto s, strs.cstring(value, "DT_RUNPATH"));
        info.has_runpath = true;
        for (auto& e : split_path(s, ":")) info.runpath.push_back(std::move(e));
        break;
      }
      case DT_FLAGS_1:
        info.nodefaultlib = (value & DF_1_NODEFLIB) != 0;
        info.pie = (value & DF_1_PIE) != 0;
        break;
      default:
        break;
    }
  }
  return info;
}

Result<std::vector<LdCacheEntry>> parse_ld_so_cache(Bytes bytes, const std::string& name) {
  const ByteReader file(bytes, name);
  std::uint64_t base = 0;
  auto starts_with = [&](std::uint64_t at, std::string_view magic) {
    return file.contains(at, magic.size()) &&
           std::memcmp(bytes.data() + at, magic.data(), magic.size()) == 0;
  };
  if (starts_with(0, kCacheOldMagic)) {
    // struct cache_file { char magic[11]; char version[0]? ; uint32 nlibs; file_entry[nlibs] }:
    // magic "ld.so-1.7.0" padded to 12, 12-byte entries; the new format follows, 8-aligned.
    AG_TRY(auto nlibs, file.u32(12, "ld.so cache header"));
    auto end = checked_add(16, std::uint64_t{nlibs} * 12);
    if (!end || *end > file.size())
      return file.error_at(12, "ld.so cache header", "old-format entry count " + hex(nlibs) + " runs past the end " + hex(file.size()));
    base = (*end + 7) & ~std::uint64_t{7};
    if (!starts_with(base, kCacheNewMagic))
      return file.error_at(base, "ld.so cache", "only the old format is present (not read; run a current ldconfig)");
  } else if (!starts_with(0, kCacheNewMagic)) {
    return file.error_at(0, "ld.so cache header", "bad magic (expected \"glibc-ld.so.cache1.1\")");
  }
  // struct cache_file_new: magic[17] version[3] nlibs len_strings flags(u8) pad[3]
  // extension_offset unused[3], then 24-byte entries { int32 flags; u32 key, value; u32
  // osversion; u64 hwcap }; string offsets count from the start of this header.
  AG_TRY(auto nlibs, file.u32(base + 20, "ld.so cache header"));
  if (nlibs > kMaxCacheEntries) return file.error_at(base + 20, "ld.so cache header", "entry count " + hex(nlibs) + " is absurd");
  AG_TRY(auto header, file.sub(base, file.size() - base, "ld.so cache"));
  constexpr std::uint64_t kHeaderSize = 48;
  if (!header.contains(kHeaderSize, std::uint64_t{nlibs} * 24))
    return file.error_at(base + 20, "ld.so cache header", hex(nlibs) + " entries of 0x18 bytes run past the end " + hex(file.size()));
  std::vector<LdCacheEntry> out;
  out.reserve(nlibs);
  for (std::uint64_t i = 0; i < nlibs; ++i) {
    const std::uint64_t e = kHeaderSize + i * 24;
    AG_TRY(auto flags, header.u32(e, "ld.so cache entry"));
    AG_TRY(auto key, header.u32(e + 4, "ld.so cache entry"));
    AG_TRY(auto value, header.u32(e + 8, "ld.so cache entry"));
    AG_TRY(auto hwcap, header.u64(e + 16, "ld.so cache entry"));
    AG_TRY(auto k, header.cstring(key, "ld.so cache name"));
    AG_TRY(auto v, header.cstring(value, "ld.so cache path"));
    out.push_back(LdCacheEntry{std::string(k), std::string(v), flags, hwcap});
  }
  return out;
}

bool ld_cache_entry_matches(const LdCacheEntry& entry, std::uint16_t machine) {
  if ((entry.flags & kFlagTypeMask) != kFlagElfLibc6) return false;
  const std::uint32_t required = entry.flags & kFlagRequiredMask;
  switch (machine) {
    case kElfMachineX86_64:
      return required == kFlagX8664Lib64;
    case kElfMachineAarch64:
      return required == kFlagAarch64Lib64;
    default:
      return false;
  }
}

std::string expand_dst(std::string_view element, std::string_view origin, std::string_view lib,
                       std::string_view platform) {
  std::string out;
  for (std::size_t i = 0; i < element.size();) {
    if (element[i] != '$') {
      out += element[i++];
      continue;
    }
    std::string_view rest = element.substr(i + 1);
    struct Token {
      std::string_view name, value;
    };
    const Token tokens[] = {{"ORIGIN", origin}, {"LIB", lib}, {"PLATFORM", platform}};
    bool done = false;
    for (const Token& t : tokens) {
      const bool braced = rest.size() >= t.name.size() + 2 && rest[0] == '{' &&
                          rest.substr(1, t.name.size()) == t.name && rest[t.name.size() + 1] == '}';
      // Unbraced, the name must end there: "$ORIGINAL" is not $ORIGIN (ld.so's is_dst).
      const bool bare = rest.substr(0, t.name.size()) == t.name &&
                        (rest.size() == t.name.size() || !(std::isalnum(static_cast<unsigned char>(rest[t.name.size()])) || rest[t.name.size()] == '_'));
      if (braced || bare) {
        out += t.value;
        i += 1 + t.name.size() + (braced ? 2 : 0);
        done = true;
        break;
      }
    }
    if (!done) out += element[i++];
  }
  return out;
}

bool may_have_device_code(const ElfFile& elf) {
  if (elf.find(".nv_fatbin") != nullptr || elf.find("__nv_relfatbin") != nullptr) return true;
  // Fatbins kept as data (cuFFT's .ldata, others' .rodata): look for the magic, 8-aligned as a
  // fatbin header is, in allocated read-only, non-executable sections.
  static constexpr unsigned char kMagic[4] = {0x50, 0xed, 0x55, 0xba};
  const Bytes all = elf.bytes();
  // The sections' byte ranges merged first: headers that name the same bytes many times (a
  // crafted file) have them searched once.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& s : elf.sections()) {
    if ((s.flags & SHF_ALLOC) == 0 || (s.flags & (SHF_WRITE | SHF_EXECINSTR)) != 0 || s.type == SHT_NOBITS) continue;
    auto end = checked_add(s.offset, s.size);
    if (!end || *end > all.size()) continue;
    ranges.emplace_back(s.offset, *end);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
    else merged.push_back(r);
  }
  for (const auto& [from, to] : merged) {
    const auto* p = reinterpret_cast<const unsigned char*>(all.data()) + from;  // bounds checked above
    const unsigned char* const stop = reinterpret_cast<const unsigned char*>(all.data()) + to;
    while (p < stop) {
      const void* hit = std::memchr(p, kMagic[0], static_cast<std::size_t>(stop - p));
      if (hit == nullptr) break;
      const auto* h = static_cast<const unsigned char*>(hit);
      const auto at = static_cast<std::uint64_t>(h - reinterpret_cast<const unsigned char*>(all.data()));
      if (at % 8 == 0 && stop - h >= 4 && std::memcmp(h, kMagic, 4) == 0) return true;
      p = h + 1;
    }
  }
  return false;
}

namespace {

/// The input, as the first node of the walk.
Result<Node> root_node(const std::string& path, const ElfFile& root_elf) {
  AG_TRY(auto info, read_dynamic(root_elf));
  Node n;
  // $ORIGIN of the executable is where the kernel found it, symlinks resolved (ld.so reads
  // /proc/self/exe); a library's is the directory of the path it was found under.
  std::error_code ec;
  const auto canon = std::filesystem::weakly_canonical(path, ec);
  const bool executable = root_elf.type() == kElfTypeExec || info.pie;
  n.path = ec || !executable ? path : canon.string();
  n.machine = root_elf.machine();
  n.info = std::move(info);
  return n;
}

/// What ld.so searches after the DT_RPATH chain, the same for every object of the walk: read
/// once, so that a damaged ld.so.cache is reported once.
struct SearchPath {
  std::uint16_t machine = 0;          ///< candidates of another machine are skipped
  std::vector<std::string> env;       ///< LD_LIBRARY_PATH
  std::vector<LdCacheEntry> cache;    ///< ld.so.cache
  std::vector<std::string> defaults;  ///< the directories searched last
  std::string lib, platform;          ///< what $LIB and $PLATFORM expand to
};

SearchPath make_search_path(const DependencyOptions& options, std::uint16_t machine,
                            std::vector<std::string>& problems) {
  SearchPath s;
  s.machine = machine;
  if (options.ld_library_path) {
    s.env = *options.ld_library_path;
  } else if (const char* e = std::getenv("LD_LIBRARY_PATH"); e != nullptr && *e != '\0') {
    s.env = split_path(e, ":;");
  }
  if (!options.ld_so_cache.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(options.ld_so_cache, ec)) {
      auto m = map_file(options.ld_so_cache);
      if (m) {
        auto c = parse_ld_so_cache((*m)->bytes(), options.ld_so_cache);
        if (c) s.cache = std::move(*c);
        else problems.push_back(c.message());
      } else {
        problems.push_back(m.message());
      }
    }
  }
  const MachineNames names = machine_names(machine);
  const std::string triplet(names.triplet);
  if (options.default_dirs) {
    s.defaults = *options.default_dirs;
  } else {
    if (!triplet.empty()) s.defaults = {"/lib/" + triplet, "/usr/lib/" + triplet};
    for (const char* d : {"/lib64", "/usr/lib64", "/lib", "/usr/lib"}) s.defaults.emplace_back(d);
  }
  s.lib = options.lib;
  if (s.lib.empty()) s.lib = !triplet.empty() && is_dir("/lib/" + triplet) ? "lib/" + triplet : "lib64";
  s.platform = options.platform.empty() ? std::string(names.platform) : options.platform;
  return s;
}

/// A DT_NEEDED name resolved: the file (kept open), the path it was found under, and how.
struct Found {
  Opened opened;
  std::string path, how;
};

/// Resolves `needed` for nodes[idx] in ld.so's order; the first match wins.
std::optional<Found> find_needed(const std::string& needed, const std::vector<Node>& nodes, std::size_t idx,
                                 const SearchPath& search) {
  const Node& node = nodes[idx];
  const std::string origin = common::dir_of(node.path);
  std::optional<Found> found;
  auto try_path = [&](const std::string& candidate, std::string_view why) {
    if (found) return;
    if (auto o = open_matching(candidate, search.machine)) found = Found{std::move(*o), candidate, std::string(why)};
  };
  auto try_dir = [&](const std::string& dir, std::string_view why) {
    if (!found) try_path(join(dir, needed), why);
  };
  if (needed.find('/') != std::string::npos) {
    // A name with a slash is a path (relative to the current directory, as for ld.so).
    try_path(needed, "path");
    return found;
  }
  if (!node.info.has_runpath) {
    // DT_RPATH of the object, then of each loader up to the executable (glibc stops
    // using a loader's DT_RPATH only when that loader has DT_RUNPATH).
    for (int at = static_cast<int>(idx); at >= 0 && !found; at = nodes[static_cast<std::size_t>(at)].parent) {
      const Node& l = nodes[static_cast<std::size_t>(at)];
      if (l.info.has_runpath) continue;
      for (const auto& e : l.info.rpath) try_dir(expand_dst(e, common::dir_of(l.path), search.lib, search.platform), "rpath");
    }
  }
  for (const auto& e : search.env) try_dir(expand_dst(e, origin, search.lib, search.platform), "LD_LIBRARY_PATH");
  for (const auto& e : node.info.runpath) try_dir(expand_dst(e, origin, search.lib, search.platform), "runpath");
  if (!node.info.nodefaultlib) {
    for (const auto& c : search.cache) {
      if (found) break;
      if (c.name != needed || !ld_cache_entry_matches(c, search.machine)) continue;
      try_path(c.path, "ld.so.cache");
    }
    for (const auto& d : search.defaults) try_dir(d, "default");
  }
  return found;
}

}  // namespace

Result<DependencyWalk> walk_dependencies(const std::string& path, const DependencyOptions& options) {
  AG_TRY(auto root_map, map_file(path));
  AG_TRY(auto root_elf, ElfFile::parse(root_map->bytes(), path));
  const std::uint16_t machine = root_elf.machine();

  DependencyWalk walk;
  std::vector<Node> nodes;
  {
    AG_TRY(auto root, root_node(path, root_elf));
    nodes.push_back(std::move(root));
  }
  const SearchPath search = make_search_path(options, machine, walk.problems);

  std::set<std::string> seen_paths;  // real paths already loaded
  std::set<std::string> seen_names;  // DT_NEEDED strings and sonames already satisfied
  {
    std::error_code ec;
    seen_paths.insert(std::filesystem::weakly_canonical(path, ec).string());
    if (!nodes[0].info.soname.empty()) seen_names.insert(nodes[0].info.soname);
  }
  std::set<std::string> reported_missing;
  std::deque<std::size_t> queue{0};
  bool bounded = false;
  while (!queue.empty() && !bounded) {
    const std::size_t idx = queue.front();
    queue.pop_front();
    const Node node = nodes[idx];  // copy: nodes grows below
    if (node.depth >= options.max_depth) {
      walk.problems.push_back(node.path + ": dependencies deeper than " + std::to_string(options.max_depth) + " levels are not followed");
      continue;
    }
    for (const std::string& needed : node.info.needed) {
      if (seen_names.count(needed) != 0) continue;
      std::optional<Found> found = find_needed(needed, nodes, idx, search);
      seen_names.insert(needed);
      if (!found) {
        if (reported_missing.insert(needed).second)
          walk.libraries.push_back(Dependency{needed, "", node.path, "", node.depth + 1});
        continue;
      }
      std::error_code ec;
      const std::string real = std::filesystem::weakly_canonical(found->path, ec).string();
      auto dyn = read_dynamic(*found->opened.elf);
      if (!dyn) {
        walk.problems.push_back(dyn.message());
        dyn = DynamicInfo{};
      }
      if (!dyn->soname.empty()) seen_names.insert(dyn->soname);
      if (!seen_paths.insert(ec ? found->path : real).second) continue;  // the same file under another name
      walk.libraries.push_back(Dependency{needed, found->path, node.path, found->how, node.depth + 1});
      if (walk.libraries.size() >= options.max_libraries) {
        walk.problems.push_back(path + ": more than " + std::to_string(options.max_libraries) +
                                " libraries; the rest are not followed");
        bounded = true;
        break;
      }
      Node n;
      n.path = found->path;
      n.machine = machine;
      n.info = std::move(*dyn);
      n.parent = static_cast<int>(idx);
      n.depth = node.depth + 1;
      nodes.push_back(std::move(n));
      queue.push_back(nodes.size() - 1);
    }
  }
  return walk;
}

std::string real_path_or_self(const std::string& path) {
  std::error_code ec;
  auto c = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : c.string();
}

bool is_program(const ScanReport& r) {
  // A Windows binary loads DLLs through its import table, not DT_NEEDED: not followed here.
  return !r.directory && r.objects.size() == 1 && r.objects[0].archive.empty() && !r.objects[0].pe &&
         (r.objects[0].elf_type == kElfTypeExec || r.objects[0].elf_type == kElfTypeDyn);
}

LoadedLibraries add_loaded_libraries(ScanReport& report, std::set<std::string>& seen,
                                     const DependencyOptions& options, const ScanOptions& scan) {
  LoadedLibraries out;
  auto walk = walk_dependencies(report.input, options);
  if (!walk) {
    out.notes.push_back("libraries not followed: " + walk.message());
    return out;
  }
  for (auto& p : walk->problems) out.notes.push_back(std::move(p));
  for (Dependency& d : walk->libraries) {
    if (d.depth == 1) d.loaded_by = report.input;  // the input as the user wrote it
    if (d.path.empty()) {
      out.missing.push_back(d);
      continue;
    }
    ++out.libraries;
    if (!seen.insert(real_path_or_self(d.path)).second) continue;  // an input, or judged already
    ++out.files_read;
    auto m = map_file(d.path);
    if (!m) {
      out.notes.push_back(m.message());
      continue;
    }
    auto elf = ElfFile::parse((*m)->bytes(), d.path, scan.limits.max_name_length);
    if (!elf || !may_have_device_code(*elf)) continue;  // libc and friends: nothing decoded
    auto s = scan_bytes((*m)->bytes(), d.path, scan);
    if (!s) {
      out.notes.push_back(s.message());
      continue;
    }
    for (auto& e : s->errors) out.notes.push_back(std::move(e));
    bool added = false;
    for (auto& o : s->objects) {
      if (o.fatbins.empty()) continue;
      o.loaded_by = d.loaded_by;
      report.objects.push_back(std::move(o));
      ++out.with_device_code;
      added = true;
    }
    if (added) {
      report.storage.push_back(*m);
      for (auto& st : s->storage) report.storage.push_back(std::move(st));
    }
  }
  return out;
}

}  // namespace archguard
