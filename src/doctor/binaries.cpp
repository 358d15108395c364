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
#include <filesystem>
#include <set>

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

}  // namespace

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
  DriverSettings settings;
  settings.driver = report.driver_version;
  const common::DriverEnv driver_env = common::read_driver_env(s.env);
  settings.force_ptx_jit = driver_env.force_ptx_jit_on();
  settings.disable_ptx_jit = driver_env.disable_ptx_jit_on();

  std::set<std::string> seen;  // each loaded library judged once over all FILEs
  for (const auto& file : s.options->files) seen.insert(real_path_or_self(file));
  for (const auto& file : s.options->files) {
    ScanOptions scan_options;
    scan_options.facts = s.options->results;
    auto scan = scan_path(file, scan_options);
    if (!scan) {
      step.findings.push_back({Level::fail, file, scan.message(),
                               "check the path (a binary, library, archive, "
                               "wheel or directory)",
                               FixKind::other});
      continue;
    }
    for (const auto& e : scan->errors) step.findings.push_back({Level::warn, file, "not read: " + e, ""});
    // As `check` counts them: every regular file the walk read (a second walk of a large tree
    // cost a tenth of a second of stat calls).
    std::size_t files_scanned = scan->files_read;
    if (s.options->deps && is_program(*scan)) {
      // The libraries it loads fail at their own first launch: judge them with it.
      LoadedLibraries libs = add_loaded_libraries(*scan, seen);
      files_scanned += libs.files_read;
      for (const auto& m : libs.missing)
        step.findings.push_back({Level::warn, file, m.needed + " (needed by " + m.loaded_by + ") is not found on this machine; its device code is not judged",
                                 "install it or set LD_LIBRARY_PATH as the program runs", FixKind::other});
      for (const auto& n : libs.notes) step.findings.push_back({Level::warn, file, n, ""});
    }
    // Judged as `check` judges them: an archive's members as one static library, and a
    // directory or archive of several objects as a package (docs/verdicts.md).
    const std::vector<JudgedObject> judged = judged_objects(scan->objects);
    std::vector<const ObjectFatbins*> with_code;
    for (const auto& jo : judged)
      if (!units_of(jo.get()).empty()) with_code.push_back(&jo.get());
    const bool package = scan->directory || std::any_of(with_code.begin(), with_code.end(), [](const ObjectFatbins* o) {
                           return !o->archive.empty() && o->loaded_by.empty();
                         });
    if (with_code.empty()) {
      step.findings.push_back({Level::pass, file,
                               "no device code (" + std::to_string(files_scanned) + (files_scanned == 1 ? " file" : " files") +
                                   " scanned; nothing that can fail with 209)",
                               ""});
      continue;
    }
    struct Judged {
      std::string who;
      Version2 cc;
      bool tegra;
    };
    std::vector<Judged> targets;
    for (const auto& d : report.devices)
      targets.push_back({file + " on device " + std::to_string(d.ordinal), d.cc, d.tegra});
    for (const auto& cc : report.assumed_cc) targets.push_back({file + " for cc " + common::version_text(cc) + " (--cc)", cc, false});
    if (targets.empty()) {
      step.findings.push_back({Level::skip, file,
                               std::to_string(with_code.size()) +
                                   " object(s) with device code; no visible device to judge them against",
                               "run `archguard doctor --cc X.Y " + file + "` for the gpu it must run on", FixKind::other});
      continue;
    }
    // Every object on every target, objects in parallel: each object's images are decoded once
    // (or found in the results cache) for all targets.
    std::vector<Device> devs;
    for (const auto& d : targets) {
      devs.push_back(device_for_cc(d.cc));
      devs.back().tegra = devs.back().tegra || d.tegra;
    }
    std::vector<std::vector<ObjectVerdict>> all_verdicts(targets.size(), std::vector<ObjectVerdict>(with_code.size()));
    std::vector<std::vector<ObjectJudgement>> all_judgements(targets.size(), std::vector<ObjectJudgement>(with_code.size()));
    const PayloadPages pages(std::span<const ScanReport>(&*scan, 1));
    // Largest objects first (as `check` does): libtorch_cuda must not be the last item a thread
    // picks up while the others wait.
    std::vector<std::size_t> order(with_code.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return with_code[a]->fatbins.size() > with_code[b]->fatbins.size(); });
    common::parallel_for(with_code.size(), common::thread_count(0), [&](std::size_t w) {
      const std::size_t oi = order[w];
      {
        KernelIndex index(s.options->results, *with_code[oi]);
        for (std::size_t ti = 0; ti < targets.size(); ++ti) {
          all_verdicts[ti][oi] = check_object(*with_code[oi], devs[ti], settings, &index);
          all_judgements[ti][oi] = judge_object(*with_code[oi], all_verdicts[ti][oi], devs[ti], settings, false, &index);
        }
      }
      pages.release(*with_code[oi]);  // judged: its payloads' pages leave the process
    });
    for (std::size_t ti = 0; ti < targets.size(); ++ti) {
      const auto& d = targets[ti];
      const Device& dev = devs[ti];
      // Per object its tier (docs/verdicts.md): the kernels are judged, not the fatbins.
      std::size_t native = 0, jit = 0, none_run = 0, some_missing = 0, other_gpus = 0, no_kernels = 0;
      // JIT in executables (what a user builds and ships) is worth a rebuild; in shared libraries,
      // archive members of packages and standalone PTX/fatbin files it is their maker's choice.
      std::size_t jit_own = 0;
      std::string failures, notes;
      std::vector<std::string> rebuild_units;
      int first_error = 0;
      std::size_t shown = 0, noted = 0, variants = 0;
      const std::vector<ObjectVerdict>& verdicts = all_verdicts[ti];
      const std::vector<ObjectJudgement>& judgements = all_judgements[ti];
      PackageVerdict pv;
      if (package) {
        std::vector<PackageMember> members;
        for (std::size_t i = 0; i < with_code.size(); ++i)
          members.push_back(package_member(*with_code[i], judgements[i]));
        pv = judge_package(members, dev);
      }
      for (std::size_t oi = 0; oi < with_code.size(); ++oi) {
        const ObjectFatbins* o = with_code[oi];
        const ObjectVerdict& v = verdicts[oi];
        const ObjectJudgement& j = judgements[oi];
        if (package && pv.excused[oi]) {  // a variant of it, or its other GPUs, serve the package
          ++variants;
          if (noted++ < 3)
            notes += (notes.empty() ? "" : "; ") + o->path + ": " +
                     (pv.variance[oi] == Variance::variant ? "a variant: another one serves this gpu"
                      : pv.variance[oi] == Variance::newer ? "built for newer gpus only"
                                                           : "built for particular gpus only");
          continue;
        }
        switch (j.tier) {
          case Tier::no_device_code:
          case Tier::no_kernels:
            ++no_kernels;
            continue;
          case Tier::all_run:
          case Tier::other_gpus: {
            const bool via_jit = j.kernels_listed ? j.jit > 0 : v.outcome == Outcome::jit;
            ++(via_jit ? jit : native);
            if (via_jit && j.kind == ObjectKind::executable) ++jit_own;
            if (j.tier == Tier::other_gpus) {
              ++other_gpus;
              if (noted++ < 3)
                notes += (notes.empty() ? "" : "; ") + o->path + ": " + std::to_string(j.failed) + " of " +
                         std::to_string(j.native + j.jit + j.failed) + " kernels are built for other gpus only (" +
                         j.dispatch_evidence + ")";
            }
            continue;
          }
          case Tier::some_missing:
            ++some_missing;
            break;
          case Tier::none_run:
            ++none_run;
            break;
        }
        if (first_error == 0) first_error = j.cuda_error;
        for (const auto& u : j.failing_units())
          if (std::find(rebuild_units.begin(), rebuild_units.end(), u) == rebuild_units.end()) rebuild_units.push_back(u);
        if (shown >= 5) continue;
        ++shown;
        failures += failures.empty() ? "" : "; ";
        failures += o->path + (o->loaded_by.empty() ? "" : " (loaded by " + o->loaded_by + ")") + (j.tier == Tier::none_run ? ": no kernel has an image" : ": some kernels have no image");
        const auto failing = j.failing();
        if (!failing.empty()) {
          const auto units = j.failing_units();
          failures += " (in ";
          for (std::size_t i = 0; i < units.size() && i < 3; ++i) failures += (i ? ", " : "") + units[i];
          if (units.size() > 3) failures += " and " + std::to_string(units.size() - 3) + " more";
          failures += "; kernels ";
          for (std::size_t i = 0; i < failing.size() && i < 4; ++i) failures += (i ? ", " : "") + failing[i]->kernel.demangled;
          if (failing.size() > 4) failures += " and " + std::to_string(failing.size() - 4) + " more";
          failures += ")";
        }
        // Why, in the engine's words (e.g. the Tegra rule) and its fix: the first failing unit's.
        for (const auto& u : v.units)
          if (u.verdict.outcome == Outcome::fail) {
            failures += " (" + u.verdict.reason + ")";
            break;
          }
      }
      const std::size_t failed = none_run + some_missing;
      const std::string& who = d.who;
      std::string counts = std::to_string(with_code.size()) + " object(s) with device code: " + std::to_string(native) +
                           " native, " + std::to_string(jit) + " through ptx jit, " + std::to_string(none_run) +
                           " without a usable image, " + std::to_string(some_missing) + " with some kernels without an image";
      if (other_gpus > 0) counts += ", " + std::to_string(other_gpus) + " with kernels for other gpus only (not launched here)";
      if (variants > 0) counts += ", " + std::to_string(variants) + " variants of the package for other gpus or cuda runtimes (not loaded here)";
      if (no_kernels > 0) counts += ", " + std::to_string(no_kernels) + " defining no kernel";
      if (failed > 0) {
        std::string fix;
        FixKind kind = FixKind::environment;
        if (first_error == kErrJitDisabled) fix = "unset CUDA_DISABLE_PTX_JIT";
        else if (first_error == kErrUnsupportedPtx) fix = "install a newer driver (the ptx is newer than it accepts)", kind = FixKind::driver;
        else if (settings.force_ptx_jit && first_error == kErrNoKernelImage) fix = "unset CUDA_FORCE_PTX_JIT";
        else {
          kind = FixKind::rebuild;
          std::string units;
          for (std::size_t i = 0; i < rebuild_units.size() && i < 3; ++i) units += (i ? ", " : "") + rebuild_units[i];
          if (rebuild_units.size() > 3) units += " and " + std::to_string(rebuild_units.size() - 3) + " more";
          fix = "rebuild for cc " + common::version_text(d.cc) + (units.empty() ? "" : " (" + units + ")");
        }
        step.findings.push_back({Level::fail, who,
                                 "cc " + common::version_text(d.cc) + ": " + counts + " (error " + std::to_string(first_error) +
                                     " at first launch): " + failures + (failed > shown ? "; ..." : ""),
                                 fix, kind, d.cc});
      } else {
        step.findings.push_back({jit > 0 ? Level::warn : Level::pass, who,
                                 "cc " + common::version_text(d.cc) + ": " + counts +
                                     (jit > 0 ? " (each jit costs start-up time at first launch)" : "") +
                                     (notes.empty() ? "" : "; " + notes + (other_gpus > noted ? "; ..." : "")),
                                 // A library's own PTX-only kernels are its maker's choice: no rebuild advice.
                                 jit == 0                 ? ""
                                 : settings.force_ptx_jit ? "unset CUDA_FORCE_PTX_JIT to use the sass"
                                 : jit_own == 0           ? ""
                                                          : "rebuild for cc " + common::version_text(d.cc) + " to skip the jit",
                                 settings.force_ptx_jit ? FixKind::environment : FixKind::rebuild, d.cc});
      }
    }
  }
  note_runtime_loading(s.options->files, step, report);
  return step;
}

}  // namespace archguard::doctor::detail
