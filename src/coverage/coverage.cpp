// SPDX-License-Identifier: Apache-2.0
#include <archguard/coverage.hpp>

#include "common/names.hpp"
#include "common/nearest.hpp"
#include "common/parallel.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

namespace archguard {
namespace {

void sort_unique(std::vector<Arch>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

std::string join_names(const std::vector<Arch>& archs, CodeKind kind, std::string_view sep = ", ") {
  std::string out;
  for (const Arch& a : archs) {
    if (!out.empty()) out += sep;
    out += nvcc_name(a, kind);
  }
  return out;
}

std::string join_numbers(const std::vector<Arch>& archs) {
  std::string out;
  for (const Arch& a : archs) {
    if (!out.empty()) out += ';';
    out += arch_number(a);
  }
  return out;
}

/// A token that is only a number, with an optional a/f suffix: "90", "90a", "100f".
bool bare_number(std::string_view t) {
  std::size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) != 0) ++i;
  if (i == 0) return false;
  if (i == t.size()) return true;
  return i + 1 == t.size() && (t[i] == 'a' || t[i] == 'f');
}

std::vector<std::string_view> split_list(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ';' || text[i] == ',' || std::isspace(static_cast<unsigned char>(text[i])) != 0) {
      if (i > start) out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string unit_name(const Unit& u) {
  std::string s = u.object->path + ": ";
  if (!u.fatbin->translation_unit.empty()) return s + "translation unit " + u.fatbin->translation_unit + " (fatbin " + std::to_string(u.fatbin->index) + ")";
  s += "fatbin " + std::to_string(u.fatbin->index);
  if (const std::string id = u.fatbin->identifier(); !id.empty()) s += " (" + id + ")";
  return s;
}

/// "k1, k2, k3 and 4 more" (demangled names).
std::string kernel_list(const std::vector<Kernel>& kernels, std::size_t show = 4) {
  std::string out;
  for (std::size_t i = 0; i < kernels.size() && i < show; ++i) out += (i == 0 ? "" : ", ") + kernels[i].demangled;
  if (kernels.size() > show) out += " and " + std::to_string(kernels.size() - show) + " more";
  return out;
}

bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

int severity(Outcome o) { return o == Outcome::fail ? 2 : o == Outcome::jit ? 1
                                                                            : 0; }

std::string image_label(const Image& im) { return nvcc_name(im.arch, im.kind) + (im.relocatable ? "(rel)" : ""); }

/// Why the driver could not load an image: "" when it decodes. Stored images are checked for
/// their header (an ELF magic for SASS); compressed ones are inflated (and dropped).
std::string undecodable(const FatbinEntry& e, std::string_view name) {
  if (e.kind == CodeKind::ltoir) return "";
  if (e.compression == Compression::none) {
    const Bytes p = e.payload;
    if (e.raw_kind == kEntryKindElf &&
        (p.size() < 4 || p[0] != std::byte{0x7f} || p[1] != std::byte{'E'} || p[2] != std::byte{'L'} || p[3] != std::byte{'F'}))
      return std::string(name) + ": the sass image at offset " + std::to_string(e.offset) + " is not an ELF file";
    return "";
  }
  const Status decodes = check_decodes(e, name);
  return decodes ? "" : decodes.message();
}

/// A shared library whose kernel-bearing fatbins carry at least this many different image sets
/// is read as one that builds kernels per architecture and picks them per GPU (docs/verdicts.md).
constexpr std::size_t kDispatchArchSets = 3;

}  // namespace

std::vector<Unit> units_of(const ObjectFatbins& object) {
  std::vector<Unit> units;
  bool has_main = false;
  for (const auto& fb : object.fatbins)
    if (fb.section != FatbinSection::nv_relfatbin && fb.section != FatbinSection::embedded && !fb.device_link)
      has_main = true;
  for (const auto& fb : object.fatbins) {
    if (fb.device_link) continue;
    // Embedded fatbins (data a library loads itself) are always judged; the relocatable ones
    // decide only when the object has no whole-program fatbin (an -rdc object or member).
    if (fb.section != FatbinSection::embedded && has_main == (fb.section == FatbinSection::nv_relfatbin)) continue;
    Unit u;
    u.object = &object;
    u.fatbin = &fb;
    auto add = [&u](const Fatbin& from) {
      const auto images = from.images();
      for (std::size_t i = 0; i < images.size(); ++i) {
        u.images.push_back(images[i]);
        u.entries.push_back(&from.entries[i]);
      }
    };
    add(fb);
    if (fb.linked) {  // -rdc link: the driver may JIT-link the relocatable PTX (rule 8)
      // The relocatable SASS comes along too: it is what tells the engine that a SASS-only -rdc
      // executable without a matching image fails with 500, not 209 (rule 8, seen on the H200).
      for (const auto& rel : object.fatbins) {
        if (rel.section != FatbinSection::nv_relfatbin) continue;
        const auto images = rel.images();
        for (std::size_t i = 0; i < images.size(); ++i) {
          if (images[i].kind == CodeKind::ltoir) continue;
          u.images.push_back(images[i]);
          u.entries.push_back(&rel.entries[i]);
        }
      }
    }
    units.push_back(std::move(u));
  }
  return units;
}

CoverageSummary summarize(const ObjectFatbins& object) {
  CoverageSummary s;
  for (const auto& fb : object.fatbins) {
    if (fb.device_link) continue;
    ++s.fatbins;
    for (const auto& e : fb.entries) {
      ++s.images;
      switch (e.kind) {
        case CodeKind::sass:
          s.sass.push_back(e.arch);
          break;
        case CodeKind::ptx:
          s.ptx.push_back(e.arch);
          s.highest_ptx_isa = std::max(s.highest_ptx_isa, e.version);
          break;
        case CodeKind::ltoir:
          s.ltoir.push_back(e.arch);
          break;
      }
    }
  }
  sort_unique(s.sass);
  sort_unique(s.ptx);
  sort_unique(s.ltoir);
  return s;
}

Result<Requirement> parse_requirement(std::string_view require, std::string_view ptx) {
  Requirement req;
  if (require.find("arch=") != std::string_view::npos || require.find("-arch") != std::string_view::npos ||
      require.find("--gpu-") != std::string_view::npos) {
    // nvcc flags (-gencode arch=compute_80,code=[sm_80,compute_80], -arch=sm_90): their codes
    // say exactly which SASS and PTX they embed.
    auto targets = parse_list(require);
    if (!targets) return rewrap(targets.error(), "--require: " + targets.message());
    for (const Target& target : *targets) {
      if (target.kind == CodeKind::sass) req.sass.push_back(target.arch);
      else if (target.kind == CodeKind::ptx) req.ptx.push_back(target.arch);
    }
  } else {
    const auto tokens = split_list(require);
    if (tokens.empty()) return Error{ErrorKind::usage, "--require: no architecture given"};
    const bool cmake_list = std::any_of(tokens.begin(), tokens.end(), [](std::string_view t) {
      return t.ends_with("-real") || t.ends_with("-virtual");
    });
    for (std::string_view t : tokens) {
      auto targets = parse_token(t);
      if (!targets) return rewrap(targets.error(), "--require: " + targets.message());
      const bool sass_only = !cmake_list && bare_number(t);
      for (const Target& target : *targets) {
        if (target.kind == CodeKind::sass) req.sass.push_back(target.arch);
        else if (target.kind == CodeKind::ptx && !sass_only) req.ptx.push_back(target.arch);
      }
    }
  }
  if (ptx == "none") {
    req.ptx.clear();
  } else if (ptx == "highest") {
    req.ptx_highest = true;
  } else if (!ptx.empty()) {
    auto targets = parse_token(ptx);
    if (!targets) {
      if (const std::string near = common::nearest_word(ptx, {"highest", "none"}); !near.empty())
        return Error{ErrorKind::usage, "--ptx '" + std::string(ptx) + "': unknown value; did you mean '" + near +
                                           "'? (highest, none or an architecture such as 90)"};
      return rewrap(targets.error(), "--ptx: " + targets.message());
    }
    for (const Target& target : *targets) req.ptx.push_back(target.arch);
  }
  sort_unique(req.sass);
  sort_unique(req.ptx);
  if (req.sass.empty() && req.ptx.empty() && !req.ptx_highest)
    return Error{ErrorKind::usage, "--require '" + std::string(require) + "': names no SASS or PTX target"};
  return req;
}

std::string_view to_string(UnitStatus s) {
  static constexpr common::Named<UnitStatus> names[] = {{UnitStatus::ok, "ok"}, {UnitStatus::compatible, "compatible"}, {UnitStatus::specific_extra, "specific-extra"}, {UnitStatus::no_kernels, "no-kernels"}, {UnitStatus::missing, "missing"}};
  return common::name_in(names, s);
}

bool VerifyReport::passed() const {
  return std::none_of(units.begin(), units.end(), [](const UnitFinding& u) { return u.status == UnitStatus::missing; });
}

namespace {

/// Where unit `u` of `object` is, into the fields a UnitFinding and a UnitVerdict share.
template <class Out>
void set_place(Out& out, const ObjectFatbins& object, const Unit& u) {
  out.object = object.path;
  out.fatbin = u.fatbin->index;
  out.section = u.fatbin->section;
  out.identifier = u.fatbin->identifier();
  out.translation_unit = u.fatbin->translation_unit;
}

/// A unit's finding before it is judged: where it is and which images it holds.
UnitFinding unit_finding(const ObjectFatbins& object, const Unit& u) {
  UnitFinding f;
  set_place(f, object, u);
  for (const Image& im : u.images) {
    if (im.kind == CodeKind::sass) f.found_sass.push_back(im.arch);
    if (im.kind == CodeKind::ptx) f.found_ptx.push_back(im.arch);
  }
  sort_unique(f.found_sass);
  sort_unique(f.found_ptx);
  return f;
}

/// The highest architecture the requirement names, SASS or PTX.
unsigned highest_required(const Requirement& req) {
  unsigned highest = 0;
  for (const Arch& a : req.sass) highest = std::max(highest, a.sm);
  for (const Arch& a : req.ptx) highest = std::max(highest, a.sm);
  return highest;
}

/// What the unit lacks against `req` (missing_sass, compatible, missing_ptx, missing_ptx_highest).
void compare_with(UnitFinding& f, const Requirement& req) {
  for (const Arch& need : req.sass) {
    if (std::find(f.found_sass.begin(), f.found_sass.end(), need) != f.found_sass.end()) continue;
    std::optional<Arch> lower;
    if (req.allow_compatible && need.suffix == Suffix::none) {
      if (const ArchRow* row = find_arch(need.sm); row != nullptr) {
        const Device dev = device_for_cc(row->cc);
        for (const Arch& have : f.found_sass)  // the highest compatible one, as the driver picks
          if (have.sm < need.sm && sass_runs_on(have, dev)) lower = have;
      }
    }
    if (lower) f.compatible.emplace_back(need, *lower);
    else f.missing_sass.push_back(need);
  }
  for (const Arch& need : req.ptx)
    if (std::find(f.found_ptx.begin(), f.found_ptx.end(), need) == f.found_ptx.end()) f.missing_ptx.push_back(need);
  if (req.ptx_highest) {
    const unsigned highest = highest_required(req);
    f.missing_ptx_highest = std::none_of(f.found_ptx.begin(), f.found_ptx.end(), [&](const Arch& a) {
      return a.suffix == Suffix::none && a.sm >= highest;
    });
  }
}

/// The message of a unit that lacks something: each lack, then the kernels, then the fix.
std::string missing_message(const Unit& u, const UnitFinding& f, unsigned highest, const std::string& kernels_text) {
  std::vector<std::string> parts;
  std::string fix;
  if (!f.missing_sass.empty()) {
    // Split what is missing: no image at all on that GPU, or only a JIT of lower PTX.
    std::vector<Arch> bare, jit_only;
    std::optional<Arch> jit;
    for (const Arch& need : f.missing_sass) {
      std::optional<Arch> usable;  // the highest PTX the driver could JIT for that GPU
      const Device dev = device_for_cc(cc_of_sm(need.sm));
      for (const Arch& p : f.found_ptx)
        if (ptx_targets(p, dev)) usable = p;
      if (usable) {
        jit_only.push_back(need);
        if (!jit || *jit < *usable) jit = usable;
      } else {
        bare.push_back(need);
      }
    }
    const std::string found = f.found_sass.empty() ? "no SASS" : join_names(f.found_sass, CodeKind::sass);
    if (!bare.empty()) {
      parts.push_back("has no SASS for " + join_names(bare, CodeKind::sass) + " and no PTX <= " + std::to_string(bare.front().sm) +
                      " (found " + found + ")");
    }
    if (!jit_only.empty()) {
      parts.push_back("has no SASS for " + join_names(jit_only, CodeKind::sass) + (bare.empty() ? " (found " + found + "; " : " (") +
                      "only " + nvcc_name(*jit, CodeKind::ptx) + " PTX would be JIT-compiled at first launch)");
    }
    fix = "add " + join_numbers(f.missing_sass) + " to ARCH_POLICY" + (bare.empty() ? "" : " or enable PTX");
  }
  const std::string found_ptx = f.found_ptx.empty() ? std::string("no PTX") : join_names(f.found_ptx, CodeKind::ptx);
  if (!f.missing_ptx.empty()) {
    parts.push_back("has no PTX for " + join_names(f.missing_ptx, CodeKind::ptx) + " (found " + found_ptx + ")");
    if (fix.empty()) fix = "enable PTX for " + join_numbers(f.missing_ptx);
  }
  if (f.missing_ptx_highest) {
    parts.push_back("has no PTX >= " + std::to_string(highest) + " for future GPUs (found " + found_ptx + ")");
    if (fix.empty()) fix = "enable PTX for the highest architecture (" + std::to_string(highest) + ")";
  }
  std::string message = unit_name(u) + " ";
  for (std::size_t i = 0; i < parts.size(); ++i) message += (i == 0 ? "" : " and ") + parts[i];
  return message + kernels_text + "; " + fix;
}

std::string compatible_message(const Unit& u, const UnitFinding& f) {
  std::string message = unit_name(u) + " uses compatible lower SASS: ";
  for (std::size_t i = 0; i < f.compatible.size(); ++i) {
    if (i != 0) message += ", ";
    message += nvcc_name(f.compatible[i].second, CodeKind::sass) + " for " + nvcc_name(f.compatible[i].first, CodeKind::sass);
  }
  return message;
}

/// A device-link drop: a kernel of an -rdc object that carries no image for an architecture the
/// program is device-linked for is not in that linked image, and nvlink says nothing.
void add_link_drops(UnitFinding& f, const Unit& u, const std::vector<LinkDrop>& drops) {
  for (const LinkDrop& drop : drops) {
    if (drop.linked_fatbin != u.fatbin->index) continue;
    if (f.status != UnitStatus::missing) {
      f.status = UnitStatus::missing;
      f.message = unit_name(u) + ": ";
    } else {
      f.message += "; and ";
    }
    f.message += "device-link drop: " + drop.kernel.demangled + " is not in the linked " + image_label(drop.linked) +
                 " image (its -rdc object, " + drop.object_label + ", carries only " + drop.defined_in +
                 "), so its launches fail there with 500 (named symbol not found); build that object for " +
                 nvcc_name(drop.linked.arch, CodeKind::sass) + " too";
    f.link_drops.push_back({drop.linked.arch, drop.kernel});
    f.kernels.push_back(drop.kernel);
  }
}

/// One unit against `req`. `drops` holds the object's device-link drops once a linked unit
/// asked for them (each search decodes every linked and relocatable image of the object).
UnitFinding verify_unit(const ObjectFatbins& object, const Unit& u, const Requirement& req,
                        std::optional<std::vector<LinkDrop>>& drops) {
  UnitFinding f = unit_finding(object, u);
  if (u.fatbin->only_specific() && !req.strict) {
    f.status = UnitStatus::specific_extra;
    f.message = unit_name(u) + " holds only architecture-specific images (" + join_names(f.found_sass, CodeKind::sass) +
                (f.found_sass.empty() || f.found_ptx.empty() ? "" : ", ") + join_names(f.found_ptx, CodeKind::ptx) +
                "): an extra, not judged (use --strict to judge it)";
    return f;
  }
  compare_with(f, req);
  const bool failed = !f.missing_sass.empty() || !f.missing_ptx.empty() || f.missing_ptx_highest;
  f.status = failed ? UnitStatus::missing : !f.compatible.empty() ? UnitStatus::compatible
                                                                  : UnitStatus::ok;
  std::string kernels_text;
  if (failed) {
    // A fatbin that defines no kernel cannot fail a launch: it decides nothing. One whose
    // kernels cannot be listed is judged (when in doubt, judge).
    if (auto kernels = kernels_of(*u.fatbin, object.path); kernels) {
      if (kernels->empty()) {
        f.status = UnitStatus::no_kernels;
        f.message = unit_name(u) + " defines no kernel: it decides nothing";
        return f;
      }
      std::sort(kernels->begin(), kernels->end(), [](const Kernel& a, const Kernel& b) { return a.demangled < b.demangled; });
      f.kernels = std::move(*kernels);
      kernels_text = "; kernels: " + kernel_list(f.kernels);
    }
    f.message = missing_message(u, f, highest_required(req), kernels_text);
  } else if (!f.compatible.empty()) {
    f.message = compatible_message(u, f);
  }
  if (u.fatbin->linked) {
    if (!drops) drops = device_link_drops(object);
    add_link_drops(f, u, *drops);
  }
  return f;
}

}  // namespace

VerifyReport verify(std::span<const ObjectFatbins> objects, const Requirement& req) {
  VerifyReport report;
  for (const ObjectFatbins& object : objects) {
    const auto units = units_of(object);
    if (!units.empty()) ++report.objects;
    // The object's device-link drops, found once for all its linked units.
    std::optional<std::vector<LinkDrop>> drops;
    for (const Unit& u : units) report.units.push_back(verify_unit(object, u, req, drops));
  }
  return report;
}

ObjectVerdict check_object(const ObjectFatbins& object, const Device& device, const DriverSettings& settings,
                           KernelIndex* index) {
  ObjectVerdict v;
  v.object = object.path;
  for (const Unit& u : units_of(object)) {
    UnitVerdict uv;
    set_place(uv, object, u);
    uv.images = u.images;
    uv.verdict = select_image(uv.images, device, settings);
    if (uv.verdict.outcome != Outcome::fail && uv.verdict.image && *uv.verdict.image < u.entries.size()) {
      // The driver loads the image it takes: one that does not decode fails the load (as
      // `verify` says), whatever else the fatbin holds.
      const FatbinEntry& taken_entry = *u.entries[*uv.verdict.image];
      std::string bad;
      if (index != nullptr && taken_entry.compression != Compression::none) {
        if (const auto& listed = index->of(taken_entry, object.path); !listed) bad = listed.message();
      } else {
        bad = undecodable(taken_entry, object.path);
      }
      if (!bad.empty()) {
        const std::string taken = image_label(uv.images[*uv.verdict.image]);
        uv.verdict.outcome = Outcome::fail;
        uv.verdict.cuda_error = kErrInvalidImage;
        uv.verdict.reason = "the " + taken + " image the driver takes does not decode (" + bad + "): loading the module fails";
        uv.verdict.image.reset();
      }
    }
    if (severity(uv.verdict.outcome) > severity(v.outcome)) {
      v.outcome = uv.verdict.outcome;
      v.cuda_error = uv.verdict.cuda_error;
    }
    v.units.push_back(std::move(uv));
  }
  return v;
}

Result<std::vector<Kernel>> kernels_of(const Fatbin& fatbin, std::string_view name) {
  std::optional<Error> first_error;
  for (CodeKind want : {CodeKind::sass, CodeKind::ptx}) {
    for (const auto& e : fatbin.entries) {
      if (e.kind != want) continue;
      auto kernels = decode_kernels(e, name);
      if (kernels) return kernels;
      if (!first_error) first_error = kernels.error();
    }
  }
  if (first_error) return *first_error;
  return std::vector<Kernel>{};
}

Result<std::vector<KernelFinding>> kernels_without_image(const ObjectFatbins& object, const ObjectVerdict& verdict) {
  std::vector<KernelFinding> out;
  for (const UnitVerdict& uv : verdict.units) {
    if (uv.verdict.outcome != Outcome::fail) continue;
    const Fatbin* fb = nullptr;
    for (const auto& f : object.fatbins)
      if (f.index == uv.fatbin) fb = &f;
    if (fb == nullptr) continue;
    AG_TRY(auto kernels, kernels_of(*fb, object.path));
    for (auto& k : kernels) out.push_back(KernelFinding{object.path, uv.fatbin, std::move(k), uv.verdict});
  }
  return out;
}

std::string_view to_string(ObjectKind k) {
  static constexpr common::Named<ObjectKind> names[] = {{ObjectKind::executable, "executable"}, {ObjectKind::shared_library, "shared-library"}, {ObjectKind::static_library, "static-library"}, {ObjectKind::relocatable, "relocatable"}, {ObjectKind::other, "other"}};
  return common::name_in(names, k);
}

ObjectKind object_kind(const ObjectFatbins& object) {
  for (const auto& fb : object.fatbins)
    if (fb.section == FatbinSection::standalone || fb.section == FatbinSection::memory) return ObjectKind::other;
  switch (object.elf_type) {
    case 1:  // an archive's members merged by judged_objects carry the archive's name
      return object.archive.empty() && object.path.ends_with(".a") ? ObjectKind::static_library : ObjectKind::relocatable;
    case 2:
      return ObjectKind::executable;
    case 3: {
      // ET_DYN is both a shared library and a position-independent executable; the name tells
      // them apart as ld.so's users do: libfoo.so, libfoo.so.13, ext.cpython-312-x86_64-linux-gnu.so.
      std::string_view name = object.path;
      if (const std::size_t slash = name.find_last_of("/:"); slash != std::string_view::npos) name.remove_prefix(slash + 1);
      for (std::size_t at = name.find(".so"); at != std::string_view::npos; at = name.find(".so", at + 1))
        if (at + 3 == name.size() || name[at + 3] == '.') return ObjectKind::shared_library;
      if (object.pe) return ObjectKind::shared_library;  // a DLL or .pyd (read_pe says ET_DYN only for those)
      return ObjectKind::executable;
    }
    default:
      return ObjectKind::other;
  }
}

std::string_view to_string(Tier t) {
  static constexpr common::Named<Tier> names[] = {{Tier::no_device_code, "no-device-code"}, {Tier::no_kernels, "no-kernels"}, {Tier::all_run, "all-run"}, {Tier::other_gpus, "other-gpus"}, {Tier::some_missing, "some-missing"}, {Tier::none_run, "none-run"}};
  return common::name_in(names, t);
}

bool is_problem(Tier t) { return t == Tier::some_missing || t == Tier::none_run; }

unsigned arch_tag_of(std::string_view name, std::string* tag) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string_view n = lower;
  // "sm100", "sm_90a", "sm80_xmma": "sm" after a non-letter (start, '_', or a mangled length),
  // an optional '_', two or three digits not followed by another digit.
  for (std::size_t at = n.find("sm"); at != std::string_view::npos; at = n.find("sm", at + 1)) {
    if (at > 0 && is_alpha(n[at - 1])) continue;
    std::size_t i = at + 2;
    if (i < n.size() && n[i] == '_') ++i;
    const std::size_t digits = i;
    while (i < n.size() && is_digit(n[i])) ++i;
    if (i - digits < 2 || i - digits > 3) continue;
    std::size_t end = i;
    if (end < n.size() && (n[end] == 'a' || n[end] == 'f') && (end + 1 == n.size() || !is_alpha(n[end + 1]))) ++end;
    else if (end < n.size() && is_alpha(n[end]) && n[end] != 'x') continue;  // "sm90x..." still a tag, "sm80abc" not
    const unsigned sm = static_cast<unsigned>(std::stoul(std::string(n.substr(digits, i - digits))));
    if (find_arch(sm) == nullptr) continue;
    if (tag != nullptr) *tag = std::string(name.substr(at, end - at));
    return sm;
  }
  // CUTLASS's instance names: cutlass_70_simt_dgemm..., cutlass_80_tensorop_...
  for (std::size_t at = n.find("cutlass_"); at != std::string_view::npos; at = n.find("cutlass_", at + 1)) {
    std::size_t i = at + 8;
    const std::size_t digits = i;
    while (i < n.size() && is_digit(n[i])) ++i;
    if (i - digits < 2 || i - digits > 3 || i >= n.size() || n[i] != '_') continue;
    const unsigned sm = static_cast<unsigned>(std::stoul(std::string(n.substr(digits, i - digits))));
    if (find_arch(sm) == nullptr) continue;
    if (tag != nullptr) *tag = std::string(name.substr(at, i - at));
    return sm;
  }
  // Generation names as whole words: volta_cgemm..., ampere_..., hopper_...
  static constexpr std::pair<std::string_view, unsigned> kGenerations[] = {
      {"kepler", 35}, {"maxwell", 50}, {"pascal", 60}, {"volta", 70}, {"turing", 75}, {"ampere", 80}, {"hopper", 90}, {"blackwell", 100}};
  for (const auto& [word, sm] : kGenerations) {
    for (std::size_t at = n.find(word); at != std::string_view::npos; at = n.find(word, at + 1)) {
      const std::size_t end = at + word.size();
      if ((at > 0 && is_alpha(n[at - 1])) || (end < n.size() && is_alpha(n[end]))) continue;
      if (tag != nullptr) *tag = std::string(name.substr(at, word.size()));
      return sm;
    }
  }
  return 0;
}

