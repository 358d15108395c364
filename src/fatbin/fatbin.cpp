// SPDX-License-Identifier: Apache-2.0
// Fatbin and entry-header parsing. Field offsets: docs/fatbin-format.md.
#include <archguard/fatbin.hpp>

#include "common/names.hpp"

#include <elf.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <map>
#include <optional>
#include <thread>

namespace archguard {
namespace {

std::string entry_what(std::size_t fatbin, std::size_t entry) {
  return "fatbin " + std::to_string(fatbin) + " entry " + std::to_string(entry);
}

/// A string field stored NUL-padded: the bytes up to the first NUL.
std::string padded_string(Bytes bytes) {
  std::string s;
  s.reserve(bytes.size());
  for (std::byte b : bytes) {
    if (b == std::byte{0}) break;
    s.push_back(static_cast<char>(b));
  }
  return s;
}

// The declared layouts are whole: each header's last field ends where the header does.
static_assert(FatbinHeaderLayout::fat_size.offset + FatbinHeaderLayout::fat_size.size == FatbinHeaderLayout::size);
static_assert(EntryHeaderLayout::uncompressed_size.offset + EntryHeaderLayout::uncompressed_size.size ==
              EntryHeaderLayout::min_size);

/// Decodes the entry at `e` (absolute in `r`), which must end by `end`.
Result<FatbinEntry> parse_entry(const ByteReader& r, std::uint64_t e, std::uint64_t end,
                                std::size_t fatbin_index, std::size_t index) {
  using H = EntryHeaderLayout;
  const std::string what = entry_what(fatbin_index, index);
  if (end - e < kEntryHeaderMinSize)
    return r.error_at(e, what, "entry header of 0x40 bytes runs past the fatbin end " + hex(r.base() + end));
  FatbinEntry x;
  x.index = index;
  x.offset = r.base() + e;
  AG_TRY(x.raw_kind, r.u16(e + H::kind.offset, what));
  AG_TRY(x.header_size, r.u32(e + H::header_size.offset, what));
  AG_TRY(x.stored_size, r.u64(e + H::stored_size.offset, what));
  AG_TRY(x.compressed_size, r.u32(e + H::compressed_size.offset, what));
  AG_TRY(const std::uint32_t options_at, r.u32(e + H::options_offset.offset, what));
  AG_TRY(const std::uint16_t minor, r.u16(e + H::minor.offset, what));
  AG_TRY(const std::uint16_t major, r.u16(e + H::major.offset, what));
  AG_TRY(const std::uint32_t arch, r.u32(e + H::arch.offset, what));
  AG_TRY(const std::uint32_t id_offset, r.u32(e + H::identifier_offset.offset, what));
  AG_TRY(const std::uint32_t id_length, r.u32(e + H::identifier_length.offset, what));
  AG_TRY(x.flags, r.u64(e + H::flags.offset, what));
  AG_TRY(x.uncompressed_size, r.u64(e + H::uncompressed_size.offset, what));

  switch (x.raw_kind) {
    case kEntryKindPtx:
      x.kind = CodeKind::ptx;
      break;
    case kEntryKindElf:
    case kEntryKindOldCubin:
      x.kind = CodeKind::sass;
      break;
    case kEntryKindLtoIr:
      x.kind = CodeKind::ltoir;
      break;
    default:
      return r.error_at(e, what, "unknown image kind " + hex(x.raw_kind) + " (expected 0x1 ptx, 0x2 elf, 0x8 lto-ir)");
  }
  if (x.header_size < kEntryHeaderMinSize)
    return r.error_at(e + H::header_size.offset, what, "entry header size " + hex(x.header_size) + " is below the minimum 0x40");
  const auto payload_at = checked_add(e, x.header_size);
  if (!payload_at || *payload_at > end)
    return r.error_at(e + H::header_size.offset, what, "entry header size " + hex(x.header_size) + " runs past the fatbin end " + hex(r.base() + end));
  const auto entry_end = checked_add(*payload_at, x.stored_size);
  if (!entry_end || *entry_end > end)
    return r.error_at(e + H::stored_size.offset, what, "payload size " + hex(x.stored_size) + " runs past the fatbin end " + hex(r.base() + end));
  if (x.stored_size == 0) return r.error_at(e + H::stored_size.offset, what, "payload size is 0");
  if (x.compressed_size > x.stored_size)
    return r.error_at(e + H::compressed_size.offset, what, "compressed size " + hex(x.compressed_size) + " exceeds the stored size " + hex(x.stored_size));

  const bool lz4 = (x.flags & kEntryFlagLz4) != 0;
  const bool zstd = (x.flags & kEntryFlagZstd) != 0;
  if (lz4 && zstd) return r.error_at(e + H::flags.offset, what, "flags " + hex(x.flags) + " claim both lz4 and zstd compression");
  x.compression = lz4 ? Compression::lz4 : zstd ? Compression::zstd
                                                : Compression::none;
  if (x.compression != Compression::none && x.uncompressed_size == 0)
    return r.error_at(e + H::uncompressed_size.offset, what, "compressed entry has an uncompressed size of 0");
  x.debug = (x.flags & kEntryFlagDebug) != 0;

  const bool a = (x.flags & kEntryFlagArchSpecific) != 0;
  const bool f = (x.flags & kEntryFlagFamilySpecific) != 0;
  if (a && f) return r.error_at(e + H::flags.offset, what, "flags " + hex(x.flags) + " claim both 'a' and 'f' targets");
  if (arch == 0 || arch > 0xffff) return r.error_at(e + H::arch.offset, what, "architecture " + hex(arch) + " is not valid");
  x.arch = Arch{arch, a ? Suffix::a : f ? Suffix::f
                                        : Suffix::none};
  x.version = Version2{major, minor};

  const std::uint64_t entry_size = *entry_end - e;
  if (id_offset != 0) {
    const auto id_end = checked_add(id_offset, id_length);
    if (!id_end || *id_end > entry_size)
      return r.error_at(e + H::identifier_offset.offset, what, "identifier at +" + hex(id_offset) + " of " + hex(id_length) + " bytes runs past the entry end +" + hex(entry_size));
    AG_TRY(Bytes id, r.span(e + id_offset, id_length, what));
    x.identifier = padded_string(id);
  }
  if (options_at != 0) {
    const auto rec_end = checked_add(options_at, 8);
    if (!rec_end || *rec_end > x.header_size)
      return r.error_at(e + H::options_offset.offset, what, "options record at +" + hex(options_at) + " lies outside the entry header of " + hex(x.header_size) + " bytes");
    AG_TRY(const std::uint32_t opt_offset, r.u32(e + options_at, what));
    AG_TRY(const std::uint32_t opt_length, r.u32(e + options_at + 4, what));
    const auto opt_end = checked_add(opt_offset, opt_length);
    if (!opt_end || *opt_end > entry_size)
      return r.error_at(e + options_at, what, "options at +" + hex(opt_offset) + " of " + hex(opt_length) + " bytes run past the entry end +" + hex(entry_size));
    AG_TRY(Bytes opt, r.span(e + opt_offset, opt_length, what));
    if (x.kind == CodeKind::sass && (x.flags & kEntryFlagCompatExtension) != 0)
      x.extension.assign(opt.begin(), opt.end());
    else
      x.options = padded_string(opt);
  }
  AG_TRY(x.payload, r.span(*payload_at, x.stored_size, what));
  return x;
}

}  // namespace

bool defines_no_kernel(const Fatbin& fb, std::string_view name) {
  if (fb.entries.empty()) return true;  // nvcc 13 writes an empty device-link fatbin for PTX-only builds
  // The smallest SASS image answers as well as any (the images of a fatbin define the same
  // kernels) at a fraction of the cost: NCCL's linked fatbin starts with a 100 MB image.
  const FatbinEntry* smallest = nullptr;
  for (const auto& e : fb.entries)
    if (e.kind == CodeKind::sass && (smallest == nullptr || e.image_size() < smallest->image_size())) smallest = &e;
  if (smallest == nullptr) return false;
  auto kernels = decode_kernels(*smallest, name);
  return kernels && kernels->empty();
}

Result<ObjectFatbins> read_region(Bytes bytes, std::string name) {
  AG_TRY(std::vector<Fatbin> fbs, Fatbin::parse_all(bytes, name, FatbinSection::nv_fatbin));
  if (fbs.size() > 1 && defines_no_kernel(fbs.front(), name)) {
    fbs.front().linked = true;
    fbs.front().device_link = true;
  }
  ObjectFatbins o;
  o.path = std::move(name);
  o.fatbins = std::move(fbs);
  return o;
}

std::string_view to_string(Compression c) {
  static constexpr common::Named<Compression> names[] = {{Compression::none, "none"}, {Compression::lz4, "lz4"}, {Compression::zstd, "zstd"}};
  return common::name_in(names, c);
}

std::string_view to_string(FatbinSection s) {
  static constexpr common::Named<FatbinSection> names[] = {{FatbinSection::nv_fatbin, ".nv_fatbin"}, {FatbinSection::nv_relfatbin, "__nv_relfatbin"}, {FatbinSection::memory, "memory"}, {FatbinSection::embedded, "embedded"}, {FatbinSection::standalone, "standalone"}};
  return common::name_in(names, s);
}

Result<Fatbin> Fatbin::parse(const ByteReader& r, std::uint64_t offset, std::size_t index) {
  const std::string what = "fatbin " + std::to_string(index);
  using H = FatbinHeaderLayout;
  AG_TRY(const std::uint32_t magic, r.u32(offset + H::magic.offset, what));
  if (magic != kFatbinMagic)
    return r.error_at(offset, what, "bad magic " + hex(magic) + " (expected " + hex(kFatbinMagic) + ")");
  Fatbin fb;
  fb.index = index;
  fb.offset = r.base() + offset;
  AG_TRY(fb.version, r.u16(offset + H::version.offset, what));
  AG_TRY(const std::uint16_t header_size, r.u16(offset + H::header_size.offset, what));
  AG_TRY(const std::uint64_t fat_size, r.u64(offset + H::fat_size.offset, what));
  if (header_size < kFatbinHeaderSize)
    return r.error_at(offset + H::header_size.offset, what, "header size " + hex(header_size) + " is below 0x10");
  const auto first = checked_add(offset, header_size);
  const auto end = first ? checked_add(*first, fat_size) : std::nullopt;
  if (!end || *end > r.size())
    return r.error_at(offset + H::fat_size.offset, what, "size " + hex(fat_size) + " runs past the section end " + hex(r.base() + r.size()));
  fb.size = *end - offset;
  std::uint64_t e = *first;
  while (e < *end) {
    AG_TRY(FatbinEntry entry, parse_entry(r, e, *end, index, fb.entries.size()));
    e += entry.header_size + entry.stored_size;  // bounded by *end in parse_entry
    fb.entries.push_back(std::move(entry));
  }
  return fb;
}

Result<std::vector<Fatbin>> Fatbin::parse_all(Bytes bytes, std::string name, FatbinSection section,
                                              std::uint64_t base, const ReleaseHook& release, const DataHook& next_data) {
  ByteReader r(bytes, std::move(name), base);
  std::vector<Fatbin> out;
  std::uint64_t pos = 0;
  // Pages read are given back in runs of at least kReleaseRun bytes: one madvise per fatbin
  // (495 in libtorch_cuda) cost 14% of an inspect, for the same pages.
  constexpr std::uint64_t kReleaseRun = std::uint64_t{16} << 20;
  std::uint64_t released = 0;  // offsets before this are given back
  auto give_back = [&](std::uint64_t upto) {
    if (release && upto > released) release(base + released, upto - released);
    released = upto;
  };
  while (pos < r.size()) {
    // zero padding between fatbins and at the end of the section
    if (bytes[static_cast<std::size_t>(pos)] == std::byte{0}) {
      if (next_data && pos % 4096 == 0) {  // a hole of a sparse file is skipped, not read
        const std::uint64_t d = next_data(base + pos);
        if (d > base + pos) {
          pos = std::min<std::uint64_t>(r.size(), d - base);
          continue;
        }
      }
      ++pos;
      continue;
    }
    auto fb = Fatbin::parse(r, pos, out.size());
    if (!fb) {
      give_back(pos);
      return fb.error();
    }
    fb->section = section;
    pos += fb->size;
    if (pos - released >= kReleaseRun) give_back(pos);
    out.push_back(std::move(*fb));
  }
  give_back(std::min<std::uint64_t>(pos, r.size()));
  return out;
}

namespace {

constexpr std::uint32_t kEmbeddedEntryVersion = 0x0101;
constexpr std::uint32_t kMaxEntryHeaderSize = 0x1000;

/// The cheap structural test a candidate must pass before it is parsed: the header and every
/// entry header agree with each other and fill the fatbin exactly. `at` is the offset of the
/// magic in `b`. Each entry header looked at costs one unit of `work`, which the caller bounds.
bool plausible_fatbin(Bytes b, std::uint64_t at, std::uint64_t& work) {
  auto u16 = [&b](std::uint64_t o) { std::uint16_t v; std::memcpy(&v, b.data() + o, 2); return v; };
  auto u32 = [&b](std::uint64_t o) { std::uint32_t v; std::memcpy(&v, b.data() + o, 4); return v; };
  auto u64 = [&b](std::uint64_t o) { std::uint64_t v; std::memcpy(&v, b.data() + o, 8); return v; };
  const std::uint64_t size = b.size();
  if (size - at < kFatbinHeaderSize + kEntryHeaderMinSize) return false;
  using F = FatbinHeaderLayout;
  using H = EntryHeaderLayout;
  if (u16(at + F::version.offset) != 1 || u16(at + F::header_size.offset) != kFatbinHeaderSize) return false;
  const std::uint64_t fat_size = u64(at + F::fat_size.offset);
  if (fat_size < kEntryHeaderMinSize || fat_size > size - at - kFatbinHeaderSize) return false;
  const std::uint64_t end = at + kFatbinHeaderSize + fat_size;
  std::uint64_t e = at + kFatbinHeaderSize;
  while (e < end) {
    ++work;
    if (end - e < kEntryHeaderMinSize) return false;
    const std::uint16_t kind = u16(e + H::kind.offset);
    if (kind != kEntryKindPtx && kind != kEntryKindElf && kind != kEntryKindOldCubin && kind != kEntryKindLtoIr) return false;
    if (u16(e + H::version.offset) != kEmbeddedEntryVersion) return false;
    const std::uint32_t hs = u32(e + H::header_size.offset);
    if (hs < kEntryHeaderMinSize || hs > kMaxEntryHeaderSize || hs % 8 != 0 || hs > end - e) return false;
    const std::uint64_t stored = u64(e + H::stored_size.offset);
    if (stored == 0 || stored > end - e - hs) return false;
    e += hs + stored;
  }
  return e == end;
}

/// "tmpxft_00002627_00000000-6_old_tu.cudafe1.cpp" -> "old_tu.cu"; "" for any other name
/// (link.stub, the device-link fatbin's, among them).
std::string tu_from_file_symbol(std::string_view f) {
  constexpr std::string_view prefix = "tmpxft_", suffix = ".cudafe1.cpp";
  if (f.size() <= prefix.size() + suffix.size() || f.substr(0, prefix.size()) != prefix ||
      f.substr(f.size() - suffix.size()) != suffix)
    return {};
  f = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
  const std::size_t dash = f.find('-');  // <hex>_<hex>-<n>_<tu>
  if (dash == std::string_view::npos) return {};
  f.remove_prefix(dash + 1);
  const std::size_t us = f.find('_');
  if (us == std::string_view::npos || us == 0 || us + 1 >= f.size()) return {};
  f.remove_prefix(us + 1);
  // With several -gencode clauses nvcc names the intermediate after one virtual architecture:
  // "new_tu.compute_80.cudafe1.cpp".
  if (const std::size_t dot = f.rfind('.'); dot != std::string_view::npos) {
    std::string_view arch = f.substr(dot + 1);
    for (std::string_view p : {"compute_", "sm_", "lto_"}) {
      if (arch.substr(0, p.size()) != p) continue;
      std::string_view n = arch.substr(p.size());
      if (!n.empty() && (n.back() == 'a' || n.back() == 'f')) n.remove_suffix(1);
      if (!n.empty() && n.find_first_not_of("0123456789") == std::string_view::npos) f = f.substr(0, dot);
      break;
    }
  }
  if (f.empty()) return {};
  return std::string(f) + ".cu";
}

/// The two standard sections, where nvcc and nvlink put fatbins back to back.
bool standard_fatbin_section(std::string_view name) { return name == ".nv_fatbin" || name == "__nv_relfatbin"; }

/// A local symbol of a section named .nv_fatbin or __nv_relfatbin, with what its name and the
/// file symbol before it say: nvcc puts a local `fatbinData` at each fatbin, after the STT_FILE
/// symbol of its translation unit.
struct FatbinPlaceSymbol {
  enum class Name : std::uint8_t { unreadable,
                                   other,
                                   fatbin_data };
  std::uint16_t shndx = 0;
  std::uint64_t value = 0;
  bool after_file = false;  ///< an STT_FILE entry comes before it
  Name name = Name::other;
  std::optional<std::string> file_name;  ///< read for a fatbinData after a file symbol; nothing: unreadable
};

/// What the symbol table says of the places in the fatbin sections, in table order; nothing when
/// the table cannot be read. It needs no fatbin, so it is read on a thread of its own while the
/// fatbins are parsed (libtorch_cuda: 236,000 entries, 484 locals in .nv_fatbin, 476 file names
/// spread over 62 MB of string table; 2 ms of a 14 ms inspect when it waited for the parse).
std::optional<std::vector<FatbinPlaceSymbol>> fatbin_place_symbols(const ElfFile& elf) {
  const auto& sections = elf.sections();
  std::vector<bool> fatbin_section(std::min<std::size_t>(sections.size(), 0x10000), false);
  bool any = false;
  for (std::size_t i = 0; i < fatbin_section.size(); ++i)
    if (standard_fatbin_section(sections[i].name)) any = fatbin_section[i] = true;
  if (!any) return std::vector<FatbinPlaceSymbol>{};
  auto table = elf.symbol_table();
  if (!table) return std::nullopt;  // unreadable: attribution is best effort
  // One pass over the entries' fields alone; names are read only for the locals of the fatbin
  // sections and for the file symbols before those that are named fatbinData.
  std::vector<FatbinPlaceSymbol> out;
  constexpr std::uint64_t kNone = ~std::uint64_t{0};
  std::uint64_t file = kNone;
  for (std::uint64_t i = 0; i < table->size(); ++i) {
    const std::uint8_t info = table->info(i);
    if ((info & 0xf) == STT_FILE) {
      file = i;
      continue;
    }
    if ((info >> 4) != STB_LOCAL) continue;
    const std::uint16_t shndx = table->shndx(i);
    if (shndx >= fatbin_section.size() || !fatbin_section[shndx]) continue;
    FatbinPlaceSymbol p;
    p.shndx = shndx;
    p.value = table->value(i);
    p.after_file = file != kNone;
    if (auto sym = table->symbol(i); !sym) p.name = FatbinPlaceSymbol::Name::unreadable;
    else if (sym->name == "fatbinData") p.name = FatbinPlaceSymbol::Name::fatbin_data;
    if (p.name == FatbinPlaceSymbol::Name::fatbin_data && p.after_file)
      if (auto file_sym = table->symbol(file)) p.file_name = std::move(file_sym->name);
    out.push_back(std::move(p));
  }
  return out;
}

/// Fills Fatbin::translation_unit of the fatbins in `fbs` (from the ELF sections named in
/// section_name) from what the symbol table says of their places: the first fatbinData at a
/// fatbin's place names it. A name that cannot be read there leaves every fatbin unattributed,
/// as a table that cannot be read does.
void attribute_translation_units(const ElfFile& elf, const std::optional<std::vector<FatbinPlaceSymbol>>& places,
                                 std::vector<Fatbin>& fbs) {
  if (fbs.empty() || !places || places->empty()) return;
  const auto& sections = elf.sections();
  // Where each fatbin sits, as a symbol gives it: (section index, virtual address).
  using Place = std::pair<std::uint16_t, std::uint64_t>;
  std::map<Place, std::size_t> at;  // -> index in fbs
  for (std::size_t f = 0; f < fbs.size(); ++f) {
    const Fatbin& fb = fbs[f];
    for (std::size_t i = 0; i < sections.size() && i <= 0xffff; ++i) {
      const ElfSection& sec = sections[i];
      if (sec.name != fb.section_name || fb.offset < sec.offset || fb.offset - sec.offset >= sec.size) continue;
      at.emplace(Place{static_cast<std::uint16_t>(i), sec.addr + (fb.offset - sec.offset)}, f);
      break;
    }
  }
  std::vector<std::string> tus(fbs.size());
  for (const FatbinPlaceSymbol& p : *places) {
    const auto it = at.find(Place{p.shndx, p.value});
    if (it == at.end() || !tus[it->second].empty() || !p.after_file) continue;
    if (p.name == FatbinPlaceSymbol::Name::unreadable) return;
    if (p.name != FatbinPlaceSymbol::Name::fatbin_data) continue;
    if (!p.file_name) return;
    tus[it->second] = tu_from_file_symbol(*p.file_name);
  }
  for (std::size_t f = 0; f < fbs.size(); ++f)
    if (!tus[f].empty()) fbs[f].translation_unit = std::move(tus[f]);
}

}  // namespace

namespace {

/// One section searched for embedded fatbins.
struct ScanRegion {
  Bytes bytes;
  std::string section_name;
  std::uint64_t base = 0;     ///< offset of the section in its file
  std::uint64_t address = 0;  ///< its virtual address: fatbins sit at 8-aligned addresses
};

/// A stretch of a region, [begin, end), searched by one worker. A worker that starts a run of
/// chunks does not know yet where the fatbins before it end, so it starts at `begin`; within its
/// run it goes on from where the chunk before stopped. The ordered merge (EmbeddedScan::finish)
/// keeps its finds only where that cannot matter.
struct ScanChunk {
  std::size_t region = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  bool done = false;         ///< searched ahead by a worker
  bool over_budget = false;  ///< that search stopped at kSearchWorkPerByte
  std::uint64_t start = 0;   ///< where that search started (begin, or past a fatbin before it)
  std::uint64_t stop = 0;    ///< where it stopped (past `end` when a fatbin runs on)
  std::vector<Fatbin> found;
};

/// Small enough that a worker's resident pages stay few (each chunk is released when done),
/// large enough that a chunk costs far more than taking it, and that the release of its pages
/// (one madvise, which interrupts the other cores running this process to flush their TLBs)
/// is rare: 1 MiB chunks spent 10% of inspecting cuFFT in those interrupts on two cores.
constexpr std::uint64_t kScanChunk = std::uint64_t{4} << 20;
/// A worker per 8 MiB (about 1.5 ms of search each), plus the caller's thread, which joins the
/// search once it has read the standard sections. At most 8: the caller's thread reads the
/// standard sections meanwhile, which takes longer than 8 threads take over cuBLASLt's 270 MB,
/// and each thread adds a chunk to the resident memory.
constexpr std::uint64_t kMinScanPerThread = std::uint64_t{8} << 20;
constexpr unsigned kMaxScanThreads = 8;
/// Below this much data to search, no worker: small libraries stay on the caller's thread.
/// From it, one worker even below kMinScanPerThread: the caller's thread parses .nv_fatbin
/// meanwhile (libtorch_cuda: 15 MB searched in 2.5 ms on the caller's thread after 8 ms of
/// .nv_fatbin, before one worker took it off that path).
constexpr std::uint64_t kScanWorkerFrom = std::uint64_t{2} << 20;
/// The symbol table is read on a thread of its own from this many entries (a thread costs
/// about 50 us; 64,000 entries take about 0.1 ms to walk).
constexpr std::uint64_t kPlacesThreadFrom = 65536;

/// The work a search may do: entry headers looked at, per 8 bytes searched, plus a constant.
/// Real data costs about one per entry of the fatbins found (each is skipped whole once found);
/// crafted data with a candidate at every aligned word whose entry chain runs to the region's
/// end would cost quadratic time (16 MB took over 15 minutes). The bound keeps the search
/// linear: a search that exceeds it stops, and the file is an error (ErrorKind::limit).
/// The bound is DerivedLimits::search_work_per_8_bytes and search_work_floor (kSearchWorkPer8Bytes
/// and kSearchWorkFloor by default).
std::uint64_t search_budget(std::uint64_t bytes, const DerivedLimits& limits) {
  const std::uint64_t units = bytes / 8;
  const std::uint64_t per = limits.search_work_per_8_bytes;
  const std::uint64_t scaled = per != 0 && units > UINT64_MAX / per ? UINT64_MAX : units * per;
  return scaled > UINT64_MAX - limits.search_work_floor ? UINT64_MAX : scaled + limits.search_work_floor;
}

/// The scan proper: every 8-aligned offset in [from, to) of the region whose 32-bit word is the
/// magic, followed by a header and entry chain that pass plausible_fatbin and Fatbin::parse, is
/// a fatbin; the search resumes at the first aligned offset after it. Appends what it finds to
/// `out` and returns the offset it stopped at: the first one at or past `to` it did not check.
/// `over_budget` is set when the work bound stopped it early.
std::uint64_t walk_region(const ScanRegion& g, const ByteReader& r, std::uint64_t from, std::uint64_t to,
                          std::vector<Fatbin>& out, bool& over_budget, const DerivedLimits& limits) {
  const std::uint64_t size = g.bytes.size();
  const std::uint64_t last = size - kFatbinHeaderSize;  // the last offset a header fits at (size >= 16)
  const auto* data = g.bytes.data();
  std::uint64_t pos = from;
  const std::uint64_t budget = search_budget(to > from ? to - from : 0, limits);
  std::uint64_t work = 0;
  for (; pos < to && pos <= last; pos += 8) {
    std::uint32_t word;
    std::memcpy(&word, data + pos, sizeof word);
    if (word != kFatbinMagic) continue;
    if (work > budget) {
      over_budget = true;
      return to;
    }
    if (!plausible_fatbin(g.bytes, pos, work)) continue;
    auto fb = Fatbin::parse(r, pos, out.size());
    if (!fb) continue;  // a near miss: data that happens to look like a fatbin header
    fb->section = FatbinSection::embedded;
    fb->section_name = g.section_name;
    pos += (fb->size + 7) / 8 * 8 - 8;  // the next aligned offset after it, less the step
    out.push_back(std::move(*fb));
  }
  return pos;
}

/// Finds the fatbins of each region, in offset order, exactly as one sequential walk_region
/// over the whole region does, whatever the number of threads. With more than one, workers
/// search runs of consecutive chunks ahead in the background (start), about four runs per
/// thread, taken in any order; each run begins at its first chunk's start and goes on from
/// where the search stopped, as one walk would. finish then goes through the chunks in order
/// with the true position P, where the sequential scan would be: a chunk wholly inside a fatbin
/// found before it (P >= end) is dropped; a chunk whose search started at P, or before P and
/// found nothing before P, is kept as found (from its first find on the two searches are the
/// same); the rare rest (a search that started past P, or a find inside the fatbin before it,
/// which only crafted data has) is walked again from P. Chunks no worker took are walked by
/// finish itself, which is all of them with one thread.
class EmbeddedScan {
 public:
  /// `regions` (and what the hooks refer to) must outlive the scan.
  EmbeddedScan(const std::vector<ScanRegion>& regions, const std::string& name, const ReleaseHook& release,
               const ReleaseHook& prefetch, const DataHook& next_data = {}, const DerivedLimits& limits = {})
      : regions_(regions), release_(release), prefetch_(prefetch), next_data_(next_data), limits_(limits) {
    for (std::size_t i = 0; i < regions.size(); ++i) {
      const ScanRegion& g = regions[i];
      readers_.emplace_back(g.bytes, name, g.base);
      if (g.bytes.size() < kFatbinHeaderSize) continue;
      for (std::uint64_t b = (8 - g.address % 8) % 8; b < g.bytes.size(); b += kScanChunk)
        chunks_.push_back(ScanChunk{i, b, std::min<std::uint64_t>(g.bytes.size(), b + kScanChunk), false, false, 0, 0, {}});
    }
  }
  EmbeddedScan(const EmbeddedScan&) = delete;
  EmbeddedScan& operator=(const EmbeddedScan&) = delete;
  ~EmbeddedScan() {
    next_ = runs_;  // abandoned (the caller failed): the workers take no further run
    join();
  }

