// SPDX-License-Identifier: Apache-2.0
// archguard inspect FILE...: the images of every fatbin, a coverage summary, optionally the
// kernels; --list-like-cuobjdump prints cuobjdump --list-elf / --list-ptx lines.
#include "cli.hpp"
#include "verb_inputs.hpp"

#include <archguard/container.hpp>
#include <archguard/coverage.hpp>

#include <unistd.h>

#include <algorithm>
#include <unordered_map>
#include <mutex>
#include <condition_variable>
#include <charconv>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>

namespace archguard::cli {
namespace {

struct InspectOptions {
  std::vector<std::string> files;
  ReadLimits limits;
  bool json = false;
  bool kernels = false;
  bool cuobjdump = false;
  bool all_fatbins = false;
  bool summary = false;
  bool no_cache = false;
  unsigned threads = 0;
};

struct KernelList {
  std::vector<Kernel> kernels;
  std::string error;
};

/// An object's kernel lists, decoded on a few threads (decompression dominates for large files)
/// a bounded stretch ahead of the printer, which asks for them entry by entry in file order and
/// lets each go when it asks for a later one. Holding the whole object's lists (46,000 kernel
/// names of up to several KB, mangled and demangled) made one libcusparse peak at 105 MiB; an
/// earlier version held every object's lists (4.3 GB for a directory of 100). Unlike windows
/// of fatbins decoded in turn (tried: 1.13x the time), the threads never wait for a window's
/// largest image.
class ObjectKernels {
 public:
  ObjectKernels(const ObjectFatbins& object, const PayloadPages& pages, unsigned threads, const ScanOptions& scan)
      : object_(object), pages_(pages), scan_(scan) {
    for (const auto& fb : object.fatbins)
      for (const auto& e : fb.entries) {
        index_.emplace(&e, work_.size());
        work_.push_back(&e);
      }
    results_.resize(work_.size());
    ready_.assign(work_.size(), false);
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    threads = std::min(threads, std::max(1u, scan.max_threads));
    // 16 MiB of images per thread: with 8, 16 threads waited for the printer (libcublasLt on
    // an H100 host: 0.28-0.33 s against 0.25-0.28 s, at 136-144 MB against 138-147 MB).
    ahead_most_ = std::max<std::uint64_t>(kAheadBytes, std::uint64_t{threads} * (std::uint64_t{16} << 20));
    for (unsigned t = 0; t < threads && t < work_.size(); ++t) pool_.emplace_back([this] { produce(); });
  }
  ObjectKernels(const ObjectKernels&) = delete;
  ObjectKernels& operator=(const ObjectKernels&) = delete;
  ~ObjectKernels() {
    {
      const std::lock_guard lock(m_);
      stop_ = true;
    }
    more_.notify_all();
    for (auto& t : pool_) t.join();
    // And the pages between the payloads (entry headers, each payload's first and last page):
    // a directory of 100 libraries kept 8 MB of each resident to the end.
    pages_.release(object_);
  }

  /// Whether the kernels of `e` are decoded already (find waits for nothing then).
  bool ready(const FatbinEntry* e) {
    const auto it = index_.find(e);
    const std::lock_guard lock(m_);
    return it != index_.end() && ready_[it->second];
  }
  /// The kernels of `e`, an entry of the object (null when it is none of its); the lists of the
  /// entries before it are dropped.
  const KernelList* find(const FatbinEntry* e) {
    const auto it = index_.find(e);
    if (it == index_.end()) return nullptr;
    const std::size_t i = it->second;
    std::unique_lock lock(m_);
    if (i < consumed_) {  // asked again after a later one (the printers do not): decoded anew
      lock.unlock();
      results_[i] = decode(i);
      return &results_[i];
    }
    for (std::size_t k = consumed_; k < i; ++k) {
      if (k < next_) ahead_ -= work_[k]->image_size();
      results_[k] = KernelList{};
    }
    consumed_ = i;
    next_ = std::max(next_, i);
    more_.notify_all();
    done_.wait(lock, [&] { return ready_[i]; });
    lock.unlock();
    release_behind(*work_[i]);
    return &results_[i];
  }

 private:
  static constexpr std::uint64_t kAheadBytes = std::uint64_t{64} << 20;
  static constexpr std::size_t kTrailStep = std::size_t{1} << 20;

  KernelList decode(std::size_t i) const {
    KernelList out;
    const FatbinEntry& e = *work_[i];
    if (e.kind == CodeKind::ltoir) return out;  // LTO-IR is not decoded
    // Decoded under the library's bound on the bytes decoded at once (DecodeBudget). A payload's
    // pages leave this process once decoded: the peak is the decoded images', not the whole
    // file's (libcublasLt: 220 MB of resident payload pages before). A small payload's go with
    // its neighbours' once the printer has passed them (release_behind).
    const bool alone = payload_released_alone(e);
    auto k = decode_kernels(e, object_.path, scan_.limits, alone ? PayloadRelease([this](Bytes read) { pages_.release(read); }) : PayloadRelease{});
    if (k) out.kernels = std::move(*k);
    else out.error = k.message();
    if (alone) pages_.release(e.payload);
    return out;
  }

