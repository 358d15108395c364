// SPDX-License-Identifier: Apache-2.0
// Step 3: for each FILE (executable, library, archive, wheel, directory), the compatibility
// verdict on every visible device, naming the fatbins and kernels with no usable image.
#include "doctor/steps.hpp"

#include <archguard/container.hpp>
#include <archguard/coverage.hpp>
#include <archguard/deps.hpp>

#include <algorithm>
#include <filesystem>
#include <set>

namespace archguard::doctor::detail {
namespace {

std::string v2(Version2 v) { return std::to_string(v.major) + "." + std::to_string(v.minor); }
bool truthy(const std::optional<std::string>& v) { return v && !v->empty() && *v != "0"; }


}  // namespace

Step step_binaries(Session& s, Report& report) {
  Step step;
  step.number = 3;
  step.name = "binaries";
  if (s.options->files.empty()) {
    step.findings.push_back({Level::skip, "binaries", "no FILE given (archguard doctor FILE... checks binaries, "
                                                       "libraries, wheels and directories such as torch/lib)", ""});
    return step;
  }
  DriverSettings settings;
  settings.driver = report.driver_version;
  settings.force_ptx_jit = truthy(s.env("CUDA_FORCE_PTX_JIT"));
  settings.disable_ptx_jit = truthy(s.env("CUDA_DISABLE_PTX_JIT"));

  std::set<std::string> seen;  // each loaded library judged once over all FILEs
  for (const auto& file : s.options->files) seen.insert(real_path_or_self(file));
  for (const auto& file : s.options->files) {
    auto scan = scan_path(file);
    if (!scan) {
      step.findings.push_back({Level::fail, file, scan.message(), "check the path (a binary, library, archive, "
                                                                    "wheel or directory)"});
      continue;
    }
    for (const auto& e : scan->errors) step.findings.push_back({Level::warn, file, "not read: " + e, ""});
    std::size_t files_scanned = scan->directory ? 0 : 1;
    if (scan->directory) {
      std::error_code ec;
      for (std::filesystem::recursive_directory_iterator it(file, std::filesystem::directory_options::skip_permission_denied, ec), end;
           !ec && it != end; it.increment(ec))
        files_scanned += it->is_regular_file(ec) ? 1 : 0;
    }
    if (s.options->deps && is_program(*scan)) {
      // The libraries it loads fail at their own first launch: judge them with it.
      LoadedLibraries libs = add_loaded_libraries(*scan, seen);
      files_scanned += libs.files_read;
      for (const auto& m : libs.missing)
        step.findings.push_back({Level::warn, file, m.needed + " (needed by " + m.loaded_by + ") is not found on this machine; its device code is not judged",
                                 "install it or set LD_LIBRARY_PATH as the program runs"});
      for (const auto& n : libs.notes) step.findings.push_back({Level::warn, file, n, ""});
    }
    std::vector<const ObjectFatbins*> with_code;
    for (const auto& o : scan->objects)
      if (!units_of(o).empty()) with_code.push_back(&o);
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
    for (const auto& cc : report.assumed_cc) targets.push_back({file + " for cc " + v2(cc) + " (--cc)", cc, false});
    if (targets.empty()) {
      step.findings.push_back({Level::skip, file,
                               std::to_string(with_code.size()) +
                                   " object(s) with device code; no visible device to judge them against",
                               "run `archguard doctor --cc X.Y " + file + "` for the gpu it must run on"});
      continue;
    }
    for (const auto& d : targets) {
      Device dev = device_for_cc(d.cc);
      dev.tegra = dev.tegra || d.tegra;
      std::size_t native = 0, jit = 0, failed = 0;
      std::string failures;
      int first_error = 0;
      std::size_t shown = 0;
      for (const ObjectFatbins* o : with_code) {
        const ObjectVerdict v = check_object(*o, dev, settings);
        if (v.outcome == Outcome::native) ++native;
        else if (v.outcome == Outcome::jit) ++jit;
        else {
          ++failed;
          if (first_error == 0) first_error = v.cuda_error;
          if (shown >= 5) continue;
          ++shown;
          failures += failures.empty() ? "" : "; ";
          failures += o->path;
          if (!o->loaded_by.empty()) failures += " (loaded by " + o->loaded_by + ")";
          std::size_t bad_units = 0;
          std::string reason;
          for (const auto& u : v.units)
            if (u.verdict.outcome == Outcome::fail) {
              ++bad_units;
              if (reason.empty()) reason = u.verdict.reason;
            }
          failures += " (" + std::to_string(bad_units) + " fatbin(s): " + reason;
          if (auto kernels = kernels_without_image(*o, v); kernels && !kernels->empty()) {
            failures += "; kernels ";
            for (std::size_t i = 0; i < kernels->size() && i < 4; ++i)
              failures += (i ? ", " : "") + (*kernels)[i].kernel.demangled;
            if (kernels->size() > 4) failures += " and " + std::to_string(kernels->size() - 4) + " more";
          }
          failures += ")";
        }
      }
      const std::string& who = d.who;
      std::string counts = std::to_string(with_code.size()) + " object(s) with device code: " +
                           std::to_string(native) + " native, " + std::to_string(jit) + " through ptx jit, " +
                           std::to_string(failed) + " without a usable image";
      if (failed > 0) {
        std::string fix;
        if (first_error == kErrJitDisabled) fix = "unset CUDA_DISABLE_PTX_JIT";
        else if (first_error == kErrUnsupportedPtx) fix = "install a newer driver (the ptx is newer than it accepts)";
        else if (settings.force_ptx_jit && first_error == kErrNoKernelImage) fix = "unset CUDA_FORCE_PTX_JIT";
        else fix = "rebuild for cc " + v2(d.cc);
        step.findings.push_back({Level::fail, who,
                                 "cc " + v2(d.cc) + ": " + counts + " (error " + std::to_string(first_error) +
                                     " at first launch): " + failures + (failed > shown ? "; ..." : ""),
                                 fix});
      } else {
        step.findings.push_back({jit > 0 ? Level::warn : Level::pass, who,
                                 "cc " + v2(d.cc) + ": " + counts +
                                     (jit > 0 ? " (each jit costs start-up time at first launch)" : ""),
                                 jit == 0                 ? ""
                                 : settings.force_ptx_jit ? "unset CUDA_FORCE_PTX_JIT to use the sass"
                                                          : "rebuild for cc " + v2(d.cc) + " to skip the jit"});
      }
    }
  }
  return step;
}

}  // namespace archguard::doctor::detail