  /// Starts `threads - 1` workers on the chunks; the caller's thread joins them in finish.
  void start(unsigned threads) {
    threads = static_cast<unsigned>(std::min<std::size_t>(threads, chunks_.size()));
    if (threads <= 1) return;
    run_ = std::max<std::size_t>(1, chunks_.size() / (std::size_t{4} * threads));
    runs_ = (chunks_.size() + run_ - 1) / run_;
    for (unsigned t = 1; t < threads; ++t) pool_.emplace_back([this] { work(); });
  }

  /// Waits for the chunks searched ahead and merges them; see the class comment.
  /// After finish: the first search stopped by the work bound, as an error message, or "".
  const std::string& problem() const { return problem_; }

  std::vector<std::vector<Fatbin>> finish() {
    if (!pool_.empty()) work();
    join();
    std::vector<std::vector<Fatbin>> out(regions_.size());
    std::vector<std::size_t> ahead(regions_.size());  // a bound on each region's count: cuFFT has 24,000
    for (const auto& c : chunks_) ahead[c.region] += c.found.size();
    for (std::size_t r = 0; r < out.size(); ++r) out[r].reserve(ahead[r]);
    std::uint64_t pos = 0;  // P in the region being merged
    for (std::size_t i = 0; i < chunks_.size(); ++i) {
      ScanChunk& c = chunks_[i];
      if (i == 0 || chunks_[i - 1].region != c.region) pos = c.begin;
      if (pos >= c.end) continue;
      const std::uint64_t base = regions_[c.region].base;
      auto& found = out[c.region];
      bool over = false;
      if (c.done && c.start <= pos && (c.start == pos || c.found.empty() || c.found.front().offset - base >= pos)) {
        for (auto& fb : c.found) found.push_back(std::move(fb));
        pos = std::max(pos, c.stop);
        over = c.over_budget;
      } else {
        pos = walk(c, pos, found, over);
      }
      if (over && problem_.empty()) {
        const ScanRegion& g = regions_[c.region];
        problem_ = std::string(readers_[c.region].name()) + ": embedded-fatbin search of section " + g.section_name +
                   " at " + hex(g.base + c.begin) + ": more than " +
                   std::to_string(search_budget(c.end - c.begin, limits_)) + " fatbin entry headers checked in " +
                   hex(c.end - c.begin) +
                   " bytes (the limit; crafted data?): the search was stopped (raise it with ARCHGUARD_MAX_SEARCH_WORK)";
      }
    }
    for (auto& found : out)
      for (std::size_t i = 0; i < found.size(); ++i) found[i].index = i;
    return out;
  }

