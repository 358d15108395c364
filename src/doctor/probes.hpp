// SPDX-License-Identifier: Apache-2.0
#pragma once
// Second opinions about the GPUs and the installed tools: nvidia-smi, NVML (dlopen
// libnvidia-ml.so.1), /proc/driver/nvidia/version, nvcc and NVRTC. Each probe answers
// "nothing" rather than failing when its tool is absent. Internal to src/doctor.

#include <archguard/arch.hpp>

#include <optional>
#include <string>
#include <vector>

namespace archguard::doctor::detail {

struct ProbedGpu {
  int index = 0;
  std::string name;
  std::string pci_bus_id;  ///< as the tool prints it
  std::optional<Version2> cc;
  std::string mig;  ///< NVML only: "enabled", "disabled", "" (unknown or not MIG-capable)
};

struct ProbeResult {
  bool available = false;  ///< the tool ran / the library loaded
  std::string problem;     ///< why not, or a partial failure
  std::optional<DriverVersion> driver;
  std::vector<ProbedGpu> gpus;
};

/// `nvidia-smi --query-gpu=index,name,pci.bus_id,compute_cap,driver_version --format=csv,noheader`.
/// nvidia-smi ignores CUDA_VISIBLE_DEVICES: it lists every GPU of the machine.
ProbeResult probe_nvidia_smi(const std::string& program);
/// NVML: every GPU of the machine with its CUDA compute capability and the driver version.
ProbeResult probe_nvml(const std::string& library);
/// The kernel module's version from /proc/driver/nvidia/version.
std::optional<DriverVersion> probe_proc_driver_version();

/// "0000:1B:00.0" and "00000000:1B:00.0" name the same GPU: compare bus:device.function only.
std::string normalise_bus_id(const std::string& id);

struct ToolVersion {
  std::optional<Version2> version;  ///< e.g. 13.0
  std::string where;                ///< path / library used
  std::string problem;              ///< why unknown
};
/// `nvcc --version` ("release 13.0"), nvcc located by find_nvcc (PATH, then /usr/local/cuda/bin).
ToolVersion probe_nvcc(const std::string& program);
/// nvrtcVersion() of the NVRTC the jit layer loads (ARCHGUARD_NVRTC, libnvrtc.so.13, ...).
ToolVersion probe_nvrtc();
/// The CUDA runtime the loader finds (libcudart.so.13, .12, .11, newest first) and the version
/// its cudaRuntimeGetVersion reports; the library stays loaded (a runtime is never unloaded).
ToolVersion probe_cudart();

/// How long doctor waits for nvidia-smi or `nvcc --version` before it kills the tool and reports
/// it as hung (a wedged driver can make nvidia-smi hang for minutes).
inline constexpr int kProbeTimeoutSeconds = 30;

}  // namespace archguard::doctor::detail