std::string unit_label(std::size_t fatbin, std::string_view translation_unit, std::string_view identifier) {
  if (!translation_unit.empty()) return std::string(translation_unit);
  std::string s = "fatbin " + std::to_string(fatbin);
  if (!identifier.empty()) s += " (" + std::string(identifier) + ")";
  return s;
}

std::vector<const KernelVerdict*> ObjectJudgement::failing() const {
  std::vector<const KernelVerdict*> out;
  for (const auto& k : kernels)
    if (k.verdict.outcome == Outcome::fail) out.push_back(&k);
  return out;
}

std::vector<std::string> ObjectJudgement::failing_units() const {
  std::vector<std::string> out;
  for (const KernelVerdict* k : failing()) {
    std::string l = unit_label(k->fatbin, k->translation_unit, k->identifier);
    if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(std::move(l));
  }
  return out;
}

KernelIndex::KernelIndex(FactsStore* store, const ObjectFatbins& object, const DerivedLimits& limits)
    : store_(store), identity_(object.identity), limits_(limits) {
  if (store_ == nullptr || identity_.empty()) return;
  for (std::size_t i = 0; i < object.fatbins.size(); ++i)
    if (const auto& entries = object.fatbins[i].entries; !entries.empty())
      ranges_.push_back(EntryRange{entries.data(), entries.size(), i});
  std::sort(ranges_.begin(), ranges_.end(),
            [](const EntryRange& a, const EntryRange& b) { return std::less<const FatbinEntry*>()(a.first, b.first); });
}

