// SPDX-License-Identifier: Apache-2.0
// Step 3: for each FILE (executable, library, archive, wheel, directory), the compatibility
// verdict on every visible device, naming the fatbins and kernels with no usable image.
#include "doctor/steps.hpp"

#include "common/driver_env.hpp"
#include "common/parallel.hpp"
#include "common/version.hpp"

#include <archguard/container.hpp>
#include <archguard/coverage.hpp>
#include <archguard/deps.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

namespace archguard::doctor::detail {
namespace {

/// What static analysis cannot see: for each FILE that is an executable or a shared library,
/// whether it loads code at run time. A note (pass), never a problem: what it loads is not judged.
void note_runtime_loading(const std::vector<std::string>& files, Step& step, Report& report) {
  for (const auto& file : files) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) continue;  // directories are judged file by file
    auto loading = runtime_loading(file);
    if (!loading) {
      step.findings.push_back({Level::skip, file, "whether it loads code at run time is unknown: " + loading.message(), ""});
      continue;
    }
    if (!loading->loads_at_run_time()) continue;
    std::string why;
    for (const auto& r : loading->reasons) why += (why.empty() ? "" : ", ") + r;
    step.findings.push_back({Level::pass, file,
                             why + ": device code it loads at run time" +
                                 (loading->python.empty() ? "" : " (every extension module is dlopen()ed)") +
                                 " is not judged here; run `" + run_command(file) + "` to watch its launches",
                             ""});
    report.runtime_loading.push_back(std::move(*loading));
  }
}

/// The first `most` of `items` (as `name` spells each), comma separated, then "and N more".
template <typename Items, typename Name>
std::string first_few(const Items& items, std::size_t most, Name name) {
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < most; ++i) text += (i ? ", " : "") + name(items[i]);
  if (items.size() > most) text += " and " + std::to_string(items.size() - most) + " more";
  return text;
}

std::string first_few(const std::vector<std::string>& items, std::size_t most) {
  return first_few(items, most, [](const std::string& item) { return item; });
}

/// The driver's settings as the environment makes them.
DriverSettings driver_settings(const EnvLookup& env, const std::optional<DriverVersion>& driver) {
  DriverSettings settings;
  settings.driver = driver;
  const common::DriverEnv driver_env = common::read_driver_env(env);
  settings.force_ptx_jit = driver_env.force_ptx_jit_on();
  settings.disable_ptx_jit = driver_env.disable_ptx_jit_on();
  return settings;
}

/// Reads FILE, with the libraries it loads when --deps; warns of what it could not read.
/// Returns false (after a finding) when FILE is not read at all.
bool scan_file(const Session& s, const std::string& file, std::set<std::string>& seen, Step& step, ScanReport& scan,
               std::size_t& files_scanned, std::optional<Result<ScanReport>> read_before) {
  auto scanned = read_before ? std::move(*read_before) : read_file(*s.options, file);
  if (!scanned) {
    step.findings.push_back({Level::fail, file, scanned.message(),
                             "check the path (a binary, library, archive, "
                             "wheel or directory)",
                             FixKind::other});
    return false;
  }
  scan = std::move(*scanned);
  for (const auto& e : scan.errors) step.findings.push_back({Level::warn, file, "not read: " + e, ""});
  // As `check` counts them: every regular file the walk read (a second walk of a large tree
  // cost a tenth of a second of stat calls).
  files_scanned = scan.files_read;
  if (s.options->deps && is_program(scan)) {
    // The libraries it loads fail at their own first launch: judge them with it.
    LoadedLibraries libs = add_loaded_libraries(scan, seen);
    files_scanned += libs.files_read;
    for (const auto& m : libs.missing)
      step.findings.push_back({Level::warn, file, m.needed + " (needed by " + m.loaded_by + ") is not found on this machine; its device code is not judged",
                               "install it or set LD_LIBRARY_PATH as the program runs", FixKind::other});
    for (const auto& n : libs.notes) step.findings.push_back({Level::warn, file, n, ""});
  }
  return true;
}