  /// On the printer's thread, at entry `e`: releases the pages of the payloads before it in
  /// runs of kTrailStep or more (cuFFT's 24,000 payloads of a few KB were a release each). Entries
  /// are in file order; where that order turns back (fatbins found out of order, another archive
  /// member) a new run starts, and what the runs missed goes at the object's end.
  void release_behind(const FatbinEntry& e) {
    const std::uintptr_t page = page_size();
    const std::byte* below = e.payload.data() - reinterpret_cast<std::uintptr_t>(e.payload.data()) % page;
    if (trail_ == nullptr || below < trail_) {
      trail_ = below;
      return;
    }
    if (static_cast<std::size_t>(below - trail_) < kTrailStep) return;
    pages_.release(Bytes(trail_, static_cast<std::size_t>(below - trail_)));
    trail_ = below;
  }
  /// A decoding thread: takes the next entry while the images taken and not yet printed stay
  /// within ahead_most_ (the first one not printed is always taken).
  void produce() {
    std::unique_lock lock(m_);
    for (;;) {
      more_.wait(lock, [&] {
        return stop_ || next_ >= work_.size() || next_ == consumed_ || ahead_ + work_[next_]->image_size() <= ahead_most_;
      });
      if (stop_ || next_ >= work_.size()) return;
      const std::size_t i = next_++;
      ahead_ += work_[i]->image_size();
      lock.unlock();
      KernelList list = decode(i);
      lock.lock();
      if (i >= consumed_) {
        results_[i] = std::move(list);
        ready_[i] = true;
      }
      done_.notify_all();
    }
  }