 private:
  std::uint64_t walk(const ScanChunk& c, std::uint64_t from, std::vector<Fatbin>& out, bool& over_budget) const {
    const ScanRegion& g = regions_[c.region];
    if (next_data_) {  // holes hold no magic: skip them (to an aligned offset, as the walk steps)
      const std::uint64_t d = next_data_(g.base + from);
      if (d > g.base + from) {
        const std::uint64_t skip = (d - g.base - from) / 8 * 8;
        if (skip >= c.end - from) return from + (c.end - from + 7) / 8 * 8;
        from += skip;
      }
    }
    if (prefetch_) prefetch_(g.base + from, c.end - from);
    const std::uint64_t stop = walk_region(g, readers_[c.region], from, c.end, out, over_budget, limits_);
    if (release_) release_(g.base + from, c.end - from);
    return stop;
  }
  void work() {
    for (std::size_t r; (r = next_.fetch_add(1)) < runs_;) {
      const std::size_t first = r * run_, last = std::min(chunks_.size(), first + run_);
      for (std::size_t i = first; i < last; ++i) {
        ScanChunk& c = chunks_[i];
        c.start = i > first && chunks_[i - 1].region == c.region ? chunks_[i - 1].stop : c.begin;  // stop >= end
        c.stop = c.start < c.end ? walk(c, c.start, c.found, c.over_budget) : c.start;
        c.done = true;
      }
    }
  }
  void join() {
    for (auto& t : pool_) t.join();
    pool_.clear();
  }