/// A device (or a --cc) FILE is judged for.
struct Target {
  std::string who;
  Version2 cc;
  bool tegra;
};

std::vector<Target> targets_for(const std::string& file, const Report& report) {
  std::vector<Target> targets;
  for (const auto& d : report.devices)
    targets.push_back({file + " on device " + std::to_string(d.ordinal), d.cc, d.tegra});
  for (const auto& cc : report.assumed_cc) targets.push_back({file + " for cc " + common::version_text(cc) + " (--cc)", cc, false});
  return targets;
}

// ---- the last run's GPUs, to judge the first FILE for while the driver starts -------------

/// The key of the record of the GPUs and driver settings step 3 last judged for.
constexpr std::string_view kDevicesKey = "doctor: devices judged 1";

bool same_devices(const std::vector<Device>& a, const std::vector<Device>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const Device& x, const Device& y) { return x.cc == y.cc && x.tegra == y.tegra; });
}

bool same_settings(const DriverSettings& a, const DriverSettings& b) {
  const auto version = [](const std::optional<DriverVersion>& v) {
    return v ? std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + "/" +
                   std::to_string(v->components)
             : std::string("-");
  };
  return version(a.driver) == version(b.driver) && a.force_ptx_jit == b.force_ptx_jit && a.disable_ptx_jit == b.disable_ptx_jit;
}

/// The record: "<major> <minor> <patch> <components>" of the driver (or "-"), then one line
/// "<cc major> <cc minor> <tegra>" per device.
std::string devices_record(const std::vector<Device>& devs, const std::optional<DriverVersion>& driver) {
  std::string text = driver ? std::to_string(driver->major) + " " + std::to_string(driver->minor) + " " +
                                  std::to_string(driver->patch) + " " + std::to_string(driver->components)
                            : std::string("-");
  for (const Device& d : devs)
    text += "\n" + std::to_string(d.cc.major) + " " + std::to_string(d.cc.minor) + " " + (d.tegra ? "1" : "0");
  return text;
}

void keep_devices_judged(FactsStore* results, const std::vector<Device>& devs, const DriverSettings& settings) {
  if (results == nullptr) return;
  const std::string text = devices_record(devs, settings.driver);
  if (auto kept = results->find_file(std::string(kDevicesKey));
      kept && std::string(reinterpret_cast<const char*>(kept->data()), kept->size()) == text)  // bytes as chars
    return;
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  results->keep_file(std::string(kDevicesKey), std::move(bytes));
}

/// The GPUs and driver of the record; nothing when there is none or it does not parse.
std::optional<std::pair<std::vector<Device>, std::optional<DriverVersion>>> devices_judged(FactsStore* results) {
  if (results == nullptr) return std::nullopt;
  const auto kept = results->find_file(std::string(kDevicesKey));
  if (!kept || kept->size() > 4096) return std::nullopt;
  std::istringstream in(std::string(reinterpret_cast<const char*>(kept->data()), kept->size()));  // bytes as chars
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  std::optional<DriverVersion> driver;
  if (line != "-") {
    std::istringstream f(line);
    DriverVersion v;
    if (!(f >> v.major >> v.minor >> v.patch >> v.components)) return std::nullopt;
    driver = v;
  }
  std::vector<Device> devs;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    unsigned major = 0, minor = 0, tegra = 0;
    if (!(f >> major >> minor >> tegra) || major > 99 || minor > 99) return std::nullopt;
    Device d = device_for_cc(Version2{major, minor});
    d.tegra = tegra != 0;
    devs.push_back(d);
  }
  if (devs.empty()) return std::nullopt;
  return std::pair{std::move(devs), driver};
}

