// SPDX-License-Identifier: Apache-2.0
#include <archguard/selfcheck.hpp>

#include <archguard/container.hpp>
#include <archguard/coverage.hpp>
#include <archguard/device.hpp>

#include "common/driver_env.hpp"
#include "doctor/probes.hpp"

#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace archguard::selfcheck {
namespace {

struct Loaded {
  std::string path;
};

int collect(dl_phdr_info* info, std::size_t /*size*/, void* data) {
  auto* out = static_cast<std::vector<Loaded>*>(data);
  std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (name.empty()) {
    if (!out->empty()) return 0;  // only the first unnamed object is the executable
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    name = ec ? std::string("/proc/self/exe") : exe.string();
  }
  if (name.find("linux-vdso") != std::string::npos || name.find("linux-gate") != std::string::npos) return 0;
  out->push_back({name});
  return 0;
}

}  // namespace

bool Report::can_run() const {
  for (const auto& o : objects)
    if (o.outcome == Outcome::fail) return false;
  return true;
}

bool Report::needs_jit() const {
  for (const auto& o : objects)
    if (o.outcome == Outcome::jit) return true;
  return false;
}

std::vector<std::string> Report::kernels_without_image() const {
  std::vector<std::string> out;
  for (const auto& o : objects)
    for (const auto& k : o.kernels_without_image) out.push_back(o.path + ": " + k);
  return out;
}

Result<Report> check_current_process(const Device& device, const DriverSettings& settings, const std::string& include) {
  std::vector<Loaded> loaded;
  ::dl_iterate_phdr(collect, &loaded);
  Report report;
  report.target = device;
  report.settings = settings;
  ScanOptions scan_options;
  scan_options.threads = 1;
  for (const auto& l : loaded) {
    if (!include.empty() && l.path.find(include) == std::string::npos) continue;
    auto scan = scan_path(l.path, scan_options);
    if (!scan) {
      report.errors.push_back(scan.message());
      continue;
    }
    for (const auto& e : scan->errors) report.errors.push_back(e);
    for (const auto& object : scan->objects) {
      if (units_of(object).empty()) continue;
      const ObjectVerdict v = check_object(object, device, settings);
      ObjectResult r;
      r.path = object.path;
      r.outcome = v.outcome;
      r.cuda_error = v.cuda_error;
      for (const auto& u : v.units)
        if (u.verdict.outcome == Outcome::fail) {
          r.reason = u.verdict.reason;
          break;
        }
      if (v.outcome == Outcome::fail) {
        auto kernels = kernels_without_image(object, v);
        if (kernels) {
          for (const auto& k : *kernels) r.kernels_without_image.push_back(k.kernel.demangled);
        } else {
          report.errors.push_back(kernels.message());
        }
      }
      report.objects.push_back(std::move(r));
    }
  }
  return report;
}

Result<Report> check_current_process(int ordinal) {
  AG_TRY(auto driver, device::Driver::shared());
  if (!driver->init_status().ok()) return driver->init_status().error();
  AG_TRY(auto info, driver->device(ordinal));
  Device dev = device_for_cc(info.cc);
  dev.tegra = dev.tegra || info.integrated;
  DriverSettings settings;
  const common::DriverEnv driver_env = common::read_driver_env();
  settings.force_ptx_jit = driver_env.force_ptx_jit_on();
  settings.disable_ptx_jit = driver_env.disable_ptx_jit_on();
  settings.driver = doctor::detail::probe_proc_driver_version();
  if (!settings.driver) settings.driver = doctor::detail::probe_nvml("libnvidia-ml.so.1").driver;
  auto r = check_current_process(dev, settings);
  if (r) r->device = ordinal;
  return r;
}

}  // namespace archguard::selfcheck
