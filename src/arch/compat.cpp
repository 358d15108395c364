// SPDX-License-Identifier: Apache-2.0
// The compatibility engine: which image the CUDA driver loads for a device, or why none.
// Rule numbers refer to docs/architectures.md (sources in docs/compatibility.md).
#include <archguard/compat.hpp>

#include "common/version.hpp"

#include <algorithm>

namespace archguard {

namespace {

std::string isa_text(Version2 isa) { return isa.empty() ? "unknown" : common::version_text(isa); }

bool is_tegra(const Device& device) {
  if (device.tegra) return true;
  const ArchRow* row = find_arch(device.cc.packed());
  return row != nullptr && row->tegra;
}

bool family_match(Arch arch, const Device& device) {
  const unsigned fam = family_of(arch.sm);
  const unsigned dev_sm = device.cc.packed();
  return fam != 0 && family_of(dev_sm) == fam && dev_sm >= arch.sm;
}

// Among images of the same kind, the driver prefers the highest arch, and of one arch the
// arch-specific 'a' over the family 'f' over the plain image (rule 5).
int suffix_rank(Suffix s) {
  switch (s) {
    case Suffix::a:
      return 2;
    case Suffix::f:
      return 1;
    case Suffix::none:
      break;
  }
  return 0;
}

bool better(const Image& x, const Image& y) {
  if (x.arch.sm != y.arch.sm) return x.arch.sm > y.arch.sm;
  if (x.arch.suffix != y.arch.suffix) return suffix_rank(x.arch.suffix) > suffix_rank(y.arch.suffix);
  return x.ptx_isa < y.ptx_isa;  // same arch twice: the older ISA is the safer JIT input
}

std::string image_name(const Image& image) { return nvcc_name(image.arch, image.kind); }

std::string names(std::span<const Image> images, const std::vector<std::size_t>& idx) {
  std::string out;
  for (std::size_t i : idx) {
    if (!out.empty()) out += ", ";
    out += image_name(images[i]);
  }
  return out;
}

// A CUDA 13.0+ driver reports a renamed part under its new capability (Jetson Thor: 10.1 -> 11.0).
Device effective_device(const Device& device, const DriverSettings& settings, std::string& note) {
  Device d = device;
  d.tegra = is_tegra(device);
  const RenameRow* rn = find_rename(device.cc.packed());
  if (rn == nullptr || !settings.driver) return d;
  const ReleaseRow* rel = find_release(rn->cuda);
  if (rel == nullptr || *rel->min_driver == '\0') return d;
  Result<DriverVersion> min = parse_driver_version(rel->min_driver);
  if (!min || !driver_at_least(*settings.driver, *min)) return d;
  d.cc = cc_of_sm(rn->new_sm);
  d.tegra = is_tegra(Device{d.cc, d.tegra});
  note = "; driver " + format_driver_version(*settings.driver) + " reports this cc " + common::version_text(device.cc) +
         " part as cc " + common::version_text(d.cc) + " (sm_" + std::to_string(rn->old_sm) + " was renamed sm_" +
         std::to_string(rn->new_sm) + " in cuda " + common::version_text(rn->cuda) + ")";
  return d;
}

// Why the SASS images present do not help, with the sm_101 -> sm_110 hint where it applies.
std::string rename_hint(std::span<const Image> images, const std::vector<std::size_t>& sass, const Device& d) {
  for (std::size_t i : sass) {
    const RenameRow* rn = find_rename(images[i].arch.sm);
    if (rn != nullptr && d.cc == cc_of_sm(rn->new_sm)) {
      return "; sm_" + std::to_string(rn->old_sm) + " was renamed sm_" + std::to_string(rn->new_sm) + " in cuda " +
             common::version_text(rn->cuda) + ": rebuild with " + std::to_string(rn->new_sm);
    }
  }
  return "";
}

// The fix for a 209: an image this device loads, and why a same-major SASS image does not run
// (Tegra parts have no minor-version compatibility). Empty when the rename hint already says it.
std::string fix_hint(std::span<const Image> images, const std::vector<std::size_t>& sass, const Device& d,
                     const std::string& rename) {
  if (!rename.empty()) return "";
  std::string tegra;
  for (std::size_t i : sass) {
    const Arch a = images[i].arch;
    const Version2 acc = cc_of_sm(a.sm);
    const ArchRow* row = find_arch(a.sm);
    if (a.suffix == Suffix::none && acc.major == d.cc.major && acc != d.cc && row != nullptr &&
        (is_tegra(d) || row->tegra)) {
      tegra = "; sass of cc " + common::version_text(acc) + " does not run on cc " + common::version_text(d.cc) +
              " because " + (is_tegra(d) ? "cc " + common::version_text(d.cc) : "cc " + common::version_text(acc)) +
              " is a tegra part (no minor-version compatibility)";
      break;
    }
  }
  const std::string sm = std::to_string(d.cc.packed());
  return tegra + "; fix: rebuild with sass sm_" + sm + " (add " + sm + " to ARCH_POLICY) or with ptx compute_" + sm +
         " or lower";
}

// The major version (branch) of the newest minimum driver the table records (580 for CUDA 13.0).
unsigned newest_recorded_driver_branch() {
  unsigned best = 0;
  for (const ReleaseRow& row : release_rows())
    if (auto v = parse_driver_version(row.min_driver); v) best = std::max(best, v->major);
  return best;
}

// Why the driver's acceptance of a PTX ISA cannot be judged: the ISA is newer than the table, or
// its release's minimum driver is not recorded. Empty when the table knows the minimum.
std::string unknown_isa_note(Version2 isa) {
  if (isa.empty()) return "";
  const Version2 newest = newest_known_ptx_isa();
  if (isa > newest) {
    return "; ptx isa " + isa_text(isa) + " is newer than every cuda release in the architecture table (newest: ptx isa " +
           isa_text(newest) + "), so the driver it needs is unknown: add its release row";
  }
  if (min_driver_for_ptx_isa(isa).empty()) {
    return "; the minimum driver for ptx isa " + isa_text(isa) + " is not recorded in the architecture table";
  }
  return "";
}

}  // namespace

bool sass_runs_on(Arch arch, const Device& device) {
  const Version2 acc = cc_of_sm(arch.sm);
  switch (arch.suffix) {
    case Suffix::a:
      return acc == device.cc;  // rule 3: exactly that CC
    case Suffix::f:
      return arch_inferred(arch) ? acc == device.cc : family_match(arch, device);  // rule 4
    case Suffix::none:
      break;
  }
  if (acc.major != device.cc.major) return false;  // rule 1: never across majors
  if (acc == device.cc) return true;
  const ArchRow* row = find_arch(arch.sm);
  // An arch the table lacks may be a Tegra part: no minor-version compatibility.
  if (row == nullptr) return false;
  if (is_tegra(device) || row->tegra) return false;  // rule 1: Tegra exception
  return device.cc.minor >= acc.minor;
}

bool ptx_targets(Arch arch, const Device& device) {
  switch (arch.suffix) {
    case Suffix::a:
      return cc_of_sm(arch.sm) == device.cc;  // rule 3
    case Suffix::f:
      return arch_inferred(arch) ? cc_of_sm(arch.sm) == device.cc : family_match(arch, device);  // rule 4
    case Suffix::none:
      break;
  }
  return device.cc.packed() >= arch.sm;  // rule 2
}

Device device_for_cc(Version2 cc) {
  const ArchRow* row = find_arch(cc.packed());
  return Device{cc, row != nullptr && row->tegra};
}

namespace {

/// The images the driver would consider for a device, by kind and whether they serve it.
struct Candidates {
  std::vector<std::size_t> sass_all, sass_ok, ptx_all, ptx_ok;
  bool relocatable = false;
  std::size_t considered = 0;
};

Candidates candidates(std::span<const Image> images, const Device& d) {
  Candidates c;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const Image& im = images[i];
    if (im.device_link) continue;  // rule 9: the device-link fatbin decides nothing
    ++c.considered;
    c.relocatable = c.relocatable || im.relocatable;
    if (im.kind == CodeKind::sass) {
      c.sass_all.push_back(i);
      if (sass_runs_on(im.arch, d)) c.sass_ok.push_back(i);
    } else if (im.kind == CodeKind::ptx) {
      c.ptx_all.push_back(i);
      if (ptx_targets(im.arch, d)) c.ptx_ok.push_back(i);
    }
    // LTO-IR is an nvlink input; the driver never loads it.
  }
  return c;
}

std::size_t best_of(std::span<const Image> images, const std::vector<std::size_t>& idx) {
  return *std::min_element(idx.begin(), idx.end(),
                           [&](std::size_t x, std::size_t y) { return better(images[x], images[y]); });
}

Verdict failed(int err, std::string why, const std::string& note) {
  return Verdict{Outcome::fail, err, std::nullopt, std::move(why) + note};
}

/// No SASS runs (or the JIT is forced) and no PTX targets the device.
Verdict no_image(std::span<const Image> images, const Candidates& c, const Device& d, const DriverSettings& settings,
                 const std::string& on, const std::string& note) {
  if (settings.force_ptx_jit) {
    return failed(kErrNoKernelImage,
                  "no kernel image for " + on + ": CUDA_FORCE_PTX_JIT=1 ignores the sass (" +
                      (c.sass_all.empty() ? std::string("none") : names(images, c.sass_all)) +
                      ") and no ptx can be jit-compiled for it" +
                      (c.ptx_all.empty() ? "" : " (found " + names(images, c.ptx_all) + ")"),
                  note);
  }
  if (c.relocatable && c.ptx_all.empty()) {
    // Rule 8: an -rdc executable whose SASS does not match fails when the runtime looks up
    // the kernel in the linked module, not with 209.
    return failed(kErrSymbolNotFound,
                  "named symbol not found on " + on + ": the -rdc executable holds only sass (" +
                      names(images, c.sass_all) + ") and none of it runs there" + rename_hint(images, c.sass_all, d),
                  note);
  }
  std::string why = "no kernel image for " + on + ": ";
  if (c.sass_all.empty()) {
    why += "there is no sass";
  } else {
    why += "sass " + names(images, c.sass_all) + " does not run there";
  }
  why += c.ptx_all.empty()
             ? " and there is no ptx"
             : " and ptx " + names(images, c.ptx_all) + " targets no cc at or below " + common::version_text(d.cc);
  const std::string rename = rename_hint(images, c.sass_all, d);
  return failed(kErrNoKernelImage, why + rename + fix_hint(images, c.sass_all, d, rename), note);
}

/// Rule 6: every PTX that targets the device has an ISA newer than the driver accepts.
Verdict ptx_too_new(std::span<const Image> images, const Candidates& c, const DriverSettings& settings,
                    Version2 max_isa, const std::string& note) {
  const std::size_t pick = best_of(images, c.ptx_ok);
  // A driver older than every release the table records accepts no PTX it can vouch for.
  std::string accepts = "accepts at most " + isa_text(max_isa);
  if (max_isa.empty()) {
    accepts = "is older than the minimum driver of every cuda release in the architecture table";
    for (const ReleaseRow& r : release_rows()) {
      if (*r.min_driver == '\0') continue;
      accepts += " (the oldest, cuda " + common::version_text(r.cuda) + ", needs " + r.min_driver + ")";
      break;
    }
  }
  return failed(kErrUnsupportedPtx,
                "ptx " + image_name(images[pick]) + " has ptx isa " + isa_text(images[pick].ptx_isa) + " but driver " +
                    format_driver_version(*settings.driver) + " " + accepts + " (unsupported toolchain)" +
                    unknown_isa_note(images[pick].ptx_isa),
                note);
}

/// The PTX the driver jit-compiles for the device, or why it accepts none (rule 6).
Verdict jit_verdict(std::span<const Image> images, const Candidates& c, const DriverSettings& settings,
                    const std::string& on, const std::string& note) {
  // Rule 6: the driver rejects PTX whose ISA is newer than it knows.
  std::vector<std::size_t> usable;
  Version2 max_isa{};
  if (settings.driver) max_isa = ptx_isa_for_driver(*settings.driver);
  // A driver of a newer branch than any release whose minimum driver the table records may well
  // accept PTX newer than what the table can vouch for: that cannot be judged, so it is not
  // called a failure (a driver of a recorded branch, such as 580.x for CUDA 13.0, is judged).
  const bool driver_beyond_table = settings.driver && settings.driver->major > newest_recorded_driver_branch();
  std::string unjudged;
  for (std::size_t i : c.ptx_ok) {
    const Image& im = images[i];
    if (!settings.driver || im.ptx_isa.empty() || im.ptx_isa <= max_isa) {
      usable.push_back(i);
    } else if (driver_beyond_table) {
      usable.push_back(i);
      unjudged = "; driver " + format_driver_version(*settings.driver) + " is of a newer branch than any driver in the " +
                 "architecture table, so whether it accepts ptx isa " + isa_text(im.ptx_isa) +
                 " cannot be judged here (assumed it does)";
    }
  }
  if (usable.empty()) return ptx_too_new(images, c, settings, max_isa, note);
  const std::size_t pick = best_of(images, usable);
  const Image& im = images[pick];
  std::string why = "no sass runs on " + on;
  if (settings.force_ptx_jit) why = "forced jit (CUDA_FORCE_PTX_JIT=1) ignores the sass";
  return Verdict{Outcome::jit, 0, pick,
                 why + "; the driver jit-compiles " + image_name(im) + " (ptx isa " + isa_text(im.ptx_isa) + ")" +
                     (im.relocatable ? " from the relocatable fatbin" : "") + note + unjudged};
}

}  // namespace