  const std::vector<ScanRegion>& regions_;
  const ReleaseHook& release_;
  const ReleaseHook& prefetch_;
  DataHook next_data_;  // a copy: the default argument is a temporary
  DerivedLimits limits_;
  std::vector<ByteReader> readers_;
  std::vector<ScanChunk> chunks_;
  std::size_t run_ = 1;   ///< chunks per run
  std::size_t runs_ = 0;  ///< runs handed to workers (0 with one thread)
  std::atomic<std::size_t> next_{0};
  std::vector<std::thread> pool_;
  std::string problem_;
};

/// The sections that may hold fatbins kept as data: loaded data (SHT_PROGBITS, SHF_ALLOC, not
/// SHF_EXECINSTR) other than the two standard sections; unwind tables and the GOT hold none,
/// and neither does a cubin.
std::vector<ScanRegion> embedded_regions(const ElfFile& elf) {
  std::vector<ScanRegion> out;
  if (elf.machine() == kElfMachineCuda) return out;
  for (const auto& s : elf.sections()) {
    if (s.type != SHT_PROGBITS || (s.flags & SHF_ALLOC) == 0 || (s.flags & SHF_EXECINSTR) != 0) continue;
    if (standard_fatbin_section(s.name) || s.size < kFatbinHeaderSize + kEntryHeaderMinSize) continue;
    if (s.name.starts_with(".eh_frame") || s.name.starts_with(".gcc_except_table") || s.name.starts_with(".got")) continue;
    auto bytes = elf.section_bytes(s);
    if (!bytes) continue;  // a section past the end holds nothing to find; the standard ones were checked
    out.push_back(ScanRegion{*bytes, std::string(s.name), s.offset, s.addr});
  }
  // Sections of a valid file do not overlap; 20,000 headers naming the same 16 MB would have
  // the search read it 20,000 times. A section overlapping one before it (in file order) is
  // not searched again: the bytes searched stay within the file's size.
  std::vector<std::size_t> order(out.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&out](std::size_t a, std::size_t b) { return out[a].base < out[b].base; });
  std::vector<bool> keep(out.size(), false);
  std::uint64_t covered = 0;  // the end of the last kept section, in file order
  for (std::size_t i : order) {
    if (out[i].base < covered) continue;
    keep[i] = true;
    covered = out[i].base + out[i].bytes.size();
  }
  std::vector<ScanRegion> kept;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (keep[i]) kept.push_back(std::move(out[i]));
  return kept;
}

}  // namespace

