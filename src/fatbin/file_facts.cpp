// SPDX-License-Identifier: Apache-2.0
// A file's facts as a record (file_facts.hpp): unsigned LEB128 numbers and length-prefixed
// strings, in the order of the fields of ObjectFatbins, Fatbin and FatbinEntry.
#include "fatbin/file_facts.hpp"

#include "common/endian.hpp"
#include "common/record.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>

namespace archguard::detail {
namespace {

using common::Reader;
using common::Writer;

// Bumped with any change of what a record holds.
constexpr std::uint64_t kFormat = 2;
// The format of a StampedValues record (4; 2 and 3 were records of files without device code
// alone, 1 of doctor's step 2 alone).
constexpr std::uint64_t kTreeFormat = 4;
constexpr std::uint64_t kNoPayload = std::numeric_limits<std::uint64_t>::max();

std::string suffix_of(const std::string& s, const std::string& path, bool& fits) {
  if (s.compare(0, path.size(), path) != 0) {
    fits = false;
    return {};
  }
  return s.substr(path.size());
}

void put_entry(Writer& w, const FatbinEntry& e, std::uint64_t payload_at) {
  w.nums(e.index, e.offset, e.raw_kind, e.kind, e.arch.sm, e.arch.suffix, e.version.major, e.version.minor, e.header_size,
         e.stored_size, e.compressed_size, e.uncompressed_size, e.compression, e.flags, e.debug);
  w.str(e.identifier);
  w.str(e.options);
  w.bytes(e.extension);
  w.nums(payload_at, e.payload.size());
}

FatbinEntry get_entry(Reader& r, Bytes whole) {
  constexpr auto u16 = std::numeric_limits<std::uint16_t>::max();
  constexpr auto u32 = std::numeric_limits<std::uint32_t>::max();
  constexpr auto any = std::numeric_limits<std::uint64_t>::max();
  FatbinEntry e;
  e.index = r.num();
  e.offset = r.num();
  e.raw_kind = static_cast<std::uint16_t>(r.upto(u16));
  e.kind = static_cast<CodeKind>(r.upto(static_cast<std::uint64_t>(CodeKind::ltoir)));
  e.arch.sm = static_cast<unsigned>(r.upto(u32));
  e.arch.suffix = static_cast<Suffix>(r.upto(static_cast<std::uint64_t>(Suffix::f)));
  e.version.major = static_cast<unsigned>(r.upto(u32));
  e.version.minor = static_cast<unsigned>(r.upto(u32));
  e.header_size = static_cast<std::uint32_t>(r.upto(u32));
  e.stored_size = r.upto(any);
  e.compressed_size = static_cast<std::uint32_t>(r.upto(u32));
  e.uncompressed_size = r.upto(any);
  e.compression = static_cast<Compression>(r.upto(static_cast<std::uint64_t>(Compression::zstd)));
  e.flags = r.num();
  e.debug = r.upto(1) == 1;
  e.identifier = r.str();
  e.options = r.str();
  const Bytes ext = r.span();
  e.extension.assign(ext.begin(), ext.end());
  const std::uint64_t at = r.num(), size = r.num();
  if (at == kNoPayload) {
    if (size != 0) r.ok = false;
  } else if (at > whole.size() || size > whole.size() - at) {
    r.ok = false;  // the record does not fit these bytes
  } else if (r.ok) {
    e.payload = whole.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(size));
  }
  return e;
}

}  // namespace

std::string file_facts_key(const std::string& identity, const ScanOptions& options, bool named_directly) {
  const DerivedLimits& l = options.limits;
  const InflateBudget& b = options.budget;  // an archive's reading depends on them
  return identity + " | file facts " + std::to_string(kFormat) + (named_directly ? " named" : " walked") +
         (options.embedded ? " embedded" : " standard") + " depth " + std::to_string(options.max_depth) + " limits " +
         std::to_string(l.max_name_length) + " " + std::to_string(l.max_kernel_name_bytes) + " " +
         std::to_string(l.search_work_per_8_bytes) + " " + std::to_string(l.search_work_floor) + " member " +
         std::to_string(options.max_member_size) + " inflate " + std::to_string(b.per_input) + " " + std::to_string(b.per_run) + " " +
         std::to_string(b.max_ratio) + " " + std::to_string(b.ratio_floor);
}

std::optional<std::vector<std::byte>> encode_file_facts(const ScanReport& report, std::size_t objects_begin,
                                                        std::size_t skipped_begin, Bytes whole, const std::string& path) {
  Writer w;
  bool fits = true;
  w.num(report.skipped.size() - skipped_begin);
  for (std::size_t i = skipped_begin; i < report.skipped.size(); ++i) w.str(suffix_of(report.skipped[i], path, fits));
  w.num(report.objects.size() - objects_begin);
  const std::byte* const lo = whole.data();
  const std::byte* const hi = whole.data() + whole.size();
  for (std::size_t i = objects_begin; i < report.objects.size() && fits; ++i) {
    const ObjectFatbins& o = report.objects[i];
    // An archive member is kept only without device code (a static library's host objects,
    // listed as cuobjdump lists them): the payloads of one with device code lie in bytes
    // inflated or copied out of the archive, not in `whole`.
    const bool member = !o.archive.empty() || !o.member.empty();
    if ((member && !o.fatbins.empty()) || !o.loaded_by.empty()) return std::nullopt;
    w.str(suffix_of(o.path, path, fits));
    w.num(member ? 1 : 0);
    if (member) {
      w.str(suffix_of(o.archive, path, fits));
      w.str(o.member);
    }
    w.nums(o.elf_type, o.machine, o.pe, o.pie);
    w.str(o.identity);
    w.num(o.fatbins.size());
    for (const Fatbin& fb : o.fatbins) {
      w.nums(fb.index, fb.offset, fb.version, fb.size, fb.section);
      w.str(fb.section_name);
      w.str(fb.translation_unit);
      w.nums(fb.linked, fb.device_link);
      w.num(fb.entries.size());
      for (const FatbinEntry& e : fb.entries) {
        std::uint64_t at = kNoPayload;
        if (!e.payload.empty()) {
          if (e.payload.data() < lo || e.payload.data() + e.payload.size() > hi) return std::nullopt;  // not in the file's bytes
          at = static_cast<std::uint64_t>(e.payload.data() - lo);
        }
        put_entry(w, e, at);
      }
    }
  }
  if (!fits) return std::nullopt;
  w.num(kFormat);  // last: a record cut short anywhere does not end with it
  return std::move(w.out);
}