  const ObjectFatbins& object_;
  const PayloadPages& pages_;
  const ScanOptions& scan_;
  std::vector<const FatbinEntry*> work_;  ///< every entry, in file order
  std::unordered_map<const FatbinEntry*, std::size_t> index_;
  std::vector<KernelList> results_;
  std::vector<bool> ready_;  ///< under m_
  std::mutex m_;
  std::condition_variable more_, done_;
  std::size_t next_ = 0;      ///< the next entry to take
  std::size_t consumed_ = 0;  ///< the entry the printer is at
  std::uint64_t ahead_ = 0;   ///< image bytes of the entries taken from consumed_ on
  std::uint64_t ahead_most_ = kAheadBytes;
  const std::byte* trail_ = nullptr;  ///< the printer's: payload pages below it are released
  bool stop_ = false;
  std::vector<std::thread> pool_;
};

/// What inspect --kernels needs to list an object's kernels when its turn comes.
struct KernelSource {
  PayloadPages pages;
  unsigned threads;
  const ScanOptions& scan;
  std::unique_ptr<ObjectKernels> of(const ObjectFatbins& object) const {
    return std::make_unique<ObjectKernels>(object, pages, threads, scan);
  }
};

std::string elf_type_text(std::uint16_t t) {
  static constexpr common::Named<std::uint16_t> names[] = {{kElfTypeRel, "relocatable"}, {kElfTypeExec, "executable"}, {kElfTypeDyn, "shared"}};
  const std::string_view name = common::name_in(names, t, "");
  return name.empty() ? "type " + std::to_string(t) : std::string(name);
}

std::string machine_text(std::uint16_t m) {
  static constexpr common::Named<std::uint16_t> names[] = {{kElfMachineX86_64, "x86-64"}, {kElfMachineAarch64, "aarch64"}, {kElfMachineCuda, "cuda"}};
  const std::string_view name = common::name_in(names, m, "");
  return name.empty() ? "machine " + std::to_string(m) : std::string(name);
}

std::string entry_arch(const FatbinEntry& e) {
  return nvcc_name(e.arch, e.kind == CodeKind::ltoir ? CodeKind::ptx : e.kind);
}

std::string flags_text(const FatbinEntry& e) {
  std::string s;
  auto add = [&s](std::string_view w) {
    if (!s.empty()) s += ',';
    s += w;
  };
  if (e.debug) add("debug");
  if ((e.flags & kEntryFlagCompatExtension) != 0) add("compat");
  if ((e.flags & kEntryFlag64Bit) == 0) add("32-bit");
  return s.empty() ? "-" : s;
}

/// Where a fatbin was found, as the table shows it: ".nv_fatbin", ".ldata (embedded)",
/// "standalone cubin", "fatbin file".
std::string where_text(const Fatbin& fb) {
  switch (fb.section) {
    case FatbinSection::embedded:
      return fb.section_name + " (embedded)";
    case FatbinSection::standalone: {
      const CodeKind k = fb.entries.empty() ? CodeKind::sass : fb.entries.front().kind;
      return k == CodeKind::sass ? "standalone cubin" : k == CodeKind::ptx ? "standalone ptx"
                                                                           : "standalone lto-ir";
    }
    case FatbinSection::memory:
      return fb.section_name.empty() ? "fatbin file" : fb.section_name;
    case FatbinSection::nv_fatbin:
    case FatbinSection::nv_relfatbin:
      break;
  }
  return fb.section_name.empty() ? std::string(to_string(fb.section)) : fb.section_name;
}

/// An object's fatbins counted by where they were found, the embedded ones also by section.
struct FatbinCounts {
  std::map<FatbinSection, std::size_t> by_place;
  std::map<std::string, std::size_t> embedded_by_section;
  std::size_t operator[](FatbinSection place) const {
    const auto it = by_place.find(place);
    return it == by_place.end() ? 0 : it->second;
  }
};

FatbinCounts count_fatbins(const ObjectFatbins& o) {
  FatbinCounts c;
  for (const auto& fb : o.fatbins) {
    ++c.by_place[fb.section];
    if (fb.section == FatbinSection::embedded) ++c.embedded_by_section[fb.section_name];
  }
  return c;
}

/// "  fatbins: 1 in .nv_fatbin, 23983 embedded (.ldata 23983)"
std::string counts_line(const FatbinCounts& c) {
  std::string s;
  auto add = [&s](std::size_t n, const std::string& what) {
    if (n == 0) return;
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  add(c[FatbinSection::nv_fatbin], "in .nv_fatbin");
  add(c[FatbinSection::nv_relfatbin], "in __nv_relfatbin");
  if (c[FatbinSection::embedded] != 0) {
    std::string by;
    for (const auto& [name, n] : c.embedded_by_section) by += (by.empty() ? "" : ", ") + name + " " + std::to_string(n);
    add(c[FatbinSection::embedded], "embedded (" + by + ")");
  }
  add(c[FatbinSection::standalone], "standalone");
  add(c[FatbinSection::memory], "in a fatbin file");
  return "  fatbins: " + s;
}

/// What every kernel-bearing fatbin of an object covers (the intersection): a launch needs the
/// image in the fatbin of the kernel's own translation unit, so an architecture that only some
/// fatbins hold fails for the others' kernels. Device-link fatbins hold no kernels and are skipped.
struct EveryFatbin {
  std::vector<Arch> sass, ptx;
};
EveryFatbin every_fatbin(const ObjectFatbins& o) {
  EveryFatbin all;
  bool first = true;
  for (const auto& fb : o.fatbins) {
    if (fb.device_link) continue;
    std::vector<Arch> sass, ptx;
    for (const auto& e : fb.entries) {
      if (e.kind == CodeKind::sass) sass.push_back(e.arch);
      if (e.kind == CodeKind::ptx) ptx.push_back(e.arch);
    }
    for (auto* v : {&sass, &ptx}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    if (first) {
      all = {std::move(sass), std::move(ptx)};
      first = false;
      continue;
    }
    auto keep = [](std::vector<Arch>& acc, const std::vector<Arch>& other) {
      std::vector<Arch> out;
      std::set_intersection(acc.begin(), acc.end(), other.begin(), other.end(), std::back_inserter(out));
      acc = std::move(out);
    };
    keep(all.sass, sass);
    keep(all.ptx, ptx);
  }
  return all;
}

nlohmann::json coverage_json(const CoverageSummary& c) {
  return {{"sass", arch_list_json(c.sass, CodeKind::sass)},
          {"ptx", arch_list_json(c.ptx, CodeKind::ptx)},
          {"ltoir", arch_list_json(c.ltoir, CodeKind::ptx)},
          {"highest_ptx_isa", c.highest_ptx_isa.empty() ? nlohmann::json(nullptr) : nlohmann::json(version_text(c.highest_ptx_isa))},
          {"fatbins", c.fatbins},
          {"images", c.images}};
}

nlohmann::json counts_json(const FatbinCounts& c) {
  return {{"nv_fatbin", c[FatbinSection::nv_fatbin]}, {"nv_relfatbin", c[FatbinSection::nv_relfatbin]}, {"embedded", c[FatbinSection::embedded]}, {"embedded_by_section", c.embedded_by_section}, {"standalone", c[FatbinSection::standalone]}, {"memory", c[FatbinSection::memory]}};
}

/// The device-link drops of an object that has an -rdc link (nothing is decoded for others).
/// `inspect --no-cache`, for link_drops_of (set once by run_inspect).
bool g_no_cache = false;
/// The limits on what is derived from input, for link_drops_of (set once by run_inspect).
DerivedLimits g_limits;

std::vector<LinkDrop> link_drops_of(const ObjectFatbins& o) {
  const bool linked = std::any_of(o.fatbins.begin(), o.fatbins.end(), [](const Fatbin& fb) { return fb.linked; });
  if (!linked) return {};
  KernelIndex index(results_cache(g_no_cache), o, g_limits);  // the kernel lists check and doctor kept
  return device_link_drops(o, &index);
}

/// The fatbins of an object as JSON text, written directly: as nlohmann-json writes them with
/// indent 2 (keys in byte order, strings made UTF-8 as make_utf8 does and escaped as dump()
/// escapes them), without a tree of 24,000 fatbins' objects to build, copy and destroy
/// (`inspect --json` of libcufft spent most of its time there). `depth` is the nesting of the
/// array. tests/cli/json_format.sh checks the text against a re-dump with sorted keys.
class FatbinsJson {
 public:
  FatbinsJson(std::string& out, ObjectKernels* kernels) : out_(out), kernels_(kernels) {}

  void fatbins(const ObjectFatbins& o, int depth) {
    array(o.fatbins.size(), depth, [&](std::size_t i) { fatbin(o.fatbins[i], depth + 1); });
  }

 private:
  void fatbin(const Fatbin& fb, int depth) {
    open();
    key("device_link", depth);
    boolean(fb.device_link);
    key("identifier", depth);
    string(fb.identifier());
    key("images", depth);
    array(fb.entries.size(), depth + 1, [&](std::size_t i) { entry(fb.entries[i], depth + 2); });
    key("index", depth);
    number(fb.index);
    key("linked", depth);
    boolean(fb.linked);
    key("offset", depth);
    number(fb.offset);
    key("section", depth);
    string(to_string(fb.section));
    key("section_name", depth);
    string(fb.section_name);
    key("size", depth);
    number(fb.size);
    key("translation_unit", depth);
    string(fb.translation_unit);
    key("version", depth);
    number(fb.version);
    close(depth);
  }

  void entry(const FatbinEntry& e, int depth) {
    const KernelList* listed = kernels_ != nullptr ? kernels_->find(&e) : nullptr;
    open();
    key("arch", depth);
    string(entry_arch(e));
    key("compressed_size", depth);
    number(e.compressed_size);
    key("compression", depth);
    string(to_string(e.compression));
    key("debug", depth);
    boolean(e.debug);
    if (e.kind == CodeKind::sass) {
      key("elf_abi", depth);
      number(e.version.minor);
    }
    key("flags", depth);
    number(e.flags);
    key("header_size", depth);
    number(e.header_size);
    key("identifier", depth);
    string(e.identifier);
    key("image_size", depth);
    number(e.image_size());
    key("index", depth);
    number(e.index);
    if (listed != nullptr && !listed->error.empty()) {
      key("kernel_error", depth);
      string(listed->error);
    }
    if (kernels_ != nullptr) {
      key("kernels", depth);
      array(listed != nullptr ? listed->kernels.size() : 0, depth + 1, [&](std::size_t i) {
        open();
        key("demangled", depth + 2);
        string(listed->kernels[i].demangled);
        key("name", depth + 2);
        string(listed->kernels[i].name);
        close(depth + 2);
      });
    }
    key("kind", depth);
    string(kind_text(e.kind));
    key("offset", depth);
    number(e.offset);
    key("options", depth);
    string(e.options);
    if (e.kind == CodeKind::ptx) {
      key("ptx_isa", depth);
      string(version_text(e.version));
    }
    key("raw_kind", depth);
    number(e.raw_kind);
    key("sm", depth);
    number(e.arch.sm);
    key("stored_size", depth);
    number(e.stored_size);
    key("suffix", depth);
    string(e.arch.suffix == Suffix::a ? "a" : e.arch.suffix == Suffix::f ? "f"
                                                                         : "");
    key("uncompressed_size", depth);
    number(e.uncompressed_size);
    key("version", depth);
    string(version_text(e.version));
    close(depth);
  }

  void indent(int depth) { out_.append(static_cast<std::size_t>(depth) * 2, ' '); }
  /// An array of `n` elements whose "[" stands at `depth`: "[]" when empty, else each element
  /// on a line of its own at depth + 1 (`element(i)` writes it).
  template <class Element>
  void array(std::size_t n, int depth, Element&& element) {
    if (n == 0) {
      out_ += "[]";
      return;
    }
    out_ += "[";
    for (std::size_t i = 0; i < n; ++i) {
      out_ += i == 0 ? "\n" : ",\n";
      indent(depth + 1);
      element(i);
    }
    out_ += "\n";
    indent(depth);
    out_ += "]";
  }
  void open() {
    out_ += "{";
    first_ = true;
  }
  void close(int depth) {
    out_ += "\n";
    indent(depth);
    out_ += "}";
    first_ = false;
  }
  /// A key of the object at `depth` (whose members are at depth + 1).
  void key(std::string_view k, int depth) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    indent(depth + 1);
    out_ += '"';
    out_ += k;
    out_ += "\": ";
  }
  void boolean(bool v) { out_ += v ? "true" : "false"; }
  template <class T>
  void number(T v) {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
    out_.append(digits, static_cast<std::size_t>(end - digits));
  }
  void string(std::string_view v) {
    if (!common::valid_utf8(v)) {
      escaped(common::utf8_escaped(v));
      return;
    }
    escaped(v);
  }
  void escaped(std::string_view v) {
    out_ += '"';
    std::size_t plain = 0;  // bytes since the last escape, appended at once
    for (std::size_t i = 0; i < v.size(); ++i) {
      const auto c = static_cast<unsigned char>(v[i]);
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      out_.append(v.substr(plain, i - plain));
      plain = i + 1;
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\b':
          out_ += "\\b";
          break;
        case '\f':
          out_ += "\\f";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default: {
          static constexpr char kHex[] = "0123456789abcdef";
          out_ += "\\u00";
          out_ += kHex[c >> 4];
          out_ += kHex[c & 15];
        }
      }
    }
    out_.append(v.substr(plain));
    out_ += '"';
  }

  std::string& out_;
  ObjectKernels* kernels_;
  bool first_ = false;
};

/// An object's JSON without its fatbins: `fatbins_placeholder` stands in their place (FatbinsJson
/// writes them into the text).
nlohmann::json object_json(const ObjectFatbins& o, long long fatbins_placeholder) {
  return {{"path", o.path},
          {"archive", o.archive},
          {"member", o.member},
          {"elf_type", elf_type_text(o.elf_type)},
          {"pie", o.pie},
          {"format", o.pe ? "pe" : o.elf_type == 0 ? ""
                                                   : "elf"},
          {"machine", machine_text(o.machine)},
          {"fatbins", fatbins_placeholder},
          {"fatbin_counts", counts_json(count_fatbins(o))},
          {"coverage", coverage_json(summarize(o))},
          {"device_link_drops", [&] {
             nlohmann::json drops = nlohmann::json::array();
             for (const LinkDrop& d : link_drops_of(o))
               drops.push_back({{"kernel", d.kernel.name}, {"demangled", d.kernel.demangled}, {"linked_fatbin", d.linked_fatbin}, {"linked", nvcc_name(d.linked.arch, CodeKind::sass)}, {"relocatable_fatbin", d.relocatable_fatbin}, {"object", d.object_label}, {"defined_in", d.defined_in}, {"cuda_error", kErrSymbolNotFound}});
             return drops;
           }()},
          {"coverage_every_fatbin", {{"sass", arch_list_json(every_fatbin(o).sass, CodeKind::sass)}, {"ptx", arch_list_json(every_fatbin(o).ptx, CodeKind::ptx)}}}};
}

/// The coverage lines of an object: what every fatbin covers, then, when fatbins differ, what
/// only some do. One string per output line (each is escaped on its own when printed).
std::vector<std::string> coverage_lines(const CoverageSummary& c, const EveryFatbin& every) {
  auto names = [](const std::vector<Arch>& v, CodeKind k) {
    std::string s;
    for (const Arch& a : v) s += (s.empty() ? "" : " ") + nvcc_name(a, k);
    return s.empty() ? std::string("none") : s;
  };
  std::string line = "  coverage: sass " + names(every.sass, CodeKind::sass) + "; ptx " + names(every.ptx, CodeKind::ptx);
  if (c.fatbins > 1) line += " (in all " + std::to_string(c.fatbins) + " fatbins)";
  std::vector<std::string> lines{std::move(line)};
  if (every.sass != c.sass || every.ptx != c.ptx)
    lines.push_back("  in some fatbins only (not enough to run every kernel): union sass " + names(c.sass, CodeKind::sass) +
                    "; ptx " + names(c.ptx, CodeKind::ptx));
  if (!c.highest_ptx_isa.empty()) lines.back() += " (highest ptx isa " + version_text(c.highest_ptx_isa) + ")";
  if (!c.ltoir.empty()) lines.back() += "; lto-ir " + names(c.ltoir, CodeKind::ptx);
  return lines;
}

/// The table's text, written to stdout in blocks: printf's parsing of the row format was 15% of
/// inspecting libcufft (72,000 lines). Flushed before anything that may write to stderr, so that
/// a terminal shows both streams in the order they were written.
class TableText {
 public:
  TableText() { text_.reserve(kBlock + 4096); }
  TableText(const TableText&) = delete;
  TableText& operator=(const TableText&) = delete;
  ~TableText() { flush(); }
  TableText& put(std::string_view s) {
    text_.append(s);
    return *this;
  }
  /// `s` as shown() shows it, without a string of its own.
  TableText& shown(std::string_view s) {
    common::append_terminal_text(s, text_);
    return *this;
  }
  /// `s` then spaces up to `width` (printf's %-Ns).
  TableText& left(std::string_view s, std::size_t width) {
    text_.append(s);
    if (s.size() < width) text_.append(width - s.size(), ' ');
    return *this;
  }
  /// Spaces up to `width`, then `s` (printf's %Ns).
  TableText& right(std::string_view s, std::size_t width) {
    if (s.size() < width) text_.append(width - s.size(), ' ');
    text_.append(s);
    return *this;
  }
  TableText& right(unsigned long long v, std::size_t width) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
    return right(std::string_view(digits, static_cast<std::size_t>(end - digits)), width);
  }
  TableText& hex(unsigned long long v) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, v, 16).ptr;
    text_.append("0x").append(digits, static_cast<std::size_t>(end - digits));
    return *this;
  }
  /// Ends a line; writes out a full block.
  void line() {
    text_.push_back('\n');
    if (text_.size() >= kBlock) flush();
  }
  void flush() {
    if (!text_.empty()) std::fwrite(text_.data(), 1, text_.size(), stdout);
    text_.clear();
  }

 private:
  static constexpr std::size_t kBlock = std::size_t{64} << 10;
  std::string text_;
};