KernelIndex::~KernelIndex() { flush(); }

std::optional<StoredKernelsAt> KernelIndex::kept_at(const FatbinEntry& entry) const {
  // The range that starts last at or before the entry: the entry is its fatbin's when it lies
  // within it (each fatbin's entries are one array).
  const std::less<const FatbinEntry*> before;
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), &entry,
                             [&](const FatbinEntry* e, const EntryRange& r) { return before(e, r.first); });
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (!before(&entry, it->first + it->count)) return std::nullopt;
  return StoredKernelsAt{it->fatbin, entry.offset};
}

void KernelIndex::flush() {
  if (store_ == nullptr) return;
  store_->count(hits_, decoded_);
  hits_ = decoded_ = 0;
  if (new_lists_ == 0 || identity_.empty()) return;
  new_lists_ = 0;
  for (const auto& [entry, listed] : cache_)
    if (listed && entry->kind != CodeKind::ltoir)
      if (const auto at = kept_at(*entry)) stored_[*at] = StoredKernels{entry_fingerprint(*entry), *listed};
  store_->keep_kernels(identity_, stored_);
}

StoredKernels* KernelIndex::stored_for(const FatbinEntry& entry) {
  if (store_ == nullptr || identity_.empty()) return nullptr;
  const auto at = kept_at(entry);
  if (!at) return nullptr;
  if (!loaded_) {
    stored_ = store_->find_kernels(identity_);
    loaded_ = true;
  }
  const auto kept = stored_.find(*at);
  return kept != stored_.end() && kept->second.fingerprint == entry_fingerprint(entry) ? &kept->second : nullptr;
}

Result<std::vector<Kernel>> KernelIndex::decode_sorted(const FatbinEntry& entry, std::string_view name) const {
  // A large payload's pages go once read; a small one's in a run with its neighbours' (the
  // prefetch's PayloadTrail, or the caller's release of the judged object).
  static const PayloadRelease left_to_the_run;  // empty: decode_kernels releases nothing
  const PayloadRelease& release = payload_released_alone(entry) ? release_ : left_to_the_run;
  AG_TRY(auto kernels, decode_kernels(entry, name, limits_, release));
  std::sort(kernels.begin(), kernels.end(), [](const Kernel& a, const Kernel& b) { return a.name < b.name; });
  kernels.erase(std::unique(kernels.begin(), kernels.end(), [](const Kernel& a, const Kernel& b) { return a.name == b.name; }),
                kernels.end());
  return kernels;
}

std::uint64_t decoded_bytes(const ObjectFatbins& object) {
  std::uint64_t bytes = 0;
  for (const Fatbin& fb : object.fatbins)
    for (const FatbinEntry& e : fb.entries) bytes += e.image_size();
  return bytes;
}