/// Every object on every target, objects in parallel: each object's images are decoded once
/// (or found in the results cache) for all targets.
Judgements judge_all(FactsStore* results, const ScanReport& scan, const std::vector<const ObjectFatbins*>& with_code,
                     const std::vector<Device>& devs, const DriverSettings& settings) {
  Judgements all{std::vector<std::vector<ObjectVerdict>>(devs.size(), std::vector<ObjectVerdict>(with_code.size())),
                 std::vector<std::vector<ObjectJudgement>>(devs.size(), std::vector<ObjectJudgement>(with_code.size()))};
  const PayloadPages pages(std::span<const ScanReport>(&scan, 1));
  const std::vector<std::size_t> order = most_work_first(with_code);
  const unsigned threads = common::thread_count(0);
  // Doctor leans to memory (issue 25: 300 MB for a whole environment, 2 s): a few objects at
  // once, each large one's images still decoded on every thread (KernelIndex::prefetch), within
  // a decode bound below check's. At 16 threads on a torch site-packages (2-core machine): peak
  // 378 -> 294 MiB, 0.94x the time; at 2 threads nothing changes (2 objects, 96 MiB).
  constexpr unsigned kObjectsAtOnce = 4;
  constexpr std::uint64_t kDecodeBytes = std::uint64_t{128} << 20;
  const DecodeBudget::Raised room(std::min(judging_decode_bytes(threads), kDecodeBytes));
  // And the decode buffers kept between images, 16 MiB rather than 48, all threads together: on
  // the H100 host (16 threads, its site-packages; paired, 4 runs each) doctor's peak went from
  // 282-298 MiB to 249-260 MiB, its time from 1.70-1.89 s to 1.88-1.96 s (buffers mapped and
  // faulted in afresh: 1 s more of system time over the 16 threads).
  constexpr std::size_t kScratchKept = std::size_t{16} << 20;
  const DecodeScratchKept kept(kScratchKept, DecodeScratchKept::Bound::at_most);
  common::parallel_for(with_code.size(), std::min(threads, kObjectsAtOnce), [&](std::size_t w) {
    const std::size_t oi = order[w];
    {
      KernelIndex index(results, *with_code[oi]);
      index.set_threads(threads);  // a large object's images on every core, not on this thread alone
      index.set_release([&pages](Bytes payload) { pages.release(payload); });
      for (std::size_t ti = 0; ti < devs.size(); ++ti) {
        auto judged = judge_with_store(*with_code[oi], devs[ti], settings, false, index);
        all.verdicts[ti][oi] = std::move(judged.verdict);
        all.judgements[ti][oi] = std::move(judged.judgement);
      }
    }
    pages.release(*with_code[oi]);  // judged: its payloads' pages leave the process
  });
  return all;
}

/// One target's objects counted by tier (docs/verdicts.md): the kernels are judged, not the fatbins.
struct Tally {
  std::size_t native = 0, jit = 0, none_run = 0, some_missing = 0, other_gpus = 0, no_kernels = 0;
  // JIT in executables (what a user builds and ships) is worth a rebuild; in shared libraries,
  // archive members of packages and standalone PTX/fatbin files it is their maker's choice.
  std::size_t jit_own = 0;
  std::string failures, notes;
  std::vector<std::string> rebuild_units;
  int first_error = 0;
  std::size_t shown = 0, noted = 0, variants = 0;
};

std::string variance_text(Variance variance) {
  return variance == Variance::variant ? "a variant: another one serves this gpu"
         : variance == Variance::newer ? "built for newer gpus only"
                                       : "built for particular gpus only";
}