std::uint64_t embedded_scan_chunk_bytes() { return kScanChunk; }

std::vector<Fatbin> find_embedded_fatbins(Bytes bytes, const std::string& name, const std::string& section_name,
                                          std::uint64_t base, std::uint64_t address, const ReleaseHook& release,
                                          const ReleaseHook& prefetch, unsigned threads, std::string* problem,
                                          const DerivedLimits& limits) {
  const std::vector<ScanRegion> regions{ScanRegion{bytes, section_name, base, address}};
  EmbeddedScan scan(regions, name, release, prefetch, {}, limits);
  scan.start(threads);
  auto found = std::move(scan.finish().front());
  if (problem != nullptr) *problem = scan.problem();
  return found;
}

ObjectFatbins ObjectFatbins::of_elf(const ElfFile& elf, std::string path, std::string archive, std::string member,
                                    std::vector<Fatbin> fatbins) {
  ObjectFatbins obj;
  obj.path = std::move(path);
  obj.archive = std::move(archive);
  obj.member = std::move(member);
  obj.elf_type = elf.type();
  obj.machine = elf.machine();
  obj.fatbins = std::move(fatbins);
  return obj;
}

namespace {

/// The fatbins at the offsets `known` gives for `regions` (what an earlier search of the same
/// file found), each validated as the search validates what it finds; nothing when `known` does
/// not describe exactly these regions or one of its fatbins does not parse.
std::optional<std::vector<std::vector<Fatbin>>> known_embedded(const std::vector<ScanRegion>& regions,
                                                               const EmbeddedFinds& known, const std::string& name) {
  if (known.sections.size() != regions.size()) return std::nullopt;
  std::vector<std::vector<Fatbin>> out(regions.size());
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const ScanRegion& g = regions[i];
    const EmbeddedFinds::Section& k = known.sections[i];
    if (k.name != g.section_name || k.offset != g.base || k.size != g.bytes.size()) return std::nullopt;
    const ByteReader r(g.bytes, name, g.base);
    std::uint64_t end = 0;  // fatbins are in offset order and do not overlap
    for (const std::uint64_t at : k.fatbins) {
      if (at < g.base + end || (at - g.base) % 8 != 0 || at - g.base > g.bytes.size() - kFatbinHeaderSize) return std::nullopt;
      const std::uint64_t rel = at - g.base;
      std::uint32_t word;
      std::memcpy(&word, g.bytes.data() + rel, sizeof word);
      std::uint64_t work = 0;
      if (word != kFatbinMagic || !plausible_fatbin(g.bytes, rel, work)) return std::nullopt;
      auto fb = Fatbin::parse(r, rel, out[i].size());
      if (!fb) return std::nullopt;
      fb->section = FatbinSection::embedded;
      fb->section_name = g.section_name;
      end = rel + fb->size;
      out[i].push_back(std::move(*fb));
    }
  }
  return out;
}