/// The table's lines of the objects of `r` (one input, or one file of a directory handed over
/// while the directory is read); returns how many objects it showed.
std::size_t print_objects(TableText& t, const ScanReport& r, const InspectOptions& opt, const ScanOptions& scan) {
  // Built only for --kernels: nothing else decodes payloads or drops their pages.
  std::optional<KernelSource> source;
  if (opt.kernels && !opt.summary) source.emplace(KernelSource{PayloadPages(std::span<const ScanReport>(&r, 1)), opt.threads, scan});
  const KernelSource* kernel_source = source ? &*source : nullptr;
  std::size_t count = 0;
  for (const auto& o : r.objects) {
    if (o.fatbins.empty() && !o.archive.empty()) continue;  // archive members without device code
    ++count;
    if (o.elf_type == 0 && o.machine == 0) {  // not an ELF file: a fatbin, PTX or LTO-IR file
      std::string what = "fatbin file";
      if (o.fatbins.size() == 1 && o.fatbins.front().section == FatbinSection::standalone)
        what = where_text(o.fatbins.front()).substr(std::string_view("standalone ").size()) + " file";
      t.put(shown(o.path)).put("  (").put(what).put(")").line();
    } else {
      t.put(shown(o.path))
          .put("  (")
          .put(o.pe    ? (o.elf_type == 3 ? "windows dll" : "windows executable")
               : o.pie ? "executable"
                       : elf_type_text(o.elf_type))
          .put(", ")
          .put(machine_text(o.machine))
          .put(")")
          .line();
    }
    if (o.fatbins.empty()) {
      t.put("  no device code").line();
      continue;
    }
    t.flush();  // listing kernels may warn on stderr
    const std::unique_ptr<ObjectKernels> kernels = kernel_source != nullptr && !opt.summary ? kernel_source->of(o) : nullptr;
    if (!opt.summary) {
      for (const auto& fb : o.fatbins) {
        t.put("  fatbin ").right(fb.index, 0).put("  ");
        if ((fb.section == FatbinSection::nv_fatbin || fb.section == FatbinSection::nv_relfatbin) && !fb.section_name.empty())
          t.shown(fb.section_name);  // where_text's answer, without a string of its own
        else if (fb.section == FatbinSection::embedded)
          t.shown(fb.section_name).put(" (embedded)");
        else
          t.shown(where_text(fb));
        t.put(" at ").hex(fb.offset).put(", ");
        t.hex(fb.size).put(" bytes, ").right(fb.entries.size(), 0).put(fb.entries.size() == 1 ? " image" : " images");
        if (fb.device_link) t.put("  device-link fatbin (no kernels: decides nothing)");
        else if (fb.linked) t.put("  linked by nvlink (-rdc)");
        for (const auto& e : fb.entries)
          if (!e.identifier.empty()) {  // the fatbin's identifier: its first entry's that has one
            t.put("  ").shown(e.identifier);
            break;
          }
        if (!fb.translation_unit.empty()) t.put("  tu ").shown(fb.translation_unit);
        t.line();
        t.put("       #  kind   arch            version        size      stored  comp   flags").line();
        for (const auto& e : fb.entries) {
          t.put("    ").right(e.index, 4).put("  ").left(kind_text(e.kind), 5).put("  ").left(entry_arch(e), 14).put("  ");
          t.left(version_text(e.version), 7).put("  ").right(e.image_size(), 10).put("  ").right(e.stored_size, 10).put("  ");
          t.left(to_string(e.compression), 5).put("  ").put(flags_text(e));
          if (!e.identifier.empty()) t.put("  id=").shown(e.identifier);
          if (!e.options.empty()) t.put("  options=\"").shown(e.options).put("\"");
          t.line();
          if (kernels != nullptr) {
            if (!kernels->ready(&e)) t.flush();  // decoding may warn on stderr
            const KernelList* listed = kernels->find(&e);
            if (listed == nullptr) continue;
            for (const auto& k : listed->kernels) t.put("            kernel ").shown(k.demangled).line();
            if (!listed->error.empty()) t.put("            kernels not listed: ").shown(listed->error).line();
          }
        }
      }
    }
    t.put(shown(counts_line(count_fatbins(o)))).line();
    for (const std::string& line : coverage_lines(summarize(o), every_fatbin(o))) t.put(shown(line)).line();
    for (const LinkDrop& d : link_drops_of(o))
      t.put(shown("  device-link drop: " + d.kernel.demangled + " (" + d.object_label + ", " + d.defined_in +
                  ") is not in the linked " + nvcc_name(d.linked.arch, CodeKind::sass) + " image of fatbin " +
                  std::to_string(d.linked_fatbin) + ": its launches there fail with 500"))
          .line();
  }
  return count;
}

