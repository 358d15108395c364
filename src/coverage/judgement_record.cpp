// SPDX-License-Identifier: Apache-2.0
// An object's verdict and judgement kept in the results cache (judge_with_store): a second run
// over an unchanged environment neither selects images nor lists kernels again. The record is
// a string table (a unit's reason, translation unit and identifier repeat in each of its
// kernels) and then the fields of ObjectVerdict and ObjectJudgement in order, as LEB128
// numbers and string numbers (common/record.hpp).
#include <archguard/coverage.hpp>

#include "common/record.hpp"

#include <algorithm>
#include <limits>
#include <string_view>
#include <unordered_map>

namespace archguard {
namespace {

using common::Reader;
using common::Writer;

// Bumped with any change of what the key or the record holds.
constexpr std::uint64_t kFormat = 1;
constexpr std::uint64_t kU32 = std::numeric_limits<std::uint32_t>::max();

/// The key: everything judge_object and check_object read besides the payload bytes (which the
/// identity pins; for an archive's members merged into one object the identity also says how
/// many of its fatbins each member gave, in order, see merged_identity, so that the same offsets
/// in other members are other bytes): the object's kind and every header field of its fatbins
/// (their translation units too, a member's name when nvcc left none) and entries, the GPU, the
/// driver settings, `all` and the derived limits.
std::string judgement_key(const ObjectFatbins& o, const Device& d, const DriverSettings& s, bool all, const DerivedLimits& l) {
  Writer w;
  w.nums(kFormat, o.elf_type, o.machine, o.pe, o.pie, object_kind(o), o.fatbins.size());
  for (const Fatbin& fb : o.fatbins) {
    w.nums(fb.index, fb.offset, fb.version, fb.size, fb.section, fb.linked, fb.device_link, fb.entries.size());
    w.str(fb.section_name);
    w.str(fb.translation_unit);
    for (const FatbinEntry& e : fb.entries) {
      w.nums(e.index, e.offset, e.raw_kind, e.kind, e.arch.sm, e.arch.suffix, e.version.major, e.version.minor, e.header_size,
             e.stored_size, e.compressed_size, e.uncompressed_size, e.compression, e.flags, e.debug, e.payload.size());
      w.str(e.identifier);
      w.str(e.options);
      w.bytes(e.extension);
    }
  }
  w.nums(d.cc.major, d.cc.minor, d.tegra, s.driver.has_value(), s.driver ? s.driver->major : 0, s.driver ? s.driver->minor : 0,
         s.driver ? s.driver->patch : 0, s.driver ? s.driver->components : 0, s.force_ptx_jit, s.disable_ptx_jit, all);
  w.nums(l.max_name_length, l.max_kernel_name_bytes, l.search_work_per_8_bytes, l.search_work_floor);
  std::string key = o.identity;
  key += '\0';
  key.append(reinterpret_cast<const char*>(w.out.data()), w.out.size());  // bytes viewed as text
  return key;
}

/// Writes strings as numbers into a table written ahead of the fields.
struct RecordWriter {
  Writer table, body;
  std::unordered_map<std::string_view, std::uint64_t> seen;  // views into the judged result
  std::uint64_t strings = 0;
  void str(std::string_view s) {
    auto [it, fresh] = seen.try_emplace(s, strings);
    if (fresh) {
      table.str(s);
      ++strings;
    }
    body.num(it->second);
  }
  void verdict(const Verdict& v) {
    body.nums(v.outcome, static_cast<std::uint32_t>(v.cuda_error), v.image.has_value(), v.image.value_or(0));
    str(v.reason);
  }
  std::vector<std::byte> finish() {
    Writer w;
    w.nums(kFormat, strings);
    w.out.insert(w.out.end(), table.out.begin(), table.out.end());
    w.out.insert(w.out.end(), body.out.begin(), body.out.end());
    return std::move(w.out);
  }
};

std::vector<std::byte> encode(const JudgedResult& r) {
  RecordWriter w;
  const ObjectVerdict& v = r.verdict;
  w.body.nums(v.outcome, static_cast<std::uint32_t>(v.cuda_error), v.units.size());
  for (const UnitVerdict& u : v.units) {
    w.body.nums(u.fatbin, u.section, u.images.size());
    w.str(u.identifier);
    w.str(u.translation_unit);
    for (const Image& im : u.images)
      w.body.nums(im.kind, im.arch.sm, im.arch.suffix, im.ptx_isa.major, im.ptx_isa.minor, im.relocatable, im.device_link);
    w.verdict(u.verdict);
  }
  const ObjectJudgement& j = r.judgement;
  w.body.nums(j.kind, j.tier, static_cast<std::uint32_t>(j.cuda_error), j.units, j.kernel_units, j.arch_sets, j.native, j.jit,
              j.failed, j.failed_tagged, j.link_drops, j.absent, j.kernels_listed, j.kernels.size());
  w.str(j.dispatch_evidence);
  for (const KernelVerdict& k : j.kernels) {
    w.str(k.kernel.name);
    w.str(k.kernel.demangled);
    w.body.num(k.fatbin);
    w.str(k.translation_unit);
    w.str(k.identifier);
    w.verdict(k.verdict);
    for (const std::string* s : {&k.arch_tag, &k.other_gpus, &k.absent_from_image, &k.link_drop, &k.link_drop_object}) w.str(*s);
  }
  return w.finish();
}

/// Reads a record back for `object`; false when it is damaged or does not fit the object.
struct RecordReader {
  Reader r;
  const ObjectFatbins& object;
  std::vector<std::string> table;

