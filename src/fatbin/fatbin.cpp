// SPDX-License-Identifier: Apache-2.0
// Fatbin and entry-header parsing. Field offsets: shared/reference/fatbin-format.md.
#include <archguard/fatbin.hpp>

#include "try.hpp"

#include <algorithm>

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

/// Decodes the entry at `e` (absolute in `r`), which must end by `end`.
Result<FatbinEntry> parse_entry(const ByteReader& r, std::uint64_t e, std::uint64_t end,
                                std::size_t fatbin_index, std::size_t index) {
  const std::string what = entry_what(fatbin_index, index);
  if (end - e < kEntryHeaderMinSize)
    return r.error_at(e, what, "entry header of 0x40 bytes runs past the fatbin end " + hex(r.base() + end));
  FatbinEntry x;
  x.index = index;
  x.offset = r.base() + e;
  AG_TRY(x.raw_kind, r.u16(e + 0x00, what));
  AG_TRY(x.header_size, r.u32(e + 0x04, what));
  AG_TRY(x.stored_size, r.u64(e + 0x08, what));
  AG_TRY(x.compressed_size, r.u32(e + 0x10, what));
  AG_TRY(const std::uint32_t options_at, r.u32(e + 0x14, what));
  AG_TRY(const std::uint16_t minor, r.u16(e + 0x18, what));
  AG_TRY(const std::uint16_t major, r.u16(e + 0x1A, what));
  AG_TRY(const std::uint32_t arch, r.u32(e + 0x1C, what));
  AG_TRY(const std::uint32_t id_offset, r.u32(e + 0x20, what));
  AG_TRY(const std::uint32_t id_length, r.u32(e + 0x24, what));
  AG_TRY(x.flags, r.u64(e + 0x28, what));
  AG_TRY(x.uncompressed_size, r.u64(e + 0x38, what));

  switch (x.raw_kind) {
    case kEntryKindPtx: x.kind = CodeKind::ptx; break;
    case kEntryKindElf:
    case kEntryKindOldCubin: x.kind = CodeKind::sass; break;
    case kEntryKindLtoIr: x.kind = CodeKind::ltoir; break;
    default:
      return r.error_at(e, what, "unknown image kind " + hex(x.raw_kind) + " (expected 0x1 ptx, 0x2 elf, 0x8 lto-ir)");
  }
  if (x.header_size < kEntryHeaderMinSize)
    return r.error_at(e + 4, what, "entry header size " + hex(x.header_size) + " is below the minimum 0x40");
  const auto payload_at = checked_add(e, x.header_size);
  if (!payload_at || *payload_at > end)
    return r.error_at(e + 4, what, "entry header size " + hex(x.header_size) + " runs past the fatbin end " + hex(r.base() + end));
  const auto entry_end = checked_add(*payload_at, x.stored_size);
  if (!entry_end || *entry_end > end)
    return r.error_at(e + 8, what, "payload size " + hex(x.stored_size) + " runs past the fatbin end " + hex(r.base() + end));
  if (x.stored_size == 0) return r.error_at(e + 8, what, "payload size is 0");
  if (x.compressed_size > x.stored_size)
    return r.error_at(e + 0x10, what, "compressed size " + hex(x.compressed_size) + " exceeds the stored size " + hex(x.stored_size));

  const bool lz4 = (x.flags & kEntryFlagLz4) != 0;
  const bool zstd = (x.flags & kEntryFlagZstd) != 0;
  if (lz4 && zstd) return r.error_at(e + 0x28, what, "flags " + hex(x.flags) + " claim both lz4 and zstd compression");
  x.compression = lz4 ? Compression::lz4 : zstd ? Compression::zstd : Compression::none;
  if (x.compression != Compression::none && x.uncompressed_size == 0)
    return r.error_at(e + 0x38, what, "compressed entry has an uncompressed size of 0");
  x.debug = (x.flags & kEntryFlagDebug) != 0;

  const bool a = (x.flags & kEntryFlagArchSpecific) != 0;
  const bool f = (x.flags & kEntryFlagFamilySpecific) != 0;
  if (a && f) return r.error_at(e + 0x28, what, "flags " + hex(x.flags) + " claim both 'a' and 'f' targets");
  if (arch == 0 || arch > 0xffff) return r.error_at(e + 0x1C, what, "architecture " + hex(arch) + " is not valid");
  x.arch = Arch{arch, a ? Suffix::a : f ? Suffix::f : Suffix::none};
  x.version = Version2{major, minor};

  const std::uint64_t entry_size = *entry_end - e;
  if (id_offset != 0) {
    const auto id_end = checked_add(id_offset, id_length);
    if (!id_end || *id_end > entry_size)
      return r.error_at(e + 0x20, what, "identifier at +" + hex(id_offset) + " of " + hex(id_length) +
                                            " bytes runs past the entry end +" + hex(entry_size));
    AG_TRY(Bytes id, r.span(e + id_offset, id_length, what));
    x.identifier = padded_string(id);
  }
  if (options_at != 0) {
    const auto rec_end = checked_add(options_at, 8);
    if (!rec_end || *rec_end > x.header_size)
      return r.error_at(e + 0x14, what, "options record at +" + hex(options_at) + " lies outside the entry header of " + hex(x.header_size) + " bytes");
    AG_TRY(const std::uint32_t opt_offset, r.u32(e + options_at, what));
    AG_TRY(const std::uint32_t opt_length, r.u32(e + options_at + 4, what));
    const auto opt_end = checked_add(opt_offset, opt_length);
    if (!opt_end || *opt_end > entry_size)
      return r.error_at(e + options_at, what, "options at +" + hex(opt_offset) + " of " + hex(opt_length) +
                                                  " bytes run past the entry end +" + hex(entry_size));
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
  for (const auto& e : fb.entries) {
    if (e.kind != CodeKind::sass) continue;
    auto image = decompress(e, name);
    if (!image) return false;
    auto kernels = list_kernels(e, *image, name);
    return kernels && kernels->empty();
  }
  return false;
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
  switch (c) {
    case Compression::none: return "none";
    case Compression::lz4: return "lz4";
    case Compression::zstd: return "zstd";
  }
  return "?";
}

std::string_view to_string(FatbinSection s) {
  switch (s) {
    case FatbinSection::nv_fatbin: return ".nv_fatbin";
    case FatbinSection::nv_relfatbin: return "__nv_relfatbin";
    case FatbinSection::memory: return "memory";
  }
  return "?";
}

Result<Fatbin> Fatbin::parse(const ByteReader& r, std::uint64_t offset, std::size_t index) {
  const std::string what = "fatbin " + std::to_string(index);
  AG_TRY(const std::uint32_t magic, r.u32(offset, what));
  if (magic != kFatbinMagic)
    return r.error_at(offset, what, "bad magic " + hex(magic) + " (expected " + hex(kFatbinMagic) + ")");
  Fatbin fb;
  fb.index = index;
  fb.offset = r.base() + offset;
  AG_TRY(fb.version, r.u16(offset + 4, what));
  AG_TRY(const std::uint16_t header_size, r.u16(offset + 6, what));
  AG_TRY(const std::uint64_t fat_size, r.u64(offset + 8, what));
  if (header_size < kFatbinHeaderSize)
    return r.error_at(offset + 6, what, "header size " + hex(header_size) + " is below 0x10");
  const auto first = checked_add(offset, header_size);
  const auto end = first ? checked_add(*first, fat_size) : std::nullopt;
  if (!end || *end > r.size())
    return r.error_at(offset + 8, what, "size " + hex(fat_size) + " runs past the section end " + hex(r.base() + r.size()));
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
                                              std::uint64_t base, const ReleaseHook& release) {
  ByteReader r(bytes, std::move(name), base);
  std::vector<Fatbin> out;
  std::uint64_t pos = 0;
  while (pos < r.size()) {
    // zero padding between fatbins and at the end of the section
    if (bytes[static_cast<std::size_t>(pos)] == std::byte{0}) {
      ++pos;
      continue;
    }
    AG_TRY(Fatbin fb, Fatbin::parse(r, pos, out.size()));
    fb.section = section;
    if (release) release(base + pos, fb.size);
    pos += fb.size;
    out.push_back(std::move(fb));
  }
  return out;
}

Result<std::vector<Fatbin>> read_elf_fatbins(const ElfFile& elf, const ReleaseHook& release) {
  std::vector<Fatbin> out;
  for (auto [name, kind] : {std::pair{".nv_fatbin", FatbinSection::nv_fatbin},
                            std::pair{"__nv_relfatbin", FatbinSection::nv_relfatbin}}) {
    const ElfSection* s = elf.find(name);
    if (s == nullptr) continue;
    AG_TRY(Bytes bytes, elf.section_bytes(*s));
    AG_TRY(std::vector<Fatbin> fbs, Fatbin::parse_all(bytes, elf.name(), kind, s->offset, release));
    if (kind == FatbinSection::nv_fatbin && elf.type() != kElfTypeRel) {
      // Wrappers of version 2 point at the device-link fatbin (rule 9).
      if (const ElfSection* seg = elf.find(".nvFatBinSegment"); seg != nullptr) {
        auto seg_bytes = elf.section_bytes(*seg);
        if (seg_bytes) {
          // Linear: relocations indexed once, fatbins found by offset (a crafted file with
          // many wrappers and relocations took quadratic time here).
          ByteReader w(*seg_bytes, elf.name(), seg->offset);
          const PointerIndex pointers(elf);
          std::vector<std::pair<std::uint64_t, std::size_t>> by_offset;  // fbs is in offset order
          for (std::size_t i = 0; i < fbs.size(); ++i) by_offset.emplace_back(fbs[i].offset, i);
          for (std::uint64_t o = 0; o + 24 <= w.size(); o += 24) {
            auto magic = w.u32(o, "fatbin wrapper");
            auto version = w.u32(o + 4, "fatbin wrapper");
            if (!magic || !version || *magic != kFatbinWrapperMagic || *version != 2) continue;
            auto ptr = pointers.at(seg->addr + o + 8);
            if (!ptr || *ptr < s->addr || *ptr - s->addr >= s->size) continue;
            const std::uint64_t file_offset = *ptr - s->addr + s->offset;
            auto hit = std::lower_bound(by_offset.begin(), by_offset.end(), std::pair{file_offset, std::size_t{0}});
            if (hit != by_offset.end() && hit->first == file_offset) fbs[hit->second].linked = true;
          }
        }
      }
    }
    // nvcc 13 executables and shared objects built without -rdc carry no version-2 wrapper: their
    // device-link fatbin, first in .nv_fatbin, is recognised as in read_region (it defines no
    // kernel; found by the H200 fatbin-composition matrix, docs/gpu-validation.md).
    if (kind == FatbinSection::nv_fatbin && elf.type() != kElfTypeRel && fbs.size() > 1 &&
        std::none_of(fbs.begin(), fbs.end(), [](const Fatbin& f) { return f.linked; }) &&
        defines_no_kernel(fbs.front(), elf.name()))
      fbs.front().device_link = true;
    for (auto& fb : fbs) {
      if (fb.linked) fb.device_link = defines_no_kernel(fb, elf.name());
      fb.index = out.size();
      out.push_back(std::move(fb));
    }
  }
  return out;
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
  const char* ext = entry.kind == CodeKind::ptx ? "ptx" : entry.kind == CodeKind::ltoir ? "nvvm" : "cubin";
  if (!entry.identifier.empty()) return cuobjdump_base(entry.identifier) + "." + arch + "." + ext;
  return std::string(base) + "." + std::to_string(n) + "." + arch + "." + ext;
}

}  // namespace archguard