/// Reads the inputs and prints the table as it goes: a directory's files are printed as they
/// are read (in path order), and their reports dropped once printed, so that a directory of
/// 100 large libraries holds a few files' reports at once, not 100 (with --kernels, each
/// object's kernel lists a bounded stretch ahead: ObjectKernels). A directory, wheel or archive
/// without device code lists no object: it still gets a line.
Inputs read_and_print_table(const InspectOptions& opt, const ScanOptions& scan) {
  TableText t;
  std::size_t shown_objects = 0;
  ReadOptions read;
  read.scan = scan;
  read.scan.each_file = [&](ScanReport& part) { shown_objects += print_objects(t, part, opt, scan); };
  read.each_input = [&](ScanReport& r, const InputFacts& facts) {
    // A directory's objects were printed while it was read; any left are a file's.
    shown_objects += print_objects(t, r, opt, scan);
    if (shown_objects == 0) t.put(shown(no_device_code_line(facts))).line();
    shown_objects = 0;
    t.flush();
  };
  Inputs in = read_inputs(opt.files, read);
  return in;
}

/// Whether cuobjdump lists a fatbin at all: it knows neither fatbins embedded as data nor PTX
/// and LTO-IR files (a standalone cubin it lists).
bool cuobjdump_sees(const Fatbin& fb) {
  if (fb.section == FatbinSection::embedded) return false;
  if (fb.section == FatbinSection::standalone) return !fb.entries.empty() && fb.entries.front().kind == CodeKind::sass;
  return true;
}