std::vector<std::size_t> most_work_first(const std::vector<const ObjectFatbins*>& objects) {
  std::vector<std::uint64_t> cost(objects.size());
  for (std::size_t i = 0; i < objects.size(); ++i) cost[i] = decoded_bytes(*objects[i]);
  std::vector<std::size_t> order(objects.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
  return order;
}

const Result<std::vector<Kernel>>& KernelIndex::of(const FatbinEntry& entry, std::string_view name) {
  if (auto it = cache_.find(&entry); it != cache_.end()) return it->second;
  if (recording_) {
    asked_.emplace_back(&entry, std::string(name));
    return none_;
  }
  auto list = [&]() -> Result<std::vector<Kernel>> {
    if (entry.kind == CodeKind::ltoir) return std::vector<Kernel>{};
    if (StoredKernels* kept = stored_for(entry)) {
      ++hits_;
      // Moved, not copied: each entry is asked once, and flush() puts what cache_ holds back.
      return std::move(kept->kernels);
    }
    AG_TRY(auto kernels, decode_sorted(entry, name));
    // Only what decoded is kept (flush): an error names this file, and a damaged payload is
    // cheap to find damaged again.
    ++decoded_;
    ++new_lists_;
    return kernels;
  };
  return cache_.emplace(&entry, list()).first->second;
}

namespace {

/// Images of this size and more are decoded first in a prefetch, largest first.
constexpr std::uint64_t kLargeImage = std::uint64_t{1} << 20;

/// The pages of the small images' payloads a prefetch decodes in payload order, released behind
/// the decoding: decode_kernels releases the whole pages inside each payload, but a page that
/// holds the ends of two payloads (or a small payload and its neighbours' headers) stayed until
/// the whole object was judged (cuFFT: 36 MB of 4 KiB payload pages at once). Here everything
/// below the first small payload not yet decoded goes, in steps of kStep: no page a small image
/// still to be decoded reads is released (one of a large image still being decoded may be, and
/// is then read again from the page cache).
class PayloadTrail {
 public:
  PayloadTrail(const std::vector<std::pair<const FatbinEntry*, std::string>>& work, std::size_t first, const PayloadRelease& release)
      : work_(work), first_(first), release_(release), done_(work.size() > first ? work.size() - first : 0) {
    for (auto& d : done_) d.store(false, std::memory_order_relaxed);
    if (first_ < work_.size()) released_ = work_[first_].first->payload.data();
  }
  PayloadTrail(const PayloadTrail&) = delete;
  PayloadTrail& operator=(const PayloadTrail&) = delete;

  void done(std::size_t i) {
    if (!release_ || i < first_) return;
    done_[i - first_].store(true, std::memory_order_release);
    std::unique_lock lock(mutex_, std::try_to_lock);  // a thread behind catches up later
    if (lock.owns_lock()) advance();
  }
  /// Once every image is decoded: what a thread that found the lock taken left behind.
  void finish() {
    if (!release_) return;
    const std::lock_guard lock(mutex_);
    advance();
  }

 private:
  void advance() {
    if (done_.empty()) return;
    while (next_ < done_.size() && done_[next_].load(std::memory_order_acquire)) ++next_;
    const FatbinEntry& last = *work_.back().first;
    const std::byte* below = next_ < done_.size() ? work_[first_ + next_].first->payload.data() : last.payload.data() + last.payload.size();
    // Down to a page: the release keeps whole pages inside only, and a page cut by two
    // releases in turn would stay with neither.
    if (next_ < done_.size()) below -= reinterpret_cast<std::uintptr_t>(below) % kPage;
    if (released_ == nullptr || below < released_) return;  // an empty payload, or one out of order: nothing to do
    if (static_cast<std::size_t>(below - released_) < kStep && next_ < done_.size()) return;
    if (below > released_) release_(Bytes(released_, static_cast<std::size_t>(below - released_)));  // whole pages inside
    released_ = below;
  }

  static constexpr std::size_t kStep = std::size_t{1} << 20;
  const std::uintptr_t kPage = page_size();
  const std::vector<std::pair<const FatbinEntry*, std::string>>& work_;
  std::size_t first_;
  const PayloadRelease& release_;
  std::vector<std::atomic<bool>> done_;
  std::mutex mutex_;
  std::size_t next_ = 0;                 ///< the first small image not known to be decoded
  const std::byte* released_ = nullptr;  ///< what lies below has been released
};

}  // namespace

void KernelIndex::prefetch(const ObjectFatbins& object, const std::function<void(KernelIndex&)>& ask) {
  // Threads are started per object: an object with a few small images (most of an
  // environment's thousands) is left to of() on its own thread without a recording run; a
  // large one gets a thread per kImagesPerThread images or kBytesPerThread decoded bytes,
  // whichever gives more (a library of a few huge images, as NCCL's, is as much work as one of
  // thousands of small ones).
  constexpr std::size_t kImagesPerThread = 8;
  constexpr std::uint64_t kBytesPerThread = std::uint64_t{4} << 20;
  std::size_t images = 0;
  for (const Fatbin& fb : object.fatbins) images += fb.entries.size();
  const std::uint64_t bytes = decoded_bytes(object);
  if (threads_ <= 1 || images < 2 || (images < 2 * kImagesPerThread && bytes < 2 * kBytesPerThread)) return;
  asked_.clear();
  recording_ = true;
  ask(*this);
  recording_ = false;
  std::vector<std::pair<const FatbinEntry*, std::string>> work;
  std::set<const FatbinEntry*> seen;
  std::uint64_t work_bytes = 0;
  for (auto& asked : asked_) {
    const FatbinEntry* entry = asked.first;
    if (entry->kind == CodeKind::ltoir || cache_.count(entry) != 0 || stored_for(*entry) != nullptr || !seen.insert(entry).second) continue;
    work_bytes += entry->image_size();
    work.emplace_back(entry, std::move(asked.second));
  }
  asked_.clear();
  const auto threads = static_cast<unsigned>(
      std::min<std::uint64_t>({threads_, work.size(), std::max<std::uint64_t>(work.size() / kImagesPerThread, work_bytes / kBytesPerThread)}));
  if (threads < 2) return;
  // Large images first, largest first: the last one a thread picks up is a small one, so the
  // threads end together (the claimed sizes order them; a false claim only orders badly). The
  // small ones then in the order of their payloads, whose pages go behind them (PayloadTrail).
  const auto large = [](const FatbinEntry* e) { return e->image_size() >= kLargeImage; };
  std::stable_sort(work.begin(), work.end(), [&](const auto& a, const auto& b) {
    if (large(a.first) != large(b.first)) return large(a.first);
    if (large(a.first)) return a.first->image_size() > b.first->image_size();
    return a.first->payload.data() < b.first->payload.data();
  });
  std::vector<std::optional<Result<std::vector<Kernel>>>> lists(work.size());
  const std::size_t first_small = static_cast<std::size_t>(
      std::find_if(work.begin(), work.end(), [&](const auto& w) { return !large(w.first); }) - work.begin());
  PayloadTrail trail(work, first_small, release_);
  // On the process's shared threads: every large object of a run started its own before, and
  // each new thread faulted in new decode buffers (SharedPool).
  common::SharedPool::process().run(work.size(), threads, [&](std::size_t i) {
    lists[i] = decode_sorted(*work[i].first, work[i].second);
    trail.done(i);
  });
  trail.finish();
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (*lists[i]) {
      ++decoded_;
      ++new_lists_;
    }
    cache_.emplace(work[i].first, std::move(*lists[i]));
  }
  prefetched_ += work.size();
}

namespace {

/// The fatbin of `object` that holds `entry`, or null.
const Fatbin* owner_of(const ObjectFatbins& object, const FatbinEntry* entry) {
  for (const Fatbin& fb : object.fatbins)
    if (!fb.entries.empty() && entry >= &fb.entries.front() && entry <= &fb.entries.back()) return &fb;
  return nullptr;
}

/// Whether nvlink had code of relocatable fatbin `r` to link for `arch`: SASS of that
/// architecture, or PTX it can compile. Without it, r's kernels are dropped from that image; with
/// it, a kernel the image still lacks was left out by its own source (`#if __CUDA_ARCH__`).
bool linkable_for(const Fatbin& r, Arch arch) {
  return std::any_of(r.entries.begin(), r.entries.end(), [&](const FatbinEntry& e) {
    return e.kind == CodeKind::ptx || (e.kind == CodeKind::sass && e.arch.sm == arch.sm);
  });
}

}  // namespace

std::vector<LinkDrop> device_link_drops(const ObjectFatbins& object, KernelIndex* shared) {
  KernelIndex local;
  KernelIndex& index = shared != nullptr ? *shared : local;
  std::vector<LinkDrop> out;
  for (const Unit& u : units_of(object)) {
    if (!u.fatbin->linked) continue;
    struct Def {
      Kernel kernel;
      std::string images;
      const Fatbin* fatbin = nullptr;
    };
    std::map<std::string, Def> rel;  // kernel -> where the relocatable code defines it
    // A kernel is dropped from a linked image only where the relocatable fatbin defining it had
    // no code to link for that image's architecture: the fatbins that had code for every linked
    // image, and the linked images every fatbin had code for, are not decoded (NCCL's linked
    // fatbin is 590 MB of images, each of whose architectures every relocatable fatbin covers).
    auto unlinkable_somewhere = [&](const Fatbin* owner) {
      if (owner == nullptr) return true;
      for (std::size_t j = 0; j < u.images.size(); ++j)
        if (!u.images[j].relocatable && u.images[j].kind == CodeKind::sass && !linkable_for(*owner, u.images[j].arch)) return true;
      return false;
    };
    for (std::size_t i = 0; i < u.images.size(); ++i) {
      if (!u.images[i].relocatable || u.images[i].kind == CodeKind::ltoir) continue;
      const Fatbin* owner = owner_of(object, u.entries[i]);
      if (!unlinkable_somewhere(owner)) continue;
      const auto& listed = index.of(*u.entries[i], object.path);
      if (!listed) continue;
      for (const Kernel& k : *listed) {
        auto [it, fresh] = rel.try_emplace(k.name, Def{k, "", owner});
        it->second.images += (it->second.images.empty() ? "" : ", ") + image_label(u.images[i]);
      }
    }
    for (std::size_t i = 0; i < u.images.size() && !rel.empty(); ++i) {
      if (u.images[i].relocatable || u.images[i].kind != CodeKind::sass) continue;
      if (std::all_of(rel.begin(), rel.end(), [&](const auto& r) {
            return r.second.fatbin != nullptr && linkable_for(*r.second.fatbin, u.images[i].arch);
          }))
        continue;  // every defining fatbin had code to link for it: nothing can be missing by the link
      const auto& listed = index.of(*u.entries[i], object.path);
      if (!listed) continue;
      for (const auto& [name, d] : rel) {
        if (std::binary_search(listed->begin(), listed->end(), d.kernel, [](const Kernel& a, const Kernel& b) { return a.name < b.name; }))
          continue;
        if (d.fatbin != nullptr && linkable_for(*d.fatbin, u.images[i].arch)) continue;  // its source left it out
        LinkDrop drop;
        drop.linked_fatbin = u.fatbin->index;
        drop.linked = u.images[i];
        drop.kernel = d.kernel;
        drop.defined_in = d.images;
        if (d.fatbin != nullptr) {
          drop.relocatable_fatbin = d.fatbin->index;
          drop.object_label = unit_label(d.fatbin->index, d.fatbin->translation_unit, d.fatbin->identifier());
        }
        out.push_back(std::move(drop));
      }
    }
  }
  return out;
}