Verdict select_image(std::span<const Image> images, const Device& device, const DriverSettings& settings) {
  std::string note;
  const Device d = effective_device(device, settings, note);
  const std::string on = "cc " + common::version_text(d.cc);
  const Candidates c = candidates(images, d);
  if (c.considered == 0) {
    return failed(kErrNoKernelImage,
                  "no kernel image for " + on +
                      ": there are no images besides the device-link fatbin, which decides nothing",
                  note);
  }
  if (!settings.force_ptx_jit && !c.sass_ok.empty()) {
    const std::size_t pick = best_of(images, c.sass_ok);
    const Image& im = images[pick];
    std::string how = im.arch.suffix == Suffix::a    ? "the arch-specific image matches exactly"
                      : im.arch.suffix == Suffix::f  ? "it is of the same family"
                      : cc_of_sm(im.arch.sm) == d.cc ? "it matches exactly"
                                                     : "minor-version compatibility";
    return Verdict{Outcome::native, 0, pick,
                   "sass " + image_name(im) + " runs natively on " + on + " (" + how + ")" + note};
  }
  if (c.ptx_ok.empty()) return no_image(images, c, d, settings, on, note);
  if (settings.disable_ptx_jit) {
    return failed(kErrJitDisabled,
                  "only ptx (" + names(images, c.ptx_ok) + ") can serve " + on +
                      " and CUDA_DISABLE_PTX_JIT=1 forbids the jit",
                  note);
  }
  return jit_verdict(images, c, settings, on, note);
}