/// cuobjdump's listing: the executable fatbins (.nv_fatbin) of an object, or its relocatable
/// ones when it has none; LTO-IR is not listed; numbering runs on across archive members.
/// Embedded fatbins are not listed (cuobjdump does not find them); a standalone cubin is named
/// "<base>.<arch>.cubin", without a number.
int print_like_cuobjdump(const Inputs& in, bool all_fatbins) {
  for (const auto& r : in.reports) {
    std::error_code ec;
    const std::string input_shown = r.directory ? r.input : std::filesystem::absolute(r.input, ec).string();
    const std::string base = cuobjdump_base(r.input);
    bool any_code = false;
    for (const auto& o : r.objects)
      for (const auto& fb : o.fatbins) any_code = any_code || cuobjdump_sees(fb);
    for (CodeKind kind : {CodeKind::sass, CodeKind::ptx}) {
      std::size_t n = 0;
      for (const auto& o : r.objects) {
        if (!o.archive.empty()) {
          std::error_code ec2;
          std::printf("\nmember %s:%s:\n", shown(std::filesystem::absolute(o.archive, ec2).string()).c_str(), shown(o.member).c_str());
        }
        bool has_exec = false;
        for (const auto& fb : o.fatbins)
          has_exec = has_exec || (cuobjdump_sees(fb) && fb.section != FatbinSection::nv_relfatbin);
        const std::string obj_base = r.directory ? cuobjdump_base(o.path) : base;
        std::vector<const Fatbin*> listed;  // -all: every section, in file order
        for (const auto& fb : o.fatbins)
          if (cuobjdump_sees(fb) && (all_fatbins || has_exec != (fb.section == FatbinSection::nv_relfatbin)))
            listed.push_back(&fb);
        std::sort(listed.begin(), listed.end(), [](const Fatbin* a, const Fatbin* b) { return a->offset < b->offset; });
        for (const Fatbin* fbp : listed) {
          const Fatbin& fb = *fbp;
          for (const auto& e : fb.entries) {
            if (e.kind == CodeKind::ltoir) {  // cuobjdump (13.2) walks LTO-IR entries and says it cannot read them
              std::fflush(stdout);
              std::fprintf(stderr, "cuobjdump warning : Can't deobfuscate entry '%s' without obfuscation key\n",
                           shown(input_shown).c_str());
            }
            if (e.kind != kind) continue;
            std::string name;
            if (fb.section == FatbinSection::standalone) {  // named like an entry with an identifier
              FatbinEntry named = e;
              named.identifier = o.path;
              name = cuobjdump_name(named, obj_base, n + 1);
            } else {
              name = cuobjdump_name(e, obj_base, n + 1);
            }
            std::printf("%s file %4zu: %s\n", kind == CodeKind::sass ? "ELF" : "PTX", n + 1, shown(name).c_str());
            ++n;
          }
        }
      }
      if (!any_code) {
        std::fflush(stdout);
        std::fprintf(stderr, "cuobjdump info    : File '%s' does not contain device code\n", shown(input_shown).c_str());
      } else if (n == 0) {  // cuobjdump says so on stderr, for ELF (a PTX- or LTO-IR-only file) as for PTX
        std::fflush(stdout);
        std::fprintf(stderr, "cuobjdump info    : No %s file found to extract from '%s'. You may try with -all option.\n",
                     kind == CodeKind::sass ? "ELF" : "PTX", shown(input_shown).c_str());
      }
    }
  }
  std::fflush(stdout);
  return kExitOk;
}