namespace {

/// What judge_object reads the units of one object with.
struct JudgeContext {
  const ObjectFatbins& object;
  KernelIndex& index;
  bool all = false;      // every kernel asked for, not only the failing ones
  bool library = false;  // a shared or static library

  /// Whether the kernels of `u` are the union of those of all its images (rule 10), rather than
  /// those of the image the driver takes. Every image is decoded for -rdc links (a drop fails
  /// launches), with `all`, and for what users build themselves (executables, object files,
  /// cubins); a shared or static library's kernels left out of one architecture by their source
  /// are excused anyway (rule 10), and decoding every image of a vendor library costs several
  /// times the verdict (docs/verdicts.md).
  bool union_wanted(const Unit& u) const {
    if (std::count_if(u.images.begin(), u.images.end(), [](const Image& im) { return im.kind != CodeKind::ltoir; }) < 2) return false;
    return all || u.fatbin->linked || !library;
  }
};

/// The unit of `units` that the i-th verdict `uv` judged: as a rule the i-th, else found by
/// its fatbin; null when none is.
const Unit* unit_for(const std::vector<Unit>& units, std::size_t i, const UnitVerdict& uv) {
  if (i < units.size() && units[i].fatbin->index == uv.fatbin && units[i].fatbin->section == uv.section) return &units[i];
  for (const Unit& u : units)
    if (u.fatbin->index == uv.fatbin && u.fatbin->section == uv.section) return &u;
  return nullptr;
}

/// Whether any kernel needs listing. Kernels are judged over the images of each unit (rule 10):
/// a unit of one SASS or PTX image cannot lack a kernel another image has, so when nothing fails
/// and no unit has two, there is nothing to decode.
bool kernels_needed(const JudgeContext& c, const ObjectVerdict& verdict, const std::vector<Unit>& units) {
  const bool any_fail = std::any_of(verdict.units.begin(), verdict.units.end(),
                                    [](const UnitVerdict& u) { return u.verdict.outcome == Outcome::fail; });
  const bool multi_image = std::any_of(units.begin(), units.end(), [&](const Unit& u) { return c.union_wanted(u); });
  return any_fail || c.all || multi_image;
}

/// The kernels of the images of one unit, as far as they could be listed.
struct UnitKernels {
  std::vector<const std::vector<Kernel>*> lists;               // per image; null: not listed
  std::optional<std::string> list_error;                       // why the first that failed did
  std::map<std::string, std::vector<std::size_t>> defined_in;  // mangled name -> images
  std::map<std::string, const Kernel*> kernel_of;              // the unit's kernels: the union