std::vector<Version2> loads_on(Target target) {
  std::vector<Version2> out;
  if (target.kind == CodeKind::ltoir) return out;
  for (const ArchRow& row : arch_rows()) {
    const Device d = device_for_cc(row.cc);
    const bool ok = target.kind == CodeKind::sass ? sass_runs_on(target.arch, d) : ptx_targets(target.arch, d);
    if (ok) out.push_back(row.cc);
  }
  // An inferred arch loads at least on its own CC, which has no row to iterate over.
  const Version2 own = cc_of_sm(target.arch.sm);
  if (arch_inferred(target.arch) && std::find(out.begin(), out.end(), own) == out.end()) {
    out.insert(std::upper_bound(out.begin(), out.end(), own), own);
  }
  return out;
}

namespace {

std::string cc_with_products(Version2 cc) {
  std::string out = "CC " + common::version_text(cc);
  const ArchRow* row = find_arch(cc.packed());
  if (row != nullptr && *row->products != '\0') out += std::string(" (") + row->products + ")";
  return out;
}

std::string cc_list(const std::vector<Version2>& ccs, bool products) {
  std::string out;
  for (std::size_t i = 0; i < ccs.size(); ++i) {
    if (i != 0) out += i + 1 == ccs.size() ? " and " : ", ";
    out += products ? cc_with_products(ccs[i]) : common::version_text(ccs[i]);
  }
  return out;
}

std::string release_facts(Arch arch, const ArchRow& row) {
  std::string out;
  Version2 since = row.first_cuda;
  if (arch.suffix == Suffix::a) since = row.a_since;
  if (arch.suffix == Suffix::f) since = row.f_since;
  out += "; nvcc accepts it since CUDA " + common::version_text(since);
  if (const RenameRow* rn = find_rename(row.sm)) {
    out += "; renamed sm_" + std::to_string(rn->new_sm) + " in CUDA " + common::version_text(rn->cuda) + ", so CUDA " +
           common::version_text(rn->cuda) + " and later reject it: use " + std::to_string(rn->new_sm) +
           (arch.suffix == Suffix::none ? "" : std::string(1, arch.suffix == Suffix::a ? 'a' : 'f'));
  } else if (!row.removed_in.empty()) {
    out += " until CUDA " + common::version_text(row.removed_in) + ", which removed it";
  }
  return out;
}

// What can safely be said of an arch the table lacks (see arch_inferred).
std::string explain_inferred(Target target) {
  const Version2 cc = cc_of_sm(target.arch.sm);
  const std::string inferred = " (inferred: not in the architecture table)";
  switch (target.kind) {
    case CodeKind::ltoir:
      return "LTO-IR for CC " + common::version_text(cc) + ": input to link-time optimization (nvlink -dlto); the driver never loads it" +
             inferred;
    case CodeKind::sass:
      return "SASS for CC " + common::version_text(cc) + " only" +
             (target.arch.suffix == Suffix::none ? std::string("; whether other CCs run it (minor-version compatibility, ") +
                                                       "Tegra) is unknown"
                                                 : std::string("; its family is unknown")) +
             "; never on another major" + inferred;
    case CodeKind::ptx:
      if (target.arch.suffix != Suffix::none) return "PTX that compiles only to CC " + common::version_text(cc) + inferred;
      return "PTX for CC " + common::version_text(cc) + " and later: the driver JIT-compiles it on any GPU of CC >= " + common::version_text(cc) +
             " (first-launch delay) when it accepts the PTX ISA" + inferred;
  }
  return inferred;
}

}  // namespace

