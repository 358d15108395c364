// SPDX-License-Identifier: Apache-2.0
// archguard check FILE... --cc 9.0 | --fleet nodes.csv: what the driver will do with each
// file's device code on that GPU (runs natively / after a JIT / fails with 209, 222, 223).
#include "cli.hpp"
#include "verb_inputs.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

namespace archguard::cli {
namespace {

struct CheckOptions {
  std::vector<std::string> files;
  ReadLimits limits;
  std::string cc;
  std::string driver;
  std::string fleet;
  bool tegra = false;
  bool force_ptx_jit = false;
  bool disable_ptx_jit = false;
  bool from_env = false;
  bool json = false;
  bool no_kernels = false;
};

struct Gpu {
  std::string name;
  Device device;
  std::size_t count = 1;
};

Result<Version2> parse_cc(std::string_view text) {
  const std::size_t dot = text.find('.');
  if (dot != std::string_view::npos && dot > 0 && dot + 1 < text.size() && text.size() <= 7) {
    bool digits = true;
    for (std::size_t i = 0; i < text.size(); ++i)
      if (i != dot && std::isdigit(static_cast<unsigned char>(text[i])) == 0) digits = false;
    if (digits)
      return Version2{static_cast<unsigned>(std::stoul(std::string(text.substr(0, dot)))),
                      static_cast<unsigned>(std::stoul(std::string(text.substr(dot + 1))))};
  }
  auto targets = parse_token(text);  // "90", "sm_90": the capability of that architecture
  if (targets && !targets->empty())
    if (const ArchRow* row = find_arch(targets->front().arch.sm); row != nullptr) return row->cc;
  return Error{"--cc '" + std::string(text) + "' is not a compute capability such as 9.0"};
}

std::string error_name(int code) {
  switch (code) {
    case kErrNoKernelImage: return "209 (no kernel image is available for execution on the device)";
    case kErrUnsupportedPtx: return "222 (the provided PTX was compiled with an unsupported toolchain)";
    case kErrJitDisabled: return "223 (PTX JIT compilation was disabled)";
    case kErrSymbolNotFound: return "500 (named symbol not found)";
    default: return std::to_string(code);
  }
}

/// The verdict line of one object: the worst outcome and which images got it.
std::string summary_text(const ObjectVerdict& v) {
  if (!v.has_device_code()) return "no device code";
  if (v.outcome == Outcome::fail) {
    std::size_t failing = 0;
    for (const auto& u : v.units) failing += u.verdict.outcome == Outcome::fail ? 1 : 0;
    return "fails with " + error_name(v.cuda_error) + " (" + std::to_string(failing) + " of " +
           std::to_string(v.units.size()) + " fatbins)";
  }
  std::vector<std::string> used;
  for (const auto& u : v.units) {
    if (u.verdict.outcome != v.outcome || !u.verdict.image || *u.verdict.image >= u.images.size()) continue;
    std::string n = image_name(u.images[*u.verdict.image]);
    if (std::find(used.begin(), used.end(), n) == used.end()) used.push_back(n);
  }
  std::string list;
  for (const auto& n : used) list += (list.empty() ? "" : ", ") + n;
  if (v.outcome == Outcome::jit) return "runs after a JIT of " + list + " (first-launch delay)";
  return "runs natively (" + list + ")";
}

std::string device_text(const Gpu& g) {
  std::string s = g.name.empty() ? std::string("CC ") + version_text(g.device.cc) : g.name + " (CC " + version_text(g.device.cc);
  if (g.device.tegra) s += g.name.empty() ? " tegra" : ", tegra";
  if (!g.name.empty()) s += ", " + std::to_string(g.count) + (g.count == 1 ? " GPU)" : " GPUs)");
  return s;
}

int run_check(const CheckOptions& opt) {
  if (opt.cc.empty() == opt.fleet.empty()) {
    std::fprintf(stderr, "archguard check: give exactly one of --cc and --fleet\n");
    return kExitUsage;
  }
  DriverSettings settings;
  if (!opt.driver.empty()) {
    auto d = parse_driver_version(opt.driver);
    if (!d) {
      std::fprintf(stderr, "archguard check: --driver: %s\n", d.message().c_str());
      return kExitUsage;
    }
    settings.driver = *d;
  }
  settings.force_ptx_jit = opt.force_ptx_jit;
  settings.disable_ptx_jit = opt.disable_ptx_jit;
  if (opt.from_env) {
    auto on = [](const char* n) {
      const char* v = std::getenv(n);
      return v != nullptr && std::string_view(v) != "" && std::string_view(v) != "0";
    };
    settings.force_ptx_jit = settings.force_ptx_jit || on("CUDA_FORCE_PTX_JIT");
    settings.disable_ptx_jit = settings.disable_ptx_jit || on("CUDA_DISABLE_PTX_JIT");
  }

  std::vector<Gpu> gpus;
  if (!opt.cc.empty()) {
    auto cc = parse_cc(opt.cc);
    if (!cc) {
      std::fprintf(stderr, "archguard check: %s\n", cc.message().c_str());
      return kExitUsage;
    }
    Gpu g;
    g.device = device_for_cc(*cc);
    g.device.tegra = g.device.tegra || opt.tegra;
    gpus.push_back(g);
  } else {
    std::ifstream f(opt.fleet, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "archguard check: %s: cannot open\n", opt.fleet.c_str());
      return kExitUsage;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    auto models = parse_fleet_csv(ss.str(), opt.fleet);
    if (!models) {
      std::fprintf(stderr, "archguard check: %s\n", shown(models.message()).c_str());
      return kExitUsage;
    }
    for (const auto& m : *models) {
      Gpu g{m.name, device_for_cc(m.cc), m.count};
      g.device.tegra = g.device.tegra || opt.tegra;
      gpus.push_back(g);
    }
  }

  auto scan = scan_options(opt.limits);
  if (!scan) {
    std::fprintf(stderr, "archguard check: %s\n", scan.message().c_str());
    return kExitUsage;
  }
  const Inputs in = read_inputs(opt.files, *scan);
  bool any_fail = false;
  nlohmann::json devices_json = nlohmann::json::array();
  for (const Gpu& g : gpus) {
    nlohmann::json objects_json = nlohmann::json::array();
    std::vector<std::string> details;
    if (!opt.json && gpus.size() > 1) std::printf("%s\n", shown(device_text(g)).c_str());
    for (const auto& r : in.reports) {
      for (const auto& o : r.objects) {
        if (o.fatbins.empty() && !o.archive.empty()) continue;
        const ObjectVerdict v = check_object(o, g.device, settings);
        any_fail = any_fail || (v.outcome == Outcome::fail && v.has_device_code());
        const std::string summary = summary_text(v);
        std::vector<KernelFinding> missing;
        std::string kernel_error;
        if (v.outcome == Outcome::fail && !opt.no_kernels) {
          auto k = kernels_without_image(o, v);
          if (k) missing = std::move(*k);
          else kernel_error = k.message();
        }
        if (opt.json) {
          nlohmann::json units = nlohmann::json::array();
          for (const auto& u : v.units) {
            nlohmann::json images = nlohmann::json::array();
            for (const auto& im : u.images) images.push_back(image_json(im));
            units.push_back({{"fatbin", u.fatbin},
                             {"section", to_string(u.section)},
                             {"identifier", u.identifier},
                             {"verdict", verdict_json(u.verdict, u.images)},
                             {"images", std::move(images)}});
          }
          nlohmann::json kernels = nlohmann::json::array();
          for (const auto& k : missing)
            kernels.push_back({{"fatbin", k.fatbin}, {"name", k.kernel.name}, {"demangled", k.kernel.demangled}});
          nlohmann::json oj{{"object", o.path},
                            {"device_code", v.has_device_code()},
                            {"outcome", outcome_text(v.outcome)},
                            {"cuda_error", v.cuda_error},
                            {"summary", summary},
                            {"units", std::move(units)},
                            {"kernels_without_image", std::move(kernels)}};
          if (!kernel_error.empty()) oj["kernel_error"] = kernel_error;
          objects_json.push_back(std::move(oj));
          continue;
        }
        std::printf("%s%s: %s%s\n", gpus.size() > 1 ? "  " : "", shown(o.path).c_str(), shown(summary).c_str(),
                    gpus.size() == 1 ? shown(" on " + device_text(g)).c_str() : "");
        for (const auto& u : v.units) {
          std::string line = "  " + o.path + ": fatbin " + std::to_string(u.fatbin);
          if (!u.identifier.empty()) line += " (" + u.identifier + ")";
          line += ": " + std::string(outcome_text(u.verdict.outcome));
          if (u.verdict.outcome == Outcome::fail) line += " " + std::to_string(u.verdict.cuda_error);
          line += ": " + u.verdict.reason + " [images:";
          for (const auto& im : u.images) line += " " + image_name(im) + (im.relocatable ? "(rel)" : "");
          line += "]";
          details.push_back(std::move(line));
        }
        if (!missing.empty()) {
          details.push_back("  " + o.path + ": kernels with no usable image:");
          for (const auto& k : missing) details.push_back("    " + k.kernel.demangled);
        }
        if (!kernel_error.empty()) details.push_back("  " + o.path + ": kernels not listed: " + kernel_error);
      }
    }
    if (opt.json) {
      devices_json.push_back({{"name", g.name},
                              {"cc", version_text(g.device.cc)},
                              {"tegra", g.device.tegra},
                              {"count", g.count},
                              {"objects", std::move(objects_json)}});
    } else if (!details.empty()) {
      std::printf("%sdetails:\n", gpus.size() > 1 ? "  " : "");
      for (const auto& d : details) std::printf("%s%s\n", gpus.size() > 1 ? "  " : "", shown(d).c_str());
    }
  }
  const int code = !in.errors.empty() ? kExitUsage : any_fail ? kExitProblem : kExitOk;
  if (opt.json) {
    nlohmann::json doc{{"schema", "archguard.check/1"},
                       {"driver", settings.driver ? nlohmann::json(format_driver_version(*settings.driver)) : nlohmann::json(nullptr)},
                       {"force_ptx_jit", settings.force_ptx_jit},
                       {"disable_ptx_jit", settings.disable_ptx_jit},
                       {"devices", std::move(devices_json)},
                       {"fails", any_fail},
                       {"errors", in.errors}};
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    print_errors(in.errors);
  }
  return code;
}

void setup(CLI::App& root, Context& ctx) {
  auto opt = std::make_shared<CheckOptions>();
  CLI::App* cmd = root.add_subcommand("check", "Predict what the CUDA driver does with each file's device code on a GPU");
  cmd->add_option("files", opt->files, "Files or directories to check")->required();
  cmd->add_option("--cc", opt->cc, "Compute capability of the GPU, e.g. 9.0");
  cmd->add_option("--driver", opt->driver, "Driver version, e.g. 580.65 (limits the PTX ISA it JIT-compiles)");
  cmd->add_option("--fleet", opt->fleet,
                  "CSV from 'nvidia-smi --query-gpu=name,compute_cap --format=csv' (many nodes concatenated)");
  cmd->add_flag("--tegra", opt->tegra, "The GPU is an integrated (Tegra) part");
  cmd->add_flag("--force-ptx-jit", opt->force_ptx_jit, "As with CUDA_FORCE_PTX_JIT=1: ignore SASS, JIT the PTX");
  cmd->add_flag("--disable-ptx-jit", opt->disable_ptx_jit, "As with CUDA_DISABLE_PTX_JIT=1: SASS only");
  cmd->add_flag("--from-env", opt->from_env, "Take CUDA_FORCE_PTX_JIT / CUDA_DISABLE_PTX_JIT from this environment");
  cmd->add_flag("--no-kernels", opt->no_kernels, "Do not decode failing fatbins to name their kernels");
  cmd->add_flag("--json", opt->json, "Machine-readable output (schema: docs/json-schema.md)");
  add_limit_flags(cmd, opt->limits);
  cmd->callback([opt, &ctx] { ctx.exit_code = run_check(*opt); });
}

}  // namespace

ARCHGUARD_VERB(setup);

}  // namespace archguard::cli