  template <typename E>
  E enumerated(E last) {
    return static_cast<E>(r.upto(static_cast<std::uint64_t>(last)));
  }
  int error() { return static_cast<int>(static_cast<std::uint32_t>(r.upto(kU32))); }
  std::size_t fatbin() { return static_cast<std::size_t>(r.upto(object.fatbins.empty() ? 0 : object.fatbins.size() - 1)); }
  const std::string& str() {
    static const std::string none;
    const std::uint64_t i = r.upto(table.empty() ? 0 : table.size() - 1);
    return r.ok && i < table.size() ? table[i] : none;
  }
  /// A verdict whose image, when it names one, is among `images` of its unit.
  Verdict verdict(std::size_t images) {
    Verdict v;
    v.outcome = enumerated(Outcome::fail);
    v.cuda_error = error();
    const bool has_image = r.upto(1) != 0;
    const std::uint64_t image = r.num();
    if (has_image) {
      if (image >= images) r.ok = false;
      else v.image = static_cast<std::size_t>(image);
    }
    v.reason = str();
    return v;
  }
  bool read_table() {
    if (r.num() != kFormat) return false;
    const std::uint64_t n = r.count();
    table.reserve(n);
    for (std::uint64_t i = 0; i < n && r.ok; ++i) table.push_back(r.str());
    return r.ok;
  }
  void read_verdict(ObjectVerdict& v) {
    v.object = object.path;
    v.outcome = enumerated(Outcome::fail);
    v.cuda_error = error();
    const std::uint64_t units = r.count();
    for (std::uint64_t i = 0; i < units && r.ok; ++i) {
      UnitVerdict u;
      u.object = object.path;
      u.fatbin = fatbin();
      u.section = enumerated(FatbinSection::standalone);
      const std::uint64_t images = r.count();
      u.identifier = str();
      u.translation_unit = str();
      for (std::uint64_t k = 0; k < images && r.ok; ++k) {
        Image im;
        im.kind = enumerated(CodeKind::ltoir);
        im.arch.sm = static_cast<unsigned>(r.upto(kU32));
        im.arch.suffix = enumerated(Suffix::f);
        im.ptx_isa.major = static_cast<unsigned>(r.upto(kU32));
        im.ptx_isa.minor = static_cast<unsigned>(r.upto(kU32));
        im.relocatable = r.upto(1) != 0;
        im.device_link = r.upto(1) != 0;
        u.images.push_back(im);
      }
      u.verdict = verdict(u.images.size());
      v.units.push_back(std::move(u));
    }
  }
  void read_judgement(const ObjectVerdict& v, ObjectJudgement& j) {
    j.object = object.path;
    j.kind = enumerated(ObjectKind::other);
    j.tier = enumerated(Tier::none_run);
    j.cuda_error = error();
    for (std::size_t* n : {&j.units, &j.kernel_units, &j.arch_sets, &j.native, &j.jit, &j.failed, &j.failed_tagged, &j.link_drops,
                           &j.absent})
      *n = static_cast<std::size_t>(r.num());
    j.kernels_listed = r.upto(1) != 0;
    const std::uint64_t kernels = r.count();
    j.dispatch_evidence = str();
    std::vector<std::size_t> images_of(object.fatbins.size(), 0);  // a kernel's verdict names an image of its unit
    for (const UnitVerdict& u : v.units)
      if (u.fatbin < images_of.size()) images_of[u.fatbin] = u.images.size();
    for (std::uint64_t i = 0; i < kernels && r.ok; ++i) {
      KernelVerdict k;
      k.kernel.name = str();
      k.kernel.demangled = str();
      k.fatbin = fatbin();
      k.translation_unit = str();
      k.identifier = str();
      k.verdict = verdict(k.fatbin < images_of.size() ? images_of[k.fatbin] : 0);
      for (std::string* s : {&k.arch_tag, &k.other_gpus, &k.absent_from_image, &k.link_drop, &k.link_drop_object}) *s = str();
      j.kernels.push_back(std::move(k));
    }
  }
};

std::optional<JudgedResult> decode(Bytes record, const ObjectFatbins& object) {
  RecordReader rr{Reader{record}, object, {}};
  if (!rr.read_table()) return std::nullopt;
  JudgedResult out;
  rr.read_verdict(out.verdict);
  rr.read_judgement(out.verdict, out.judgement);
  if (!rr.r.ok || rr.r.at != record.size()) return std::nullopt;
  return out;
}

/// Whether a result may be kept: none of its messages names the file (they would name it by
/// the path of this run), which only the errors of listing and decoding do.
bool keepable(const JudgedResult& r) {
  return r.judgement.errors.empty() && std::none_of(r.verdict.units.begin(), r.verdict.units.end(), [](const UnitVerdict& u) {
           return u.verdict.cuda_error == kErrInvalidImage;
         });
}

}  // namespace

JudgedResult judge_with_store(const ObjectFatbins& object, const Device& device, const DriverSettings& settings, bool all,
                              KernelIndex& index) {
  FactsStore* store = index.store();
  const bool keyed = store != nullptr && !object.identity.empty() && index.identity() == object.identity;
  std::string key;
  if (keyed) {
    key = judgement_key(object, device, settings, all, index.limits());
    if (auto record = store->find_judgement(key))
      if (auto known = decode(*record, object)) return std::move(*known);
  }
  // Missed: the images this judgement asks for are decoded on the index's threads first.
  index.prefetch(object, [&](KernelIndex& dry) {
    const ObjectVerdict verdict = check_object(object, device, settings, &dry);
    (void)judge_object(object, verdict, device, settings, all, &dry);
  });
  JudgedResult r;
  r.verdict = check_object(object, device, settings, &index);
  r.judgement = judge_object(object, r.verdict, device, settings, all, &index);
  if (keyed && keepable(r)) store->keep_judgement(key, encode(r));
  return r;
}

}  // namespace archguard