int run_inspect(const InspectOptions& opt) {
  ReadLimits limits = opt.limits;
  limits.threads = opt.threads;
  auto scan = scan_options(limits);
  if (!scan) {
    std::fprintf(stderr, "archguard inspect: %s\n", shown(scan.message()).c_str());
    return kExitUsage;
  }
  // cuobjdump finds no fatbin embedded as data: its listing needs no search for them.
  if (opt.cuobjdump) scan->embedded = false;
  // Where the embedded fatbins of an unchanged file are is known from an earlier run.
  else scan->facts = results_cache(opt.no_cache);
  g_no_cache = opt.no_cache;
  g_limits = scan->limits;
  if (opt.cuobjdump) {
    const Inputs in = read_inputs(opt.files, *scan);
    print_like_cuobjdump(in, opt.all_fatbins);
    print_skipped(in);
    print_errors(in.errors);
    return in.errors.empty() ? kExitOk : kExitUsage;
  }
  if (!opt.json) {
    const Inputs in = read_and_print_table(opt, *scan);
    print_skipped(in);
    print_errors(in.errors);
    return in.errors.empty() ? kExitOk : kExitUsage;
  }
  const Inputs in = read_inputs(opt.files, *scan);
  // Built only for --kernels: nothing else decodes payloads or drops their pages.
  std::optional<KernelSource> source;
  if (opt.kernels) source.emplace(KernelSource{PayloadPages(in.reports), opt.threads, *scan});
  const KernelSource* kernel_source = source ? &*source : nullptr;
  {
    // Each object's "fatbins" holds a placeholder in the tree (-1, -2, ...: no count is
    // negative, and a string's quotes are escaped, so none of the input can write one); its
    // fatbins are written directly in its place (FatbinsJson).
    nlohmann::json inputs = nlohmann::json::array();
    std::vector<const ObjectFatbins*> shown_objects;
    for (const auto& r : in.reports) {
      nlohmann::json objects = nlohmann::json::array();
      for (const auto& o : r.objects) {
        if (o.fatbins.empty() && !o.archive.empty()) continue;
        shown_objects.push_back(&o);
        objects.push_back(object_json(o, -static_cast<long long>(shown_objects.size())));
      }
      inputs.push_back({{"path", r.input}, {"directory", r.directory}, {"files_read", r.files_read}, {"skipped", r.skipped}, {"objects", std::move(objects)}});
    }
    nlohmann::json doc{{"schema", "archguard.inspect/1"}, {"inputs", std::move(inputs)}, {"errors", in.errors}};
    const std::string tree = cli::json_text(std::move(doc));
    std::string text;
    text.reserve(tree.size());
    static constexpr std::string_view kKey = "\"fatbins\": -";
    std::size_t from = 0;
    for (std::size_t n = 0; n < shown_objects.size(); ++n) {
      const std::size_t at = tree.find(kKey, from);
      if (at == std::string::npos) break;  // cannot happen: one placeholder per object
      const std::size_t line = tree.rfind('\n', at) + 1;
      text.append(tree, from, at + kKey.size() - 1 - from);
      from = tree.find_first_not_of("0123456789", at + kKey.size());
      const ObjectFatbins& o = *shown_objects[n];
      const std::unique_ptr<ObjectKernels> object_kernels = kernel_source != nullptr ? kernel_source->of(o) : nullptr;
      FatbinsJson(text, object_kernels.get()).fatbins(o, static_cast<int>((at - line) / 2));
      if (text.size() >= (std::size_t{1} << 20)) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        text.clear();
      }
    }
    text.append(tree, from);
    text += '\n';
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  return in.errors.empty() ? kExitOk : kExitUsage;
}