  /// Nothing listed, for an error: the kernels are unknown.
  bool unknown() const {
    return std::all_of(lists.begin(), lists.end(), [](const auto* l) { return l == nullptr; }) && list_error;
  }
};

/// The images of `u` to list, in order. Kernel sets differ between architectures (a source's
/// `#if __CUDA_ARCH__`), not between the SASS and the PTX nvcc compiled for one: one decoded
/// image per architecture, the taken one first, stands for the others of that architecture.
/// A unit judged on its taken image alone (a library's, nothing asked) lists the kernels of
/// that image, or, when it fails, of its first image that decodes (SASS first).
std::vector<std::size_t> listing_order(const JudgeContext& c, const Unit& u, const UnitVerdict& uv) {
  std::vector<std::size_t> order;
  if (uv.verdict.image && *uv.verdict.image < u.images.size()) order.push_back(*uv.verdict.image);
  const bool every = c.union_wanted(u);
  for (CodeKind want : {CodeKind::sass, CodeKind::ptx})
    for (std::size_t i = 0; i < u.images.size(); ++i)
      if (u.images[i].kind == want && std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  if (!every && order.size() > 1) {
    // the first that decodes stands for the unit: try them in order, stop at the first list
    std::size_t keep = 0;
    for (; keep < order.size(); ++keep)
      if (c.index.of(*u.entries[order[keep]], c.object.path)) break;
    order = keep < order.size() ? std::vector<std::size_t>{order[keep]} : std::vector<std::size_t>{order.front()};
  }
  return order;
}

/// The kernels of every image of `u` listing_order names; the unit's kernels are their union.
UnitKernels unit_kernels(const JudgeContext& c, const Unit& u, const UnitVerdict& uv) {
  UnitKernels uk;
  uk.lists.assign(u.images.size(), nullptr);
  for (std::size_t i : listing_order(c, u, uv)) {
    if (u.images[i].kind == CodeKind::ltoir) continue;
    bool same = false;
    for (std::size_t k = 0; k < u.images.size() && !same; ++k)
      if (uk.lists[k] != nullptr && u.images[k].arch == u.images[i].arch && u.images[k].relocatable == u.images[i].relocatable) {
        uk.lists[i] = uk.lists[k];
        same = true;
      }
    if (same) {
      for (const Kernel& k : *uk.lists[i]) uk.defined_in[k.name].push_back(i);
      continue;
    }
    const auto& r = c.index.of(*u.entries[i], c.object.path);
    if (!r) {
      if (!uk.list_error) uk.list_error = r.message();
      continue;
    }
    uk.lists[i] = &*r;
    for (const Kernel& k : *r) {
      uk.defined_in[k.name].push_back(i);
      uk.kernel_of.try_emplace(k.name, &k);
    }
  }
  return uk;
}

/// The unit's image set: the sorted, distinct nvcc names of its images ("compute_90 sm_80 sm_90").
std::string image_set_of(const UnitVerdict& uv) {
  std::vector<std::string> names;
  for (const Image& im : uv.images) names.push_back(nvcc_name(im.arch, im.kind));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string set;
  for (const auto& n : names) set += (set.empty() ? "" : " ") + n;
  return set;
}

/// Fails `kv`, a kernel of `u` that the image the driver takes (image `taken_at`) lacks while
/// the images `defined` define it: the module loads, but the kernel's lookup (and so its
/// launch) fails with 500, named symbol not found. A kernel only relocatable code defines, none
/// of it linkable for the taken image, was dropped by the device link.
void fail_not_in_taken(KernelVerdict& kv, const JudgeContext& c, const Unit& u, const std::vector<std::size_t>& defined,
                       std::size_t taken_at) {
  const std::string in_image = image_label(u.images[taken_at]);
  std::string where;
  bool only_rel = true;
  for (std::size_t i : defined) {
    where += (where.empty() ? "" : ", ") + image_label(u.images[i]);
    only_rel = only_rel && u.images[i].relocatable;
  }
  kv.verdict.outcome = Outcome::fail;
  kv.verdict.cuda_error = kErrSymbolNotFound;
  kv.verdict.image.reset();
  std::string owner;
  bool linkable = false;
  for (std::size_t i : defined)
    if (const Fatbin* fb = owner_of(c.object, u.entries[i]); fb != nullptr && u.images[i].relocatable) {
      if (owner.empty()) owner = unit_label(fb->index, fb->translation_unit, fb->identifier());
      linkable = linkable || linkable_for(*fb, u.images[taken_at].arch);
    }
  if (u.fatbin->linked && only_rel && !linkable) {
    kv.link_drop_object = owner;
    kv.link_drop = "its -rdc object" + (owner.empty() ? std::string() : " (" + owner + ")") + " carries only " + where +
                   ", so the device link for " + in_image + " left it out";
    kv.verdict.reason = "device-link drop: not in the linked " + in_image + " image (" + kv.link_drop + ")";
  } else {
    kv.absent_from_image = "not in the " + in_image + " image the driver takes (in " + where + ")";
    kv.verdict.reason = "named symbol not found: " + kv.absent_from_image;
  }
}

/// A kernel's worst verdict over the units while its object is judged: the kernel (in the
/// index's lists) and the unit verdict it takes its fields from, and a verdict of its own only
/// once something is said of it alone (it fails on its own, is excused) or it is reported. A
/// copy per kernel of its names and of its unit's strings cost a large library's judging
/// 850 bytes a kernel (100,000 kernels: 85 MB, several libraries at once).
struct Tallied {
  const Kernel* kernel = nullptr;
  const UnitVerdict* unit = nullptr;
  std::unique_ptr<KernelVerdict> own;

  const Verdict& verdict() const { return own ? own->verdict : unit->verdict; }
  std::size_t fatbin() const { return unit->fatbin; }
  bool alone() const { return own && (!own->absent_from_image.empty() || !own->link_drop.empty()); }
  /// Its own verdict, made from its unit's on first use (the kernel's names are copied last).
  KernelVerdict& own_verdict() {
    if (!own) {
      own = std::make_unique<KernelVerdict>();
      own->fatbin = unit->fatbin;
      own->translation_unit = unit->translation_unit;
      own->identifier = unit->identifier;
      own->verdict = unit->verdict;
    }
    return *own;
  }
};

/// What the units of one object add up to, before failures are excused.
struct KernelTally {
  std::map<std::string_view, Tallied> by_name;    // each kernel's worst verdict over the units (names in the index)
  std::vector<std::string> arch_sets;             // the distinct image sets of kernel-bearing units
  std::map<std::size_t, std::string> unit_set;    // fatbin index -> its image set
  std::vector<std::size_t> specific_units;        // fatbins holding only a/f images
  std::size_t unknown_fail = 0, unknown_run = 0;  // units whose kernels could not be listed
  int first_unknown_error = 0;
};

/// Adds the kernels of unit `u`, judged `uv`, to `t` (and its listing errors to `j`).
void tally_unit(const JudgeContext& c, const Unit& u, const UnitVerdict& uv, KernelTally& t, ObjectJudgement& j) {
  const bool fails = uv.verdict.outcome == Outcome::fail;
  UnitKernels uk = unit_kernels(c, u, uv);
  if (uk.unknown()) {
    j.errors.push_back(*uk.list_error);  // when in doubt, judge: a fatbin whose kernels cannot be listed counts
    ++(fails ? t.unknown_fail : t.unknown_run);
    if (fails && t.first_unknown_error == 0) t.first_unknown_error = uv.verdict.cuda_error;
    return;
  }
  if (uk.kernel_of.empty()) return;  // defines no kernel: decides nothing
  ++j.kernel_units;
  const std::string set = image_set_of(uv);
  if (std::find(t.arch_sets.begin(), t.arch_sets.end(), set) == t.arch_sets.end()) t.arch_sets.push_back(set);
  t.unit_set[uv.fatbin] = set;
  if (u.fatbin->only_specific()) t.specific_units.push_back(uv.fatbin);
  const std::size_t taken_at = uv.verdict.image.value_or(uk.lists.size());
  const std::vector<Kernel>* taken = !fails && taken_at < uk.lists.size() ? uk.lists[taken_at] : nullptr;
  for (const auto& [name, kernel] : uk.kernel_of) {
    Tallied tallied{kernel, &uv, nullptr};
    if (taken != nullptr && !std::binary_search(taken->begin(), taken->end(), *kernel,
                                                [](const Kernel& a, const Kernel& b) { return a.name < b.name; }))
      fail_not_in_taken(tallied.own_verdict(), c, u, uk.defined_in[name], taken_at);
    const std::string_view key = kernel->name;  // the index's lists outlive the tally
    auto it = t.by_name.find(key);
    if (it != t.by_name.end() && severity(it->second.verdict().outcome) <= severity(tallied.verdict().outcome)) continue;
    t.by_name.insert_or_assign(key, std::move(tallied));
  }
}

/// The failing kernels each rule of "built for other GPUs" excused, and the first errors.
struct Excuses {
  std::size_t by_tag = 0, by_specific = 0, by_company = 0, by_shape = 0, by_source = 0, unexcused = 0;
  int first_error = 0, first_unexcused = 0;
};

/// Sets the arch tag of the failing kernels (209 alone) whose names tag a GPU other than
/// `device`; the image sets of their fatbins, one per tagged kernel.
std::vector<std::string> tag_other_gpus(KernelTally& t, const Device& device) {
  std::vector<std::string> tagged_sets;
  for (auto& [name, tallied] : t.by_name) {
    if (tallied.verdict().outcome != Outcome::fail || tallied.alone()) continue;
    std::string tag;
    const unsigned sm = arch_tag_of(name, &tag);
    if (sm != 0 && !sass_runs_on(Arch{sm, Suffix::none}, device)) {
      tallied.own_verdict().arch_tag = tag;
      tagged_sets.push_back(t.unit_set[tallied.fatbin()]);
    }
  }
  return tagged_sets;
}

/// Counts the verdicts of `t`'s kernels into `j`, and says which failing kernels are explained
/// by "built for other GPUs" (docs/verdicts.md): (1) the name tags another GPU; (2) the fatbin
/// holds only a/f images, built for particular GPUs on purpose; (3) the fatbin has the image set
/// of a failing fatbin with tagged kernels; (4) the object is a library built per architecture;
/// (10) the kernel's own source leaves it out of the image the driver takes while other images of
/// its unit define it. Only failures the GPU's architecture explains are excused: 209 (rules 1-4)
/// and a kernel left out by its source (rule 10); never 222, 223, a device-link drop, or anything
/// under CUDA_FORCE_PTX_JIT.
Excuses excuse_other_gpus(KernelTally& t, ObjectJudgement& j, const Device& device, const DriverSettings& settings) {
  const std::vector<std::string> tagged_sets = tag_other_gpus(t, device);
  const bool environment_free = !settings.force_ptx_jit && t.unknown_fail == 0;
  const bool shape = (j.kind == ObjectKind::shared_library || j.kind == ObjectKind::static_library) &&
                     t.arch_sets.size() >= kDispatchArchSets;
  Excuses e;
  for (auto& [name, tallied] : t.by_name) {
    switch (tallied.verdict().outcome) {
      case Outcome::native:
        ++j.native;
        continue;
      case Outcome::jit:
        ++j.jit;
        continue;
      case Outcome::fail:
        break;
    }
    KernelVerdict& kv = tallied.own_verdict();  // a failing kernel is reported
    ++j.failed;
    if (e.first_error == 0) e.first_error = kv.verdict.cuda_error;
    if (!kv.link_drop.empty()) ++j.link_drops;
    if (!kv.absent_from_image.empty()) ++j.absent;
    const bool by_arch = environment_free && kv.verdict.cuda_error == kErrNoKernelImage;
    if (!kv.link_drop.empty() || !environment_free) {
      // a device-link drop is the build's doing; the environment's failures are not the GPU's
    } else if (!kv.absent_from_image.empty()) {
      kv.other_gpus = "its source leaves it out of this GPU's image (" + kv.absent_from_image + ")";
      ++e.by_source;
    } else if (by_arch && !kv.arch_tag.empty()) {
      kv.other_gpus = "its name tags " + kv.arch_tag;
      ++e.by_tag;
    } else if (by_arch && std::find(t.specific_units.begin(), t.specific_units.end(), kv.fatbin) != t.specific_units.end()) {
      kv.other_gpus = "its fatbin holds only architecture-specific images (" + t.unit_set[kv.fatbin] + ")";
      ++e.by_specific;
    } else if (by_arch && std::find(tagged_sets.begin(), tagged_sets.end(), t.unit_set[kv.fatbin]) != tagged_sets.end()) {
      kv.other_gpus = "its fatbin is built like those of tagged kernels (" + t.unit_set[kv.fatbin] + ")";
      ++e.by_company;
    } else if (by_arch && shape) {
      kv.other_gpus = "the library is built per architecture";
      ++e.by_shape;
    }
    if (kv.other_gpus.empty()) {
      ++e.unexcused;
      if (e.first_unexcused == 0) e.first_unexcused = kv.verdict.cuda_error;
    }
  }
  return e;
}

/// "3 named for another GPU, 2 in a shared library built per architecture (...)": why every
/// failing kernel of `j` is built for other GPUs.
std::string dispatch_evidence(const ObjectJudgement& j, const Excuses& e) {
  std::vector<std::string> why;
  if (e.by_tag > 0) why.push_back(std::to_string(e.by_tag) + " named for another GPU");
  if (e.by_specific > 0) why.push_back(std::to_string(e.by_specific) + " in fatbins of architecture-specific images only");
  if (e.by_company > 0) why.push_back(std::to_string(e.by_company) + " in fatbins built like those of the named ones");
  if (e.by_shape > 0)
    why.push_back(std::to_string(e.by_shape) + " in a " + std::string(j.kind == ObjectKind::static_library ? "static" : "shared") +
                  " library built per architecture (" + std::to_string(j.arch_sets) + " image sets among " +
                  std::to_string(j.kernel_units) + " kernel-bearing fatbins)");
  if (e.by_source > 0) why.push_back(std::to_string(e.by_source) + " left out of this GPU's image by their source");
  std::string out;
  for (std::size_t i = 0; i < why.size(); ++i) out += (i == 0 ? "" : ", ") + why[i];
  return out;
}

/// The tier of `j` and the CUDA error it stands for, from its counted kernels.
void set_tier(ObjectJudgement& j, const KernelTally& t, const Excuses& e) {
  const std::size_t failing = j.failed + t.unknown_fail;
  const std::size_t running = j.native + j.jit + t.unknown_run;
  j.cuda_error = e.first_unexcused != 0 ? e.first_unexcused : e.first_error != 0 ? e.first_error
                                                                                 : t.first_unknown_error;
  if (j.kernel_units == 0 && t.unknown_fail + t.unknown_run == 0) j.tier = Tier::no_kernels;
  else if (failing == 0) j.tier = Tier::all_run;
  else if (running == 0) j.tier = Tier::none_run;
  else if (e.unexcused == 0 && t.unknown_fail == 0) {
    j.tier = Tier::other_gpus;
    j.dispatch_evidence += dispatch_evidence(j, e);
  } else {
    j.tier = Tier::some_missing;
  }
}

}  // namespace

ObjectJudgement judge_object(const ObjectFatbins& object, const ObjectVerdict& verdict, const Device& device,
                             const DriverSettings& settings, bool all, KernelIndex* shared) {
  KernelIndex local;
  KernelIndex& index = shared != nullptr ? *shared : local;
  ObjectJudgement j;
  j.object = object.path;
  j.kind = object_kind(object);
  j.units = verdict.units.size();
  if (verdict.units.empty()) return j;
  const std::vector<Unit> units = units_of(object);
  const JudgeContext c{object, index, all, j.kind == ObjectKind::shared_library || j.kind == ObjectKind::static_library};
  if (!kernels_needed(c, verdict, units)) {
    j.tier = Tier::all_run;
    return j;
  }
  j.kernels_listed = true;
  KernelTally t;
  for (std::size_t ui = 0; ui < verdict.units.size(); ++ui)
    if (const Unit* u = unit_for(units, ui, verdict.units[ui]); u != nullptr) tally_unit(c, *u, verdict.units[ui], t, j);
  j.arch_sets = t.arch_sets.size();
  const Excuses e = excuse_other_gpus(t, j, device, settings);
  j.failed_tagged = e.by_tag;
  for (auto& [name, tallied] : t.by_name)
    if (all || tallied.verdict().outcome == Outcome::fail) {
      KernelVerdict& kv = tallied.own_verdict();
      kv.kernel = *tallied.kernel;
      j.kernels.push_back(std::move(kv));
    }
  std::stable_sort(j.kernels.begin(), j.kernels.end(),
                   [](const KernelVerdict& a, const KernelVerdict& b) { return a.kernel.demangled < b.kernel.demangled; });
  set_tier(j, t, e);
  return j;
}

// ---- what users ship as a unit -------------------------------------------------------------

std::string merged_identity(std::span<const ObjectFatbins* const> members) {
  std::string archive, taken;
  for (const ObjectFatbins* m : members) {
    // "<archive identity>\n<ordinal> <member>", as the scan wrote it.
    const std::string& id = m->identity;
    const std::string tail = " " + m->member;
    if (m->member.empty() || !id.ends_with(tail)) return {};
    const std::size_t end = id.size() - tail.size();
    std::size_t start = end;
    while (start > 0 && std::isdigit(static_cast<unsigned char>(id[start - 1])) != 0) --start;
    if (start == end || start < 2 || id[start - 1] != '\n') return {};
    const std::string_view of(id.data(), start - 1);
    if (archive.empty()) archive = of;
    else if (of != archive) return {};
    taken += ' ';
    taken.append(id, start, end - start);
    taken += ':' + std::to_string(m->fatbins.size());
  }
  if (archive.empty()) return {};
  return archive + "\nmerged" + taken;
}

std::vector<JudgedObject> judged_objects(std::span<const ObjectFatbins> objects) {
  std::vector<JudgedObject> out;
  std::map<std::string, std::size_t> archive_at;                   // "lib.a" -> out[i] of its merged object
  std::map<std::size_t, std::vector<const ObjectFatbins*>> taken;  // out[i] -> the members merged into it
  for (const ObjectFatbins& o : objects) {
    const std::size_t colon = o.path.rfind(':');
    if (o.elf_type != 1 || o.archive.empty() || colon == std::string::npos || o.fatbins.empty()) {
      if (!(o.fatbins.empty() && !o.archive.empty())) out.push_back(JudgedObject{&o, nullptr, 0});
      continue;
    }
    const std::string lib = o.path.substr(0, colon);
    const std::string_view member = std::string_view(o.path).substr(colon + 1);
    auto [it, fresh] = archive_at.try_emplace(lib, out.size());
    if (fresh) {
      JudgedObject j;
      j.merged = std::make_shared<ObjectFatbins>();
      j.merged->path = lib;
      j.merged->elf_type = 1;
      j.merged->machine = o.machine;
      j.merged->loaded_by = o.loaded_by;
      out.push_back(std::move(j));
    }
    JudgedObject& j = out[it->second];
    ++j.members;
    taken[it->second].push_back(&o);
    for (const Fatbin& fb : o.fatbins) {
      Fatbin copy = fb;
      copy.index = j.merged->fatbins.size();
      if (copy.translation_unit.empty()) copy.translation_unit = std::string(member);
      j.merged->fatbins.push_back(std::move(copy));
    }
  }
  for (const auto& [at, members] : taken) out[at].merged->identity = merged_identity(members);
  return out;
}

namespace {

bool is_upper(char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; }

/// One token of a name that marks a variant: [begin, end) and what it stands for.
struct VariantToken {
  std::size_t begin = 0, end = 0;
  bool cuda = false;
  unsigned number = 0;    ///< sm, or cuda release x 10 (118, 120)
  bool specific = false;  ///< an architecture with its a/f suffix: Sm100a, sm_100f, _90a
};

std::vector<VariantToken> variant_tokens(std::string_view n) {
  std::vector<VariantToken> out;
  auto digits_at = [&](std::size_t i) {
    std::size_t e = i;
    while (e < n.size() && is_digit(n[e])) ++e;
    return e - i;
  };
  for (std::size_t i = 0; i < n.size();) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(n[i])));
    const bool boundary = i == 0 || !is_alpha(n[i - 1]) || (is_upper(n[i]) && !is_upper(n[i - 1]));
    // sm_90a, Sm100a, sm80: an architecture
    if (c == 's' && boundary && i + 1 < n.size() && std::tolower(static_cast<unsigned char>(n[i + 1])) == 'm') {
      std::size_t d = i + 2;
      if (d < n.size() && n[d] == '_') ++d;
      const std::size_t len = digits_at(d);
      if (len >= 2 && len <= 3) {
        std::size_t e = d + len;
        if (e < n.size() && (n[e] == 'a' || n[e] == 'f')) ++e;
        const unsigned sm = static_cast<unsigned>(std::stoul(std::string(n.substr(d, len))));
        if (find_arch(sm) != nullptr && (e == n.size() || !is_digit(n[e]))) {
          out.push_back({i, e, false, sm, e > d + len});
          i = e;
          continue;
        }
      }
    }
    // cuda118, cuda12x, cu126, cu12: a CUDA runtime
    if (c == 'c' && boundary && n.substr(i).size() >= 4 && std::tolower(static_cast<unsigned char>(n[i + 1])) == 'u') {
      std::size_t d = i + 2;
      if (n.size() >= d + 2 && std::tolower(static_cast<unsigned char>(n[d])) == 'd' &&
          std::tolower(static_cast<unsigned char>(n[d + 1])) == 'a')
        d += 2;
      const std::size_t len = digits_at(d);
      std::size_t e = d + len;
      const bool x = len == 2 && e < n.size() && n[e] == 'x';
      if (x) ++e;
      if (len >= 2 && len <= 3 && (e == n.size() || !is_alpha(n[e]) || n[e] == '_')) {
        const std::string num(n.substr(d, len));
        const unsigned major = static_cast<unsigned>(std::stoul(num.substr(0, 2)));
        const unsigned minor = len == 3 ? static_cast<unsigned>(num[2] - '0') : 0;
        if (major >= 9 && major <= 20) {
          out.push_back({i, e, true, major * 10 + minor});
          i = e;
          continue;
        }
      }
    }
    // _90a., _100a_: an architecture number with its suffix, between separators
    if (n[i] == '_' || n[i] == '-') {
      const std::size_t d = i + 1;
      const std::size_t len = digits_at(d);
      std::size_t e = d + len;
      if (len >= 2 && len <= 3 && e < n.size() && (n[e] == 'a' || n[e] == 'f')) {
        ++e;
        const unsigned sm = static_cast<unsigned>(std::stoul(std::string(n.substr(d, len))));
        if (find_arch(sm) != nullptr && (e == n.size() || n[e] == '.' || n[e] == '_' || n[e] == '-')) {
          out.push_back({i, e, false, sm, true});
          i = e;
          continue;
        }
      }
    }
    ++i;
  }
  return out;
}