/// A failing object in the finding's words: which units and kernels, and why.
std::string failure_text(const ObjectFatbins& o, const ObjectVerdict& v, const ObjectJudgement& j) {
  std::string text = o.path + (o.loaded_by.empty() ? "" : " (loaded by " + o.loaded_by + ")") +
                     (j.tier == Tier::none_run ? ": no kernel has an image" : ": some kernels have no image");
  const auto failing = j.failing();
  if (!failing.empty()) {
    text += " (in " + first_few(j.failing_units(), 3) + "; kernels " +
            first_few(failing, 4, [](const auto* k) { return k->kernel.demangled; }) + ")";
  }
  // Why, in the engine's words (e.g. the Tegra rule) and its fix: the first failing unit's.
  for (const auto& u : v.units)
    if (u.verdict.outcome == Outcome::fail) {
      text += " (" + u.verdict.reason + ")";
      break;
    }
  return text;
}

/// Counts one object into `t`; notes what is excused or built for other GPUs, names what fails.
void tally_object(const ObjectFatbins& o, const ObjectVerdict& v, const ObjectJudgement& j, const Variance* excused,
                  Tally& t) {
  if (excused) {  // a variant of it, or its other GPUs, serve the package
    ++t.variants;
    if (t.noted++ < 3) t.notes += (t.notes.empty() ? "" : "; ") + o.path + ": " + variance_text(*excused);
    return;
  }
  switch (j.tier) {
    case Tier::no_device_code:
    case Tier::no_kernels:
      ++t.no_kernels;
      return;
    case Tier::all_run:
    case Tier::other_gpus: {
      const bool via_jit = j.kernels_listed ? j.jit > 0 : v.outcome == Outcome::jit;
      ++(via_jit ? t.jit : t.native);
      if (via_jit && j.kind == ObjectKind::executable) ++t.jit_own;
      if (j.tier == Tier::other_gpus) {
        ++t.other_gpus;
        if (t.noted++ < 3)
          t.notes += (t.notes.empty() ? "" : "; ") + o.path + ": " + std::to_string(j.failed) + " of " +
                     std::to_string(j.native + j.jit + j.failed) + " kernels are built for other gpus only (" +
                     j.dispatch_evidence + ")";
      }
      return;
    }
    case Tier::some_missing:
      ++t.some_missing;
      break;
    case Tier::none_run:
      ++t.none_run;
      break;
  }
  if (t.first_error == 0) t.first_error = j.cuda_error;
  for (const auto& u : j.failing_units())
    if (std::find(t.rebuild_units.begin(), t.rebuild_units.end(), u) == t.rebuild_units.end()) t.rebuild_units.push_back(u);
  if (t.shown >= 5) return;
  ++t.shown;
  t.failures += t.failures.empty() ? "" : "; ";
  t.failures += failure_text(o, v, j);
}

std::string counts_text(std::size_t objects, const Tally& t) {
  std::string counts = std::to_string(objects) + " object(s) with device code: " + std::to_string(t.native) +
                       " native, " + std::to_string(t.jit) + " through ptx jit, " + std::to_string(t.none_run) +
                       " without a usable image, " + std::to_string(t.some_missing) + " with some kernels without an image";
  if (t.other_gpus > 0) counts += ", " + std::to_string(t.other_gpus) + " with kernels for other gpus only (not launched here)";
  if (t.variants > 0) counts += ", " + std::to_string(t.variants) + " variants of the package for other gpus or cuda runtimes (not loaded here)";
  if (t.no_kernels > 0) counts += ", " + std::to_string(t.no_kernels) + " defining no kernel";
  return counts;
}