bool decode_file_facts(Bytes record, Bytes whole, const std::string& path, ScanReport& report) {
  constexpr auto u16 = std::numeric_limits<std::uint16_t>::max();
  Reader r{record};
  std::vector<std::string> skipped(r.count());
  for (auto& s : skipped) s = path + r.str();
  std::vector<ObjectFatbins> objects(r.count());
  for (ObjectFatbins& o : objects) {
    if (!r.ok) return false;
    o.path = path + r.str();
    if (r.upto(1) == 1) {
      o.archive = path + r.str();
      o.member = r.str();
    }
    o.elf_type = static_cast<std::uint16_t>(r.upto(u16));
    o.machine = static_cast<std::uint16_t>(r.upto(u16));
    o.pe = r.upto(1) == 1;
    o.pie = r.upto(1) == 1;
    o.identity = r.str();
    o.fatbins.resize(r.count());
    for (Fatbin& fb : o.fatbins) {
      if (!r.ok) return false;
      fb.index = r.num();
      fb.offset = r.num();
      fb.version = static_cast<std::uint16_t>(r.upto(u16));
      fb.size = r.num();
      fb.section = static_cast<FatbinSection>(r.upto(static_cast<std::uint64_t>(FatbinSection::standalone)));
      fb.section_name = r.str();
      fb.translation_unit = r.str();
      fb.linked = r.upto(1) == 1;
      fb.device_link = r.upto(1) == 1;
      fb.entries.resize(r.count());
      for (FatbinEntry& e : fb.entries) {
        if (!r.ok) return false;
        e = get_entry(r, whole);
      }
    }
  }
  if (!r.ok || r.num() != kFormat || !r.ok || r.at != record.size()) return false;
  for (auto& s : skipped) report.skipped.push_back(std::move(s));
  for (auto& o : objects) report.objects.push_back(std::move(o));
  return true;
}

StampedValues::Digest StampedValues::digest(const FileStamp& stamp) {
  // Two independent chains over the five words, each word multiplied in and mixed with
  // MurmurHash3's 64-bit finaliser: 128 bits, against a few hundred thousand files a walk may
  // hold. Stamps are not chosen by anyone (inode and times come from the kernel), and a digest
  // only says a file of that identity was read before.
  auto fmix = [](std::uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
  };
  const std::uint64_t words[] = {stamp.dev, stamp.ino, stamp.size, static_cast<std::uint64_t>(stamp.mtime_ns),
                                 static_cast<std::uint64_t>(stamp.ctime_ns)};
  std::uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  for (const std::uint64_t w : words) {
    a = fmix(a ^ (w * 0x9e3779b97f4a7c15ull));
    b = fmix((b + w) * 0x100000001b3ull);
  }
  return Digest{a, b};
}

void StampedValues::add(Digest d, std::uint32_t value) { entries_.push_back(Entry{d, value}); }

void StampedValues::finish() {
  std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.digest < b.digest; });
  entries_.erase(std::unique(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.digest == b.digest; }),
                 entries_.end());
}

std::optional<std::uint32_t> StampedValues::find(Digest d) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), d, [](const Entry& e, const Digest& k) { return e.digest < k; });
  if (it == entries_.end() || it->digest != d) return std::nullopt;
  return it->value;
}

std::vector<std::byte> StampedValues::encode() const {
  Writer w;
  w.nums(kTreeFormat, entries_.size());
  for (const Entry& e : entries_) {
    common::append_le(w.out, e.digest.hi, 8);
    common::append_le(w.out, e.digest.lo, 8);
    common::append_le(w.out, e.value, 4);
  }
  return std::move(w.out);
}

std::optional<StampedValues> StampedValues::decode(Bytes record) {
  Reader r{record};
  if (r.num() != kTreeFormat) return std::nullopt;
  const std::uint64_t n = r.num();
  if (!r.ok || n > record.size() / 20 || record.size() - r.at != n * 20) return std::nullopt;
  auto le = [&record](std::size_t at, unsigned bytes) {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i) v |= std::to_integer<std::uint64_t>(record[at + i]) << (8 * i);
    return v;
  };
  StampedValues out;
  out.entries_.reserve(n);
  for (std::size_t at = r.at; at < record.size(); at += 20)
    out.entries_.push_back(Entry{Digest{le(at, 8), le(at + 8, 8)}, static_cast<std::uint32_t>(le(at + 16, 4))});
  for (std::size_t i = 1; i < out.entries_.size(); ++i)
    if (!(out.entries_[i - 1].digest < out.entries_[i].digest)) return std::nullopt;
  return out;
}

std::string tree_key(const std::string& path) {
  std::error_code ec;
  return "tree " + path + '\0' + std::filesystem::weakly_canonical(path, ec).string();
}

}  // namespace archguard::detail
