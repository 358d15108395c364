// SPDX-License-Identifier: Apache-2.0
// Step 1: which GPUs the CUDA driver shows this process, cross-checked with nvidia-smi and NVML.
#include "doctor/steps.hpp"

#include "common/driver_env.hpp"
#include "common/version.hpp"

#include <string>

namespace archguard::doctor::detail {
namespace {

const ProbedGpu* match(const ProbeResult& probe, const device::DeviceInfo& d) {
  const std::string bus = normalise_bus_id(d.pci_bus_id);
  for (const auto& g : probe.gpus)
    if (!bus.empty() && normalise_bus_id(g.pci_bus_id) == bus) return &g;
  return nullptr;
}

std::size_t machine_gpus(const Session& s) {
  return std::max(s.smi.available ? s.smi.gpus.size() : 0, s.nvml.available ? s.nvml.gpus.size() : 0);
}

/// The fix for a missing driver, with the minimum driver of the newest CUDA major the table
/// knows: with minor-version compatibility, binaries of every CUDA M.x run on the driver of M.0
/// (their PTX may need more).
std::string install_driver_fix() {
  std::string fix = "install the NVIDIA driver";
  const ReleaseRow* newest = nullptr;
  for (auto it = release_rows().rbegin(); it != release_rows().rend() && newest == nullptr; ++it)
    if (*it->min_driver != '\0') newest = &*it;
  if (newest != nullptr) {
    const ReleaseRow* first = newest;
    for (const auto& r : release_rows())
      if (r.cuda.major == newest->cuda.major && *r.min_driver != '\0') {
        first = &r;
        break;
      }
    fix += " (CUDA " + std::to_string(first->cuda.major) + ".x binaries need >= " + first->min_driver;
    if (first != newest)
      fix += "; PTX of CUDA " + common::version_text(newest->cuda) + " is JIT-compiled from " + newest->min_driver;
    fix += ")";
  }
  return fix + "; in a container, run it with the GPU exposed (docker --gpus all)";
}

/// libcuda.so.1 did not load (`problem`): why, and whether the machine has gpus all the same.
void no_driver(const Session& s, const std::string& problem, Step& step) {
  std::string why = problem;
  if (why.rfind("no cuda driver: ", 0) == 0) why.erase(0, 16);
  step.findings.push_back({Level::fail, "driver", "no cuda driver found: " + why, install_driver_fix(), FixKind::driver});
  if (machine_gpus(s) > 0)
    step.findings.push_back({Level::warn, "driver",
                             "nvidia-smi/NVML see " + std::to_string(machine_gpus(s)) +
                                 " gpu(s) but libcuda.so.1 could not be loaded by this process",
                             "add the driver's library directory to the loader path (ldconfig, LD_LIBRARY_PATH)", FixKind::driver});
}

/// The same text as step 4's, so that the verdict lists it once.
std::string hidden_fix() { return "unset CUDA_VISIBLE_DEVICES or list the gpus to use (e.g. 0)"; }

/// cuInit failed: hidden by CUDA_VISIBLE_DEVICES, or the driver's own failure.
void init_failed(const Session& s, const std::optional<std::string>& visible, Step& step) {
  const auto& e = s.driver->init_status();
  if (visible && machine_gpus(s) > 0) {
    step.findings.push_back({Level::fail, "CUDA_VISIBLE_DEVICES",
                             "CUDA_VISIBLE_DEVICES='" + *visible + "' hides every gpu: the machine has " +
                                 std::to_string(machine_gpus(s)) + " but cuInit says: " + e.message(),
                             hidden_fix(), FixKind::environment});
    return;
  }
  const bool no_device = e.kind() == ErrorKind::driver && e.code() == device::kCuErrorNoDevice;
  step.findings.push_back({Level::fail, "driver", "cuInit failed: " + e.message(),
                           no_device ? "check that the gpu is visible to this process (nvidia-smi, container --gpus)"
                                     : "check the driver installation (dmesg, nvidia-smi); reboot after a driver update",
                           no_device ? FixKind::other : FixKind::driver});
}

/// No device listed: hidden by CUDA_VISIBLE_DEVICES, or none at all.
void no_devices(const Session& s, const std::optional<std::string>& visible, Step& step) {
  if (visible && machine_gpus(s) > 0)
    step.findings.push_back({Level::fail, "CUDA_VISIBLE_DEVICES",
                             "CUDA_VISIBLE_DEVICES='" + *visible + "' hides every gpu (the machine has " +
                                 std::to_string(machine_gpus(s)) + ")",
                             hidden_fix(), FixKind::environment});
  else
    step.findings.push_back({Level::fail, "devices", "the driver reports no cuda device",
                             "check that the gpu is visible to this process (nvidia-smi, container --gpus)", FixKind::other});
}

/// What the driver says of device `d`, with nvidia-smi's and NVML's second opinions.
DeviceFacts device_facts(const Session& s, const device::DeviceInfo& d, const ArchRow* row) {
  DeviceFacts f;
  f.ordinal = d.ordinal;
  f.name = d.name;
  f.cc = d.cc;
  f.pci_bus_id = d.pci_bus_id;
  f.tegra = d.integrated || (row != nullptr && row->tegra);
  if (const auto* g = match(s.smi, d)) f.smi_cc = g->cc;
  if (const auto* g = match(s.nvml, d)) {
    f.nvml_cc = g->cc;
    f.mig_mode = g->mig;
  }
  f.uuid = d.uuid;
  return f;
}

/// The finding for device `d`: what it is, whether archguard's table knows it, and whether
/// nvidia-smi and NVML agree with the driver on its compute capability.
Finding device_finding(const device::DeviceInfo& d, const DeviceFacts& f, const ArchRow* row) {
  std::string msg = d.name + ", compute capability " + common::version_text(d.cc);
  if (row != nullptr) msg += std::string(" (") + row->codename + ")";
  msg += f.tegra ? ", integrated (tegra: no sass minor-version compatibility)" : "";
  msg += ", " + std::to_string(d.multiprocessors) + " sms, " + std::to_string(d.total_memory >> 20) + " MiB, pci " +
         d.pci_bus_id;
  Level status = Level::pass;
  std::string fix;
  if (row == nullptr) {
    status = Level::warn;
    msg += "; this capability is not in archguard's architecture table (newer than this release?)";
    fix = "update archguard; meanwhile only ptx the driver can jit-compile will run";
  }
  std::vector<std::string> agree;
  auto cross = [&](const char* who, const std::optional<Version2>& cc) {
    if (!cc) return;
    if (*cc == d.cc) {
      agree.push_back(who);
    } else {
      status = worst(status, Level::warn);
      msg += std::string("; ") + who + " says " + common::version_text(*cc) + ", the driver says " + common::version_text(d.cc);
      fix =
          "trust the driver's value (it decides which image loads); a mismatch points at a mixed driver "
          "installation: reinstall the driver";
    }
  };
  cross("nvidia-smi", f.smi_cc);
  cross("nvml", f.nvml_cc);
  if (!agree.empty()) {
    msg += "; ";
    for (std::size_t i = 0; i < agree.size(); ++i) msg += (i ? " and " : "") + agree[i];
    msg += " agree";
  }
  return {status, "device " + std::to_string(d.ordinal), msg, fix, FixKind::driver};
}

}  // namespace

Result<device::DriverPtr> open_driver(const std::string& library) {
  device::OpenOptions open;
  open.library = library;
  return device::Driver::open(open);
}

Step step_devices(Session& s, Report& report) {
  Step step;
  step.number = 1;
  step.name = "devices";
  const auto visible = common::read_driver_env(s.env).visible_devices;

  auto driver = s.driver_opening.valid() ? s.driver_opening.get() : open_driver(s.options->libcuda);
  if (!driver) {
    report.driver_found = false;
    report.driver_problem = driver.message();
    no_driver(s, driver.message(), step);
    return step;
  }
  s.driver = *driver;
  report.driver_found = true;
  if (auto v = s.driver->cuda_version()) report.driver_cuda = *v;
  step.findings.push_back({Level::pass, "driver",
                           "loaded " + s.driver->library_path() +
                               (report.driver_cuda ? ", supports cuda " + common::version_text(*report.driver_cuda) : ""),
                           ""});
  if (!s.driver->init_status().ok()) {
    init_failed(s, visible, step);
    return step;
  }

  auto devices = s.driver->devices();
  if (!devices) {
    step.findings.push_back({Level::fail, "driver", "listing devices failed: " + devices.message(),
                             "check the driver installation (nvidia-smi)", FixKind::driver});
    return step;
  }
  if (devices->empty()) {
    no_devices(s, visible, step);
    return step;
  }
  for (const auto& d : *devices) {
    const ArchRow* row = find_arch(d.cc.packed());
    DeviceFacts f = device_facts(s, d, row);
    step.findings.push_back(device_finding(d, f, row));
    report.devices.push_back(std::move(f));
  }
  if (machine_gpus(s) > devices->size()) {
    step.findings.push_back({Level::pass, "CUDA_VISIBLE_DEVICES",
                             "this process sees " + std::to_string(devices->size()) + " of the machine's " +
                                 std::to_string(machine_gpus(s)) + " gpus" +
                                 (visible ? " (CUDA_VISIBLE_DEVICES='" + *visible + "')" : ""),
                             ""});
  }
  if (!s.smi.available && !s.nvml.available)
    step.findings.push_back({Level::skip, "cross-check", "neither nvidia-smi nor NVML answered: " + s.smi.problem, ""});
  return step;
}

}  // namespace archguard::doctor::detail