/// The finding for one target from its tally.
Finding target_finding(const Target& d, std::size_t objects, const Tally& t, const DriverSettings& settings) {
  const std::size_t failed = t.none_run + t.some_missing;
  const std::string counts = counts_text(objects, t);
  if (failed > 0) {
    std::string fix;
    FixKind kind = FixKind::environment;
    if (t.first_error == kErrJitDisabled) fix = "unset CUDA_DISABLE_PTX_JIT";
    else if (t.first_error == kErrUnsupportedPtx) fix = "install a newer driver (the ptx is newer than it accepts)", kind = FixKind::driver;
    else if (settings.force_ptx_jit && t.first_error == kErrNoKernelImage) fix = "unset CUDA_FORCE_PTX_JIT";
    else {
      kind = FixKind::rebuild;
      const std::string units = first_few(t.rebuild_units, 3);
      fix = "rebuild for cc " + common::version_text(d.cc) + (units.empty() ? "" : " (" + units + ")");
    }
    return {Level::fail, d.who,
            "cc " + common::version_text(d.cc) + ": " + counts + " (error " + std::to_string(t.first_error) +
                " at first launch): " + t.failures + (failed > t.shown ? "; ..." : ""),
            fix, kind, d.cc};
  }
  return {t.jit > 0 ? Level::warn : Level::pass, d.who,
          "cc " + common::version_text(d.cc) + ": " + counts +
              (t.jit > 0 ? " (each jit costs start-up time at first launch)" : "") +
              (t.notes.empty() ? "" : "; " + t.notes + (t.other_gpus > t.noted ? "; ..." : "")),
          // A library's own PTX-only kernels are its maker's choice: no rebuild advice.
          t.jit == 0               ? ""
          : settings.force_ptx_jit ? "unset CUDA_FORCE_PTX_JIT to use the sass"
          : t.jit_own == 0         ? ""
                                   : "rebuild for cc " + common::version_text(d.cc) + " to skip the jit",
          settings.force_ptx_jit ? FixKind::environment : FixKind::rebuild, d.cc};
}

/// One FILE judged on every target: a finding per target (or why none).
void judge_file(const Session& s, const std::string& file, const Report& report, const DriverSettings& settings,
                std::set<std::string>& seen, Step& step, std::unique_ptr<FirstFile> first) {
  ScanReport scan;
  std::size_t files_scanned = 0;
  std::optional<Result<ScanReport>> read_before;
  if (first) read_before = std::move(first->read);
  // The objects of a first FILE judged in advance stay valid in `scan`: moving the report moves
  // its objects' array, not the objects. A program whose libraries --deps adds is judged anew.
  const bool in_advance = first && !first->judged.empty();
  if (!scan_file(s, file, seen, step, scan, files_scanned, std::move(read_before))) return;
  const bool grown = s.options->deps && is_program(scan);
  // Judged as `check` judges them: an archive's members as one static library, and a
  // directory or archive of several objects as a package (docs/verdicts.md).
  std::vector<JudgedObject> judged;
  std::vector<const ObjectFatbins*> with_code;
  std::vector<PackageMember> members;
  if (in_advance && !grown) {
    judged = std::move(first->judged);
    with_code = std::move(first->with_code);
    members = std::move(first->members);
  } else {
    judged = judged_objects(scan.objects);
    for (const auto& jo : judged)
      if (!units_of(jo.get()).empty()) with_code.push_back(&jo.get());
  }
  const bool package = scan.directory || std::any_of(with_code.begin(), with_code.end(), [](const ObjectFatbins* o) {
                         return !o->archive.empty() && o->loaded_by.empty();
                       });
  if (with_code.empty()) {
    step.findings.push_back({Level::pass, file,
                             "no device code (" + std::to_string(files_scanned) + (files_scanned == 1 ? " file" : " files") +
                                 " scanned; nothing that can fail with 209)",
                             ""});
    return;
  }
  const std::vector<Target> targets = targets_for(file, report);
  if (targets.empty()) {
    step.findings.push_back({Level::skip, file,
                             std::to_string(with_code.size()) +
                                 " object(s) with device code; no visible device to judge them against",
                             "run `archguard doctor --cc X.Y " + file + "` for the gpu it must run on", FixKind::other});
    return;
  }
  std::vector<Device> devs;
  for (const auto& d : targets) {
    devs.push_back(device_for_cc(d.cc));
    devs.back().tegra = devs.back().tegra || d.tegra;
  }
  keep_devices_judged(s.options->results, devs, settings);
  const bool same = in_advance && !grown && first->judgements && same_devices(first->devices, devs) &&
                    same_settings(first->settings, settings);
  Judgements all = same ? std::move(*first->judgements) : judge_all(s.options->results, scan, with_code, devs, settings);
  for (std::size_t ti = 0; ti < targets.size(); ++ti) {
    const std::vector<ObjectJudgement>& judgements = all.judgements[ti];
    PackageVerdict pv;
    if (package) {
      if (members.size() != with_code.size()) {
        members.clear();
        for (std::size_t i = 0; i < with_code.size(); ++i) members.push_back(package_member(*with_code[i], judgements[i]));
      }
      for (std::size_t i = 0; i < with_code.size(); ++i) members[i].judgement = &judgements[i];
      pv = judge_package(members, devs[ti]);
    }
    Tally tally;
    for (std::size_t oi = 0; oi < with_code.size(); ++oi) {
      const bool excused = package && pv.excused[oi];
      tally_object(*with_code[oi], all.verdicts[ti][oi], judgements[oi], excused ? &pv.variance[oi] : nullptr, tally);
    }
    step.findings.push_back(target_finding(targets[ti], with_code.size(), tally, settings));
  }
  if (left_to_exit(*s.options)) {
    // The objects stay where `judged`, `with_code` and `members` point: moving the report moves
    // its objects' array, not the objects.
    struct Read {
      ScanReport scan;
      std::vector<JudgedObject> judged;
      std::vector<const ObjectFatbins*> with_code;
      std::vector<PackageMember> members;
      Judgements all;
    };
    leave_to_exit(Read{std::move(scan), std::move(judged), std::move(with_code), std::move(members), std::move(all)});
  }
}

}  // namespace