std::string_view file_part(std::string_view path) {
  if (const std::size_t at = path.find_last_of("/:"); at != std::string_view::npos) path.remove_prefix(at + 1);
  return path;
}

std::string dir_part(std::string_view path) {
  const std::size_t at = path.find_last_of("/:");
  return at == std::string_view::npos ? std::string() : std::string(path.substr(0, at + 1));
}

bool runs_here(Tier t) { return t == Tier::all_run || t == Tier::other_gpus; }

std::string count_of(std::size_t n, std::string_view what) {
  return std::to_string(n) + " " + std::string(what) + (n == 1 ? "" : "s");
}

}  // namespace

std::string variant_key(std::string_view name) {
  const auto tokens = variant_tokens(name);
  if (tokens.empty()) return "";
  std::string key;
  std::size_t at = 0;
  for (const VariantToken& t : tokens) {
    key += name.substr(at, t.begin - at);
    if (name[t.begin] == '_' || name[t.begin] == '-') key += name[t.begin];
    key += t.cuda ? "{cuda}" : "{arch}";
    at = t.end;
  }
  return key + std::string(name.substr(at));
}

unsigned variant_cuda(std::string_view name) {
  for (const VariantToken& t : variant_tokens(name))
    if (t.cuda) return t.number;
  return 0;
}

PackageMember package_member(const ObjectFatbins& object, const ObjectJudgement& judgement) {
  PackageMember m;
  m.path = object.path;
  m.judgement = &judgement;
  m.dependency = !object.loaded_by.empty();
  const auto units = units_of(object);
  m.only_specific = !units.empty() && std::all_of(units.begin(), units.end(), [](const Unit& u) { return u.fatbin->only_specific(); });
  for (const Unit& u : units)
    for (const Image& im : u.images)
      if (im.kind != CodeKind::ltoir && (m.oldest_sm == 0 || im.arch.sm < m.oldest_sm)) m.oldest_sm = im.arch.sm;
  return m;
}

namespace {

/// What judge_package works on and builds.
struct PackageWork {
  std::span<const PackageMember> members;
  const Device& device;
  PackageVerdict p;
  std::vector<bool> grouped;          // parallel to the members: in a group of variants
  std::vector<std::string> problems;  // what the summary names as failing
};

/// The members' variant groups (dir + key -> members) and architecture-specific members, the
/// judged objects counted into `w.p` on the way.
struct PackageShape {
  std::map<std::string, std::vector<std::size_t>> groups;
  std::vector<std::size_t> specific;
};

PackageShape shape_of(PackageWork& w) {
  PackageShape s;
  for (std::size_t i = 0; i < w.members.size(); ++i) {
    const PackageMember& m = w.members[i];
    if (m.judgement == nullptr || m.judgement->tier == Tier::no_device_code) continue;
    ++w.p.objects;
    if (runs_here(m.judgement->tier)) ++w.p.run;
    if (is_problem(m.judgement->tier)) ++w.p.failing;
    if (m.dependency) continue;
    if (const std::string key = variant_key(file_part(m.path)); !key.empty()) s.groups[dir_part(m.path) + key].push_back(i);
    const auto tokens = variant_tokens(file_part(m.path));
    if (m.only_specific || std::any_of(tokens.begin(), tokens.end(), [](const VariantToken& t) { return t.specific; }))
      s.specific.push_back(i);
  }
  return s;
}

/// Judges one group of variants (`list`, two or more): excused when one serves this GPU or all
/// are built for particular or newer GPUs; its line goes to the verdict's groups.
void judge_group(PackageWork& w, const std::string& key, const std::vector<std::size_t>& list) {
  PackageVerdict& p = w.p;
  bool cuda = false, all_specific = true, all_newer = true;
  std::vector<std::string> serving;
  for (std::size_t i : list) {
    const PackageMember& m = w.members[i];
    w.grouped[i] = true;
    p.variance[i] = Variance::variant;
    const auto tokens = variant_tokens(file_part(m.path));
    cuda = cuda || variant_cuda(file_part(m.path)) != 0;
    // Architecture-specific by its images, or by its name (Sm100f: a standalone cubin keeps no
    // trace of "f", docs/fatbin-format.md).
    const bool named_specific = std::any_of(tokens.begin(), tokens.end(), [](const VariantToken& t) { return t.specific; });
    all_specific = all_specific && (m.only_specific || named_specific);
    all_newer = all_newer && m.oldest_sm != 0 && cc_of_sm(m.oldest_sm) > w.device.cc;
    if (runs_here(m.judgement->tier)) serving.emplace_back(file_part(m.path));
  }
  std::string line = std::string(file_part(key)) + ": " + count_of(list.size(), "variant") + " per " +
                     (cuda ? "CUDA runtime" : "architecture") + "; ";
  if (!serving.empty()) {
    for (std::size_t i : list) p.excused[i] = is_problem(w.members[i].judgement->tier);
    line += std::to_string(serving.size()) + " serve this GPU (";
    for (std::size_t k = 0; k < serving.size() && k < 3; ++k) line += (k == 0 ? "" : ", ") + serving[k];
    if (serving.size() > 3) line += " and " + std::to_string(serving.size() - 3) + " more";
    line += ")";
  } else if (all_specific || all_newer) {
    for (std::size_t i : list) p.excused[i] = is_problem(w.members[i].judgement->tier);
    line += all_specific ? "none serves this GPU: all are built for particular GPUs (architecture-specific)"
                         : "none serves this GPU: all are built for newer GPUs";
  } else {
    line += "none serves this GPU";
    w.problems.push_back("no variant of " + std::string(file_part(key)) + " runs here");
  }
  p.groups.push_back(std::move(line));
}

/// Failing objects a rule excused: how many, and the names of the first three.
struct ExcusedObjects {
  std::size_t failing = 0;
  std::string names;