/// The addresses of the pointers of the version-2 wrappers in .nvFatBinSegment (none in a
/// relocatable object or a file without .nv_fatbin); an unreadable segment has none.
std::vector<std::uint64_t> wrapper_slots(const ElfFile& elf) {
  std::vector<std::uint64_t> slots;
  if (const ElfSection* seg = elf.find(".nvFatBinSegment");
      seg != nullptr && elf.type() != kElfTypeRel && elf.find(".nv_fatbin") != nullptr) {
    if (auto seg_bytes = elf.section_bytes(*seg)) {
      ByteReader w(*seg_bytes, elf.name(), seg->offset);
      for (std::uint64_t o = 0; o + 24 <= w.size(); o += 24) {
        auto magic = w.u32(o, "fatbin wrapper");
        auto version = w.u32(o + 4, "fatbin wrapper");
        if (magic && version && *magic == kFatbinWrapperMagic && *version == 2) slots.push_back(seg->addr + o + 8);
      }
    }
  }
  return slots;
}

/// Where the wrappers' pointers at `slots` point, sorted: the relocations indexed once.
std::vector<std::uint64_t> wrapper_pointers(const ElfFile& elf, const std::vector<std::uint64_t>& slots) {
  const PointerIndex index(elf, slots);
  std::vector<std::uint64_t> pointers;
  for (std::uint64_t slot : slots)
    if (auto ptr = index.at(slot)) pointers.push_back(*ptr);
  std::sort(pointers.begin(), pointers.end());
  return pointers;
}