Result<ScanReport> read_file(const Options& options, const std::string& file, SharedWalk* walk) {
  ScanOptions scan_options;
  scan_options.facts = options.results;
  scan_options.walk = walk;
  return scan_path(file, scan_options);
}

std::unique_ptr<FirstFile> read_first_file(const Options& options, const std::string& file, const EnvLookup& env, SharedWalk* walk) {
  auto first = std::make_unique<FirstFile>();
  first->read = read_file(options, file, walk);
  const auto last = devices_judged(options.results);
  if (!last || !*first->read) return first;
  const ScanReport& scan = **first->read;
  // A program whose libraries --deps adds is judged in step 3 with them.
  if (options.deps && is_program(scan)) return first;
  first->judged = judged_objects(scan.objects);
  for (const auto& jo : first->judged)
    if (!units_of(jo.get()).empty()) first->with_code.push_back(&jo.get());
  if (first->with_code.empty()) return first;
  const ObjectJudgement none;
  for (const ObjectFatbins* o : first->with_code) first->members.push_back(package_member(*o, none));
  first->devices = last->first;
  first->settings = driver_settings(env, last->second);
  first->judgements = judge_all(options.results, scan, first->with_code, first->devices, first->settings);
  return first;
}

Step step_binaries(Session& s, Report& report) {
  Step step;
  step.number = 3;
  step.name = "binaries";
  if (s.options->files.empty()) {
    step.findings.push_back({Level::skip, "binaries",
                             "no FILE given (archguard doctor FILE... checks binaries, "
                             "libraries, wheels and directories such as torch/lib)",
                             ""});
    return step;
  }
  const DriverSettings settings = driver_settings(s.env, report.driver_version);
  std::set<std::string> seen;  // each loaded library judged once over all FILEs
  for (const auto& file : s.options->files) seen.insert(real_path_or_self(file));
  for (std::size_t i = 0; i < s.options->files.size(); ++i) {
    std::unique_ptr<FirstFile> first;
    if (i == 0 && s.first_file.valid()) first = s.first_file.get();
    judge_file(s, s.options->files[i], report, settings, seen, step, std::move(first));
  }
  note_runtime_loading(s.options->files, step, report);
  return step;
}

}  // namespace archguard::doctor::detail