void setup(CLI::App& root, Context& ctx) {
  auto [cmd, opt] = add_command<InspectOptions>(
      root, ctx, "inspect", "List the device code of ELF files, static libraries, wheels, tar archives and directories", run_inspect);
  cmd->add_option("files", opt->files, "Files or directories to read")->required();
  cmd->add_flag("--json", opt->json, "Machine-readable output (schema: docs/json-schema.md)");
  add_limit_flags(cmd, opt->limits);
  cmd->add_flag("--kernels", opt->kernels, "Decompress the images and list their kernel entry points");
  cmd->add_flag("--summary", opt->summary, "Only the coverage summary per object");
  cmd->add_flag("--no-cache", opt->no_cache, "Search every file again: do not use the results cache (docs/cli.md)");
  cmd->add_flag("--list-like-cuobjdump", opt->cuobjdump,
                "Print the lines of 'cuobjdump --list-elf' then 'cuobjdump --list-ptx'");
  cmd->add_flag("--all-fatbins", opt->all_fatbins,
                "With --list-like-cuobjdump: list __nv_relfatbin too, as cuobjdump -all does");
  cmd->add_option("--threads", opt->threads,
                  "Worker threads, 1 to " + std::to_string(kMaxThreads) + " (default, or 0: all cores; env ARCHGUARD_MAX_THREADS raises the limit)");
}

}  // namespace

ARCHGUARD_VERB(setup);

}  // namespace archguard::cli
