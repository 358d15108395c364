// SPDX-License-Identifier: Apache-2.0
// The report vocabulary of the doctor: statuses, fixes, and the small parsers the steps share.
#include <archguard/doctor.hpp>

#include "common/driver_env.hpp"
#include "common/names.hpp"
#include "common/version.hpp"

#include <cstdlib>
#include <string>

namespace archguard::doctor {

std::string_view to_string(Level level) {
  static constexpr common::Named<Level> names[] = {{Level::pass, "pass"}, {Level::warn, "warn"}, {Level::fail, "fail"}, {Level::skip, "skip"}};
  return common::name_in(names, level);
}

std::string_view to_string(FixKind kind) {
  static constexpr common::Named<FixKind> names[] = {{FixKind::rebuild, "rebuild"}, {FixKind::driver, "driver"}, {FixKind::environment, "environment"}, {FixKind::other, "other"}};
  return common::name_in(names, kind);
}

namespace {
int rank(Level s) {
  switch (s) {
    case Level::skip:
      return 0;
    case Level::pass:
      return 1;
    case Level::warn:
      return 2;
    case Level::fail:
      return 3;
  }
  return 0;
}
}  // namespace

Level worst(Level a, Level b) { return rank(a) >= rank(b) ? a : b; }

Level Step::status() const {
  Level s = Level::skip;
  for (const Finding& f : findings) s = worst(s, f.status);
  return s;
}

Level Report::overall() const {
  Level s = Level::skip;
  for (const Step& step : steps) s = worst(s, step.status());
  return s;
}

EnvLookup process_environment() { return common::process_env; }

std::optional<Version2> parse_cc(std::string_view text) { return common::parse_cc(text); }

std::optional<DriverVersion> parse_proc_driver_version(std::string_view text) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue ..." (open and
  // proprietary modules word it differently; the first dotted number after "Module" is it).
  auto line_end = text.find('\n');
  std::string_view line = text.substr(0, line_end);
  auto at = line.find("Module");
  if (at == std::string_view::npos) return std::nullopt;
  line.remove_prefix(at + 6);
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] < '0' || line[i] > '9')) ++i;
    std::size_t j = i;
    while (j < line.size() && ((line[j] >= '0' && line[j] <= '9') || line[j] == '.')) ++j;
    std::string_view token = line.substr(i, j - i);
    if (token.find('.') != std::string_view::npos) {
      auto v = parse_driver_version(token);
      if (v) return *v;
    }
    i = j;
  }
  return std::nullopt;
}

std::vector<Target> targets_for(Version2 cc) {
  const Arch arch{cc.packed(), Suffix::none};
  return {Target{arch, CodeKind::sass}, Target{arch, CodeKind::ptx}};
}

Fix rebuild_fix(Version2 cc, std::string_view why) {
  const auto targets = targets_for(cc);
  Fix fix;
  fix.kind = FixKind::rebuild;
  fix.text = "add sass and ptx for compute capability " + common::version_text(cc) +
             " to the build's targets";
  if (!why.empty()) fix.text += " (" + std::string(why) + ")";
  fix.details.push_back("CMake: add \"" + format_targets(targets, Dialect::cmake) +
                        "\" to CMAKE_CUDA_ARCHITECTURES, or let include(CudaArchGuard) choose (-DARCH_POLICY=all-major)");
  fix.details.push_back("nvcc: add " + format_targets(targets, Dialect::nvcc));
  fix.details.push_back("PyTorch extensions: add \"" + format_targets(targets, Dialect::torch) +
                        "\" to TORCH_CUDA_ARCH_LIST");
  return fix;
}

}  // namespace archguard::doctor