/// What this read found, for a later read of the same file (`known`).
void record_finds(EmbeddedFinds& finds, const std::vector<ScanRegion>& regions,
                  const std::vector<std::vector<Fatbin>>& embedded_found,
                  std::vector<std::pair<std::uint64_t, bool>> answers) {
  finds.no_kernels = std::move(answers);
  finds.sections.clear();
  for (std::size_t i = 0; i < regions.size(); ++i) {
    EmbeddedFinds::Section sec{regions[i].section_name, regions[i].base, regions[i].bytes.size(), {}};
    for (const Fatbin& fb : embedded_found[i]) sec.fatbins.push_back(fb.offset);
    finds.sections.push_back(std::move(sec));
  }
}

}  // namespace

Result<std::vector<Fatbin>> read_elf_fatbins(const ElfFile& elf, const ReleaseHook& release, const ReleaseHook& prefetch,
                                             unsigned threads, const DataHook& next_data, bool search_embedded,
                                             const EmbeddedFinds* known, EmbeddedFinds* finds_out, const DerivedLimits& limits) {
  // Fatbins kept as data in other loaded, non-executable sections (cuFFT's .ldata, cuBLASLt's
  // .cask_resource, .rodata ...): hundreds of MB in NVIDIA's large libraries, searched in the
  // background while the standard sections are read. Cubins have no such fatbins. Where an
  // earlier search of the same file is known, its finds are parsed instead.
  const std::vector<ScanRegion> regions = search_embedded ? embedded_regions(elf) : std::vector<ScanRegion>{};
  std::optional<std::vector<std::vector<Fatbin>>> from_known;
  if (known != nullptr) from_known = known_embedded(regions, *known, elf.name());
  static const std::vector<ScanRegion> kNoRegions;
  const std::vector<ScanRegion>& searched = from_known ? kNoRegions : regions;
  std::uint64_t total = 0;
  for (const auto& g : searched) total += g.bytes.size();
  const unsigned allowed = std::clamp(threads, 1u, kMaxScanThreads);
  const std::uint64_t wanted = total < kScanWorkerFrom ? 1 : 1 + (total + kMinScanPerThread - 1) / kMinScanPerThread;
  EmbeddedScan embedded(searched, elf.name(), release, prefetch, next_data, limits);
  embedded.start(static_cast<unsigned>(std::min<std::uint64_t>(wanted, allowed)));
  // The symbol table's word on the fatbins' places, read meanwhile where it is large and a
  // thread is allowed; it is joined before this returns, on every path.
  std::future<std::optional<std::vector<FatbinPlaceSymbol>>> places_read;
  if (threads >= 2)
    if (const auto table = elf.symbol_table(); table && table->size() >= kPlacesThreadFrom)
      places_read = std::async(std::launch::async, [&elf] { return fatbin_place_symbols(elf); });

  std::vector<Fatbin> out;
  // Linear: the relocations at the wrappers' pointers indexed in one pass (not all of them:
  // cuBLASLt has 375,000, sorting them took a tenth of the run), once for every .nv_fatbin
  // section, fatbins found by offset (a crafted file with many wrappers and relocations took
  // quadratic time here).
  const std::vector<std::uint64_t> slots = wrapper_slots(elf);
  std::optional<std::vector<std::uint64_t>> pointers;  // where they point, sorted (built on first use)
  // The device-link probe, answered from `known` where it was answered before.
  std::vector<std::pair<std::uint64_t, bool>> answers;
  auto no_kernel = [&](const Fatbin& fb) {
    std::optional<bool> kept;
    if (known != nullptr)
      for (const auto& [offset, answer] : known->no_kernels)
        if (offset == fb.offset) {
          kept = answer;
          break;
        }
    const bool answer = kept ? *kept : defines_no_kernel(fb, elf.name());
    answers.emplace_back(fb.offset, answer);
    return answer;
  };

  for (auto [name, kind] : {std::pair{".nv_fatbin", FatbinSection::nv_fatbin},
                            std::pair{"__nv_relfatbin", FatbinSection::nv_relfatbin}}) {
    // Every section of the name, in section order: a file may have two (a linker script that
    // kept them apart, or crafted); reading only the first would drop the second in silence.
    for (const ElfSection& section : elf.sections()) {
      if (section.name != name) continue;
      const ElfSection* s = &section;
      AG_TRY(Bytes bytes, elf.section_bytes(*s));
      AG_TRY(std::vector<Fatbin> fbs, Fatbin::parse_all(bytes, elf.name(), kind, s->offset, release, next_data));
      if (kind == FatbinSection::nv_fatbin && elf.type() != kElfTypeRel) {
        // Wrappers of version 2 point at the device-link fatbin (rule 9).
        if (!pointers && !slots.empty()) pointers = wrapper_pointers(elf, slots);
        if (pointers) {
          // The pointers into this section, matched with its fatbins by offset.
          std::vector<std::pair<std::uint64_t, std::size_t>> by_offset;  // fbs is in offset order
          for (std::size_t i = 0; i < fbs.size(); ++i) by_offset.emplace_back(fbs[i].offset, i);
          for (auto p = std::lower_bound(pointers->begin(), pointers->end(), s->addr);
               p != pointers->end() && *p - s->addr < s->size; ++p) {
            const std::uint64_t file_offset = *p - s->addr + s->offset;
            auto hit = std::lower_bound(by_offset.begin(), by_offset.end(), std::pair{file_offset, std::size_t{0}});
            if (hit != by_offset.end() && hit->first == file_offset) fbs[hit->second].linked = true;
          }
        }
      }
      // nvcc 13 executables and shared objects built without -rdc carry no version-2 wrapper: their
      // device-link fatbin, first in .nv_fatbin, is recognised as in read_region (it defines no
      // kernel; found by the H200 fatbin-composition matrix, docs/gpu-validation.md).
      if (kind == FatbinSection::nv_fatbin && elf.type() != kElfTypeRel && fbs.size() > 1 &&
          std::none_of(fbs.begin(), fbs.end(), [](const Fatbin& f) { return f.linked; }) && no_kernel(fbs.front()))
        fbs.front().device_link = true;
      for (auto& fb : fbs) {
        if (fb.linked) fb.device_link = no_kernel(fb);
        fb.index = out.size();
        fb.section_name = name;
        out.push_back(std::move(fb));
      }
    }
  }
  // Read here when no thread did, and not at all for a file without fatbins in those sections.
  const auto places = places_read.valid() ? places_read.get()
                      : out.empty()       ? std::nullopt
                                          : fatbin_place_symbols(elf);
  attribute_translation_units(elf, places, out);
  auto embedded_found = from_known ? std::move(*from_known) : embedded.finish();
  if (!embedded.problem().empty()) return Error{ErrorKind::limit, embedded.problem()};
  if (finds_out != nullptr) record_finds(*finds_out, regions, embedded_found, std::move(answers));
  std::size_t count = out.size();
  for (const auto& found : embedded_found) count += found.size();
  out.reserve(count);
  for (auto& found : embedded_found) {
    for (auto& fb : found) {
      fb.index = out.size();
      out.push_back(std::move(fb));
    }
  }
  return out;
}