std::string explain_target(Target target) {
  const Arch arch = target.arch;
  const ArchRow* row = find_arch(arch.sm);
  const std::string name = nvcc_name(arch, target.kind);
  if (row == nullptr) return explain_inferred(target);
  if (!arch_exists(arch)) return name + ": not an architecture in the table";
  const std::vector<Version2> ccs = loads_on(target);
  std::string out;
  const std::string tegra = row->tegra ? ", a Tegra part: no minor-version compatibility" : "";
  // The other members of the arch's family or major that this target misses.
  std::vector<Version2> missed, missed_tegra;
  for (const ArchRow& r : arch_rows()) {
    if (r.cc.major != row->cc.major || r.sm <= row->sm) continue;
    if (std::find(ccs.begin(), ccs.end(), r.cc) != ccs.end()) continue;
    (r.tegra == row->tegra ? missed : missed_tegra).push_back(r.cc);
  }
  std::string family_hint;
  if (!row->f_since.empty() && row->family != 0) {
    bool bigger_family = false;
    for (const ArchRow& r : arch_rows()) bigger_family = bigger_family || (r.family == row->family && r.sm > row->sm);
    if (bigger_family) family_hint = "; use " + std::to_string(row->sm) + "f to cover the family";
  }
  switch (target.kind) {
    case CodeKind::ltoir:
      return "LTO-IR for CC " + common::version_text(row->cc) +
             ": input to link-time optimization (nvlink -dlto); the driver never loads it" + release_facts(arch, *row);
    case CodeKind::sass:
      if (arch.suffix == Suffix::a) {
        out = "SASS for CC " + common::version_text(row->cc) + " only";
        if (*row->products != '\0') out += std::string(" (") + row->products + ")";
        if (!missed.empty()) {
          out += "; does not run on " + cc_list(missed, true) + family_hint;
        } else {
          out += "; arch-specific: no other GPU runs it, not even a later one";
        }
      } else if (arch.suffix == Suffix::f) {
        out = "SASS for the family of CC " + common::version_text(row->cc) + ": runs on " + cc_list(ccs, true);
      } else {
        out = "SASS for " + cc_with_products(row->cc) + tegra;
        std::vector<Version2> others;
        for (Version2 cc : ccs) {
          if (cc != row->cc) others.push_back(cc);
        }
        if (!others.empty()) out += "; also runs on " + cc_list(others, true) + " (minor-version compatibility)";
        if (!missed.empty()) out += "; does not run on " + cc_list(missed, true);
        if (!missed_tegra.empty()) {
          out += (row->tegra ? "; not on " : "; not on the Tegra part ") + cc_list(missed_tegra, true);
        }
        out += "; never on another major";
      }
      break;
    case CodeKind::ptx:
      if (arch.suffix == Suffix::a) {
        out = "PTX that compiles only to sm_" + arch_number(arch) + ": JIT on " + cc_with_products(row->cc) + " only";
      } else if (arch.suffix == Suffix::f) {
        out = "PTX for the family of CC " + common::version_text(row->cc) + ": JIT on " + cc_list(ccs, false);
      } else {
        out = "PTX for CC " + common::version_text(row->cc) + " and later: the driver JIT-compiles it on any GPU of CC >= " +
              common::version_text(row->cc) + " (first-launch delay) when it accepts the PTX ISA";
      }
      break;
  }
  return out + release_facts(arch, *row);
}

}  // namespace archguard