  void add(const std::string& name) {
    if (failing++ < 3) names += (names.empty() ? "" : ", ") + name;
  }
  /// The names, and how many more there are.
  std::string listed() const { return names + (failing > 3 ? " and " + std::to_string(failing - 3) + " more" : ""); }
};

/// The architecture-specific objects outside groups of variants; those that fail are excused.
ExcusedObjects excuse_specific(PackageWork& w, const std::vector<std::size_t>& specific) {
  ExcusedObjects out;
  for (std::size_t i : specific) {
    if (w.grouped[i]) continue;
    w.p.variance[i] = Variance::specific;
    if (!is_problem(w.members[i].judgement->tier)) continue;
    w.p.excused[i] = true;
    out.add(std::string(file_part(w.members[i].path)));
  }
  return out;
}

/// Built for newer GPUs only: every image targets an architecture above this GPU's. A stale
/// object is one built for older GPUs than the rest; one whose oldest target is newer than the
/// GPU is built for those GPUs on purpose (torchao's _C_mxfp8: sm_100 and compute_120). It is
/// excused like an architecture-specific one when the package is built per GPU.
ExcusedObjects excuse_newer(PackageWork& w) {
  ExcusedObjects out;
  for (std::size_t i = 0; i < w.members.size(); ++i) {
    const PackageMember& m = w.members[i];
    if (m.judgement == nullptr || m.dependency || w.grouped[i] || w.p.variance[i] != Variance::none || m.oldest_sm == 0) continue;
    if (!is_problem(m.judgement->tier) || cc_of_sm(m.oldest_sm) <= w.device.cc) continue;
    // Only in a package built per GPU: another object of it targets a different range. Alone (or
    // beside builds of the same range) an object built for newer GPUs is simply not for this one.
    const bool per_gpu = std::any_of(w.members.begin(), w.members.end(), [&](const PackageMember& o) {
      return &o != &m && o.judgement != nullptr && o.judgement->tier != Tier::no_device_code && !o.dependency &&
             o.oldest_sm != 0 && o.oldest_sm != m.oldest_sm;
    });
    if (!per_gpu) continue;
    w.p.variance[i] = Variance::newer;
    w.p.excused[i] = true;
    out.add(std::string(file_part(m.path)) + " (sm_" + std::to_string(m.oldest_sm) + " and up)");
  }
  return out;
}

/// A package of per-GPU builds (at least half of its objects are architecture-specific or
/// variants, flashinfer-cubin's cubins): its other objects without an image here are read the
/// same way, as rule 4 reads a library built per architecture. Only for 209. `shaped`: how many
/// objects are variants or architecture-specific.
ExcusedObjects excuse_per_gpu(PackageWork& w, std::size_t shaped) {
  ExcusedObjects out;
  if (w.p.objects < 4 || 2 * shaped < w.p.objects) return out;
  for (std::size_t i = 0; i < w.members.size(); ++i) {
    const PackageMember& m = w.members[i];
    if (m.judgement == nullptr || m.dependency || w.p.variance[i] != Variance::none || !is_problem(m.judgement->tier) ||
        m.judgement->cuda_error != kErrNoKernelImage)
      continue;
    w.p.variance[i] = Variance::specific;
    w.p.excused[i] = true;
    out.add(std::string(file_part(m.path)));
  }
  return out;
}

/// The verdict's problem, CUDA error and summary, once every excuse is known.
void summarize_package(PackageWork& w) {
  PackageVerdict& p = w.p;
  for (std::size_t i = 0; i < w.members.size(); ++i) {
    const PackageMember& m = w.members[i];
    if (m.judgement == nullptr || !is_problem(m.judgement->tier) || p.excused[i]) continue;
    if (p.cuda_error == 0) p.cuda_error = m.judgement->cuda_error;
    if (p.variance[i] == Variance::none) w.problems.push_back(std::string(file_part(m.path)) + " " + std::string(to_string(m.judgement->tier)));
  }
  p.problem = !w.problems.empty();
  if (p.problem) {
    p.summary = "fails: ";
    for (std::size_t i = 0; i < w.problems.size() && i < 3; ++i) p.summary += (i == 0 ? "" : "; ") + w.problems[i];
    if (w.problems.size() > 3) p.summary += " and " + std::to_string(w.problems.size() - 3) + " more";
    return;
  }
  const std::size_t excused = static_cast<std::size_t>(std::count(p.excused.begin(), p.excused.end(), true));
  if (p.run == 0 && p.failing > 0) {
    // Everything that fails is built for other GPUs on purpose: the package holds nothing for
    // this GPU, which is its makers' choice, not a broken install.
    p.summary = "holds no device code for this GPU: its " + count_of(p.objects, "object") +
                " with device code are built for other GPUs on purpose (below)";
    return;
  }
  p.summary = "runs: " + std::to_string(p.run) + " of " + count_of(p.objects, "object") + " with device code run here";
  if (excused > 0) p.summary += "; " + std::to_string(excused) + " that do not are variants for other GPUs or CUDA runtimes";
}

}  // namespace

PackageVerdict judge_package(std::span<const PackageMember> members, const Device& device) {
  PackageWork w{members, device, {}, std::vector<bool>(members.size(), false), {}};
  w.p.variance.assign(members.size(), Variance::none);
  w.p.excused.assign(members.size(), false);
  const PackageShape shape = shape_of(w);
  for (const auto& [key, list] : shape.groups)
    if (list.size() >= 2) judge_group(w, key, list);
  const ExcusedObjects specific = excuse_specific(w, shape.specific);
  const ExcusedObjects newer = excuse_newer(w);
  std::size_t shaped = 0;
  for (std::size_t i = 0; i < members.size(); ++i) shaped += w.p.variance[i] != Variance::none ? 1 : 0;
  const ExcusedObjects per_gpu = excuse_per_gpu(w, shaped);
  if (per_gpu.failing > 0)
    w.p.groups.push_back(count_of(per_gpu.failing, "other object") + " of a package built per GPU (" + std::to_string(shaped) +
                         " of " + std::to_string(w.p.objects) +
                         " objects are variants or architecture-specific) without an image here: " + per_gpu.listed());
  if (specific.failing > 0)
    w.p.groups.push_back(count_of(specific.failing, "object") +
                         " built for particular GPUs only (architecture-specific images), not for this one: " + specific.listed());
  if (newer.failing > 0)
    w.p.groups.push_back(count_of(newer.failing, "object") + " built for newer GPUs only: " + newer.listed());
  summarize_package(w);
  return w.p;
}

Result<std::vector<FleetModel>> parse_fleet_csv(std::string_view text, std::string_view name) {
  // The grammar the CMake module's fleet reader shares (one test corpus, tests/data/fleet):
  // lines end at '\n', a trailing '\r' and spaces or tabs around lines and fields are ignored,
  // empty lines and the header "name, compute_cap" are skipped, every other line is
  // "<name>, <X.Y>" split at its last comma. Anything else is an error naming the line.
  std::vector<FleetModel> models;
  std::map<std::pair<std::string, unsigned>, std::size_t> index;  // (name, cc) -> models[i]
  std::size_t line_no = 0;
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  // Control characters in messages are written as \xNN: a line cannot forge output.
  auto shown = [](std::string_view s) {
    std::string out;
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", u);
        out += buf;
      } else {
        out += c;
      }
    }
    return out;
  };
  const std::string hint = "; use the output of 'nvidia-smi --query-gpu=name,compute_cap --format=csv' (one line per GPU: name, X.Y)";
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    const std::string where = std::string(name) + ":" + std::to_string(line_no) + ": ";
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF
    line = trim(line);
    for (char c : line) {
      const auto u = static_cast<unsigned char>(c);
      if (u == 0) return Error{ErrorKind::usage, where + "the line holds a NUL byte; a fleet file is text"};
      if ((u < 0x20 && c != '\t') || u == 0x7f)
        return Error{ErrorKind::usage, where + "the line holds control character " + std::to_string(u) + "; a fleet file is text"};
    }
    if (line.empty()) continue;
    const std::size_t comma = line.rfind(',');
    if (comma == std::string_view::npos)
      return Error{ErrorKind::usage, where + "'" + shown(line) + "' is not 'name, compute_cap'" + hint};
    const std::string_view model = trim(line.substr(0, comma));
    const std::string_view cc_text = trim(line.substr(comma + 1));
    if (lower(model) == "name" && lower(cc_text) == "compute_cap") continue;  // a (repeated) header
    if (model.empty()) return Error{ErrorKind::usage, where + "'" + shown(line) + "' has no GPU name before the comma" + hint};
    // X.Y: one to three digits, a dot, one digit (what nvidia-smi prints: 7.5, 9.0, 12.1).
    const std::size_t dot = cc_text.find('.');
    bool ok = dot != std::string_view::npos && dot >= 1 && dot <= 3 && cc_text.size() == dot + 2;
    for (std::size_t i = 0; ok && i < cc_text.size(); ++i)
      if (i != dot && std::isdigit(static_cast<unsigned char>(cc_text[i])) == 0) ok = false;
    if (!ok)
      return Error{ErrorKind::usage, where + "compute capability '" + shown(cc_text) + "' of '" + shown(model) + "' is not X.Y" + hint};
    Version2 cc;
    cc.major = static_cast<unsigned>(std::stoul(std::string(cc_text.substr(0, dot))));
    cc.minor = static_cast<unsigned>(cc_text[dot + 1] - '0');
    // Indexed: a file of many distinct names stays linear (the fuzzer found the scan slow).
    auto [it, fresh] = index.try_emplace({std::string(model), cc.major * 10 + cc.minor}, models.size());
    if (fresh) models.push_back(FleetModel{std::string(model), cc, 1});
    else ++models[it->second].count;
  }
  if (models.empty()) return Error{ErrorKind::usage, std::string(name) + ": the file lists no GPU (expected nvidia-smi --query-gpu=name,compute_cap --format=csv output)"};
  return models;
}

}  // namespace archguard