std::string entry_fingerprint(const FatbinEntry& e) {
  std::string s;
  for (const std::uint64_t v : {e.offset, std::uint64_t{e.raw_kind}, std::uint64_t{e.arch.sm}, std::uint64_t(e.arch.suffix),
                                e.flags, std::uint64_t(e.compression), std::uint64_t{e.header_size}, std::uint64_t{e.compressed_size},
                                e.uncompressed_size, e.stored_size, std::uint64_t{e.payload.size()}}) {
    if (!s.empty()) s += ' ';
    s += std::to_string(v);
  }
  return s;
}

std::vector<Image> Fatbin::images() const {
  std::vector<Image> out;
  out.reserve(entries.size());
  for (const auto& e : entries) {
    Image im;
    im.kind = e.kind;
    im.arch = e.arch;
    if (e.kind == CodeKind::ptx) im.ptx_isa = e.version;
    im.relocatable = section == FatbinSection::nv_relfatbin;
    im.device_link = device_link;
    out.push_back(im);
  }
  return out;
}

std::string Fatbin::identifier() const {
  for (const auto& e : entries)
    if (!e.identifier.empty()) return e.identifier;
  return {};
}

bool Fatbin::only_specific() const {
  if (entries.empty()) return false;
  return std::all_of(entries.begin(), entries.end(),
                     [](const FatbinEntry& e) { return e.arch.suffix != Suffix::none; });
}

std::string cuobjdump_base(std::string_view path) {
  if (auto slash = path.find_last_of('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
  if (auto dot = path.find_last_of('.'); dot != std::string_view::npos && dot != 0) path = path.substr(0, dot);
  return std::string(path);
}

std::string cuobjdump_name(const FatbinEntry& entry, std::string_view base, std::size_t n) {
  std::string arch = "sm_" + std::to_string(entry.arch.sm);
  if (entry.arch.suffix == Suffix::a) arch += 'a';
  if (entry.arch.suffix == Suffix::f && entry.kind == CodeKind::ptx) arch += 'f';
  const char* ext = entry.kind == CodeKind::ptx ? "ptx" : entry.kind == CodeKind::ltoir ? "nvvm"
                                                                                        : "cubin";
  if (!entry.identifier.empty()) return cuobjdump_base(entry.identifier) + "." + arch + "." + ext;
  return std::string(base) + "." + std::to_string(n) + "." + arch + "." + ext;
}

}  // namespace archguard
