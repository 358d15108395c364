// SPDX-License-Identifier: Apache-2.0
// archguard doctor [FILE...] [--json] [--no-smoke]: the five-step diagnosis of "no kernel image
// is available for execution on the device". Exit codes: 0 nothing failed, 1 a step failed,
// 3 no CUDA driver on this machine (steps 2-4 still ran), 2 bad usage.
#include "cli.hpp"

#include <archguard/doctor.hpp>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace archguard;
using namespace archguard::doctor;

/// Each level's badge and its terminal colour.
struct Badge {
  Level level;
  const char* text;
  const char* colour;
};
constexpr Badge kBadges[] = {{Level::pass, "PASS", "\033[32m"},
                             {Level::warn, "WARN", "\033[33m"},
                             {Level::fail, "FAIL", "\033[31m"},
                             {Level::skip, "SKIP", "\033[90m"}};

std::string badge(Level s, bool colour) {
  for (const Badge& b : kBadges)
    if (b.level == s) return colour ? std::string(b.colour) + b.text + "\033[0m" : std::string(b.text);
  return colour ? "\033[0m" : "";
}

nlohmann::json to_json(const Report& r, int exit_code) {
  nlohmann::json j;
  j["schema"] = "archguard.doctor/1";
  // The node this report describes: the unit of a fleet (archguard fleet merge).
  nlohmann::json runtimes = nlohmann::json::array();
  for (const auto& rt : r.runtimes)
    runtimes.push_back({{"name", rt.name}, {"version", cli::version_text(rt.version)}, {"where", rt.where}});
  j["node"] = {{"name", r.node}, {"time", r.time}, {"archguard", ARCHGUARD_VERSION}, {"runtimes", std::move(runtimes)}};
  j["driver_found"] = r.driver_found;
  if (!r.driver_found) j["driver_problem"] = r.driver_problem;
  j["driver_version"] = r.driver_version ? nlohmann::json(format_driver_version(*r.driver_version)) : nlohmann::json();
  j["driver_cuda"] = r.driver_cuda ? nlohmann::json(cli::version_text(*r.driver_cuda)) : nlohmann::json();
  {
    // The newest PTX ISA the driver JIT-compiles, from its version (else the CUDA it supports).
    Version2 isa;
    if (r.driver_version) isa = ptx_isa_for_driver(*r.driver_version);
    else if (r.driver_cuda)
      if (const ReleaseRow* rel = find_release(*r.driver_cuda)) isa = rel->ptx_isa;
    j["driver_ptx_isa"] = isa.empty() ? nlohmann::json() : nlohmann::json(cli::version_text(isa));
  }
  j["devices"] = nlohmann::json::array();
  for (const auto& d : r.devices) {
    nlohmann::json dj{{"ordinal", d.ordinal}, {"name", d.name}, {"cc", cli::version_text(d.cc)}, {"tegra", d.tegra}, {"pci_bus_id", d.pci_bus_id}};
    dj["nvidia_smi_cc"] = d.smi_cc ? nlohmann::json(cli::version_text(*d.smi_cc)) : nlohmann::json();
    dj["nvml_cc"] = d.nvml_cc ? nlohmann::json(cli::version_text(*d.nvml_cc)) : nlohmann::json();
    dj["uuid"] = d.uuid.empty() ? nlohmann::json() : nlohmann::json(d.uuid);
    dj["mig_mode"] = d.mig_mode.empty() ? nlohmann::json() : nlohmann::json(d.mig_mode);
    j["devices"].push_back(dj);
  }
  j["steps"] = nlohmann::json::array();
  for (const auto& s : r.steps) {
    nlohmann::json sj{{"number", s.number}, {"name", s.name}, {"status", to_string(s.status())}, {"elapsed_ms", s.elapsed_ms}};
    sj["findings"] = nlohmann::json::array();
    for (const auto& f : s.findings)
      sj["findings"].push_back(
          {{"status", to_string(f.status)}, {"subject", f.subject}, {"message", f.message}, {"fix", f.fix}, {"fix_kind", f.fix.empty() ? nlohmann::json() : nlohmann::json(to_string(f.fix_kind))}});
    j["steps"].push_back(sj);
  }
  j["timings"] = nlohmann::json::array();
  for (const auto& t : r.timings)
    j["timings"].push_back({{"ordinal", t.ordinal}, {"module_load_ms", t.module_load_ms}, {"first_launch_ms", t.first_launch_ms}, {"second_launch_ms", t.second_launch_ms}, {"image", t.image}, {"matmul_gflops", t.matmul_gflops}});
  j["fixes"] = nlohmann::json::array();
  for (const auto& f : r.fixes)
    j["fixes"].push_back({{"kind", to_string(f.kind)}, {"text", f.text}, {"details", f.details}});
  // The FILEs that load code at run time: what they load is not judged (step 3 notes it).
  j["runtime_loading"] = nlohmann::json::array();
  for (const auto& l : r.runtime_loading)
    j["runtime_loading"].push_back({{"file", l.path}, {"reasons", l.reasons}, {"imports", l.imports}, {"nvrtc", l.nvrtc}, {"python", l.python.empty() ? nlohmann::json() : nlohmann::json(l.python)}, {"command", run_command(l.path)}});
  j["verdict"] = to_string(r.overall());
  j["exit_code"] = exit_code;
  j["elapsed_ms"] = r.elapsed_ms;
  return j;
}

void render(const Report& r, std::ostream& out, bool colour) {
  for (const auto& s : r.steps) {
    out << "[" << s.number << "] " << s.name << ": " << badge(s.status(), colour) << "\n";
    for (const auto& f : s.findings) {
      out << "    " << badge(f.status, colour) << "  " << f.subject << ": " << f.message << "\n";
      if (!f.fix.empty() && (f.status == Level::fail || f.status == Level::warn))
        out << "          fix: " << f.fix << "\n";
    }
  }
  out << "\nverdict: " << badge(r.overall(), colour);
  if (!r.driver_found) out << " (no CUDA driver found: steps 1 and 5 could not run)";
  out << "\n";
  if (r.fixes.empty() && !r.runtime_loading.empty()) {
    // Nothing the files show fails, but what the program loads later was not looked at.
    const std::string& file = r.runtime_loading.front().path;
    out << "nothing to fix in what the files show; " << file << " loads device code at run time: run `"
        << run_command(file) << "` to watch it";
    if (r.runtime_loading.size() > 1) out << " (and " << (r.runtime_loading.size() - 1) << " more FILE(s), see step 3)";
    out << "\n";
  } else if (r.fixes.empty()) {
    out << "nothing to fix\n";
  } else {
    for (std::size_t i = 0; i < r.fixes.size(); ++i) {
      out << "  " << (i + 1) << ". [" << to_string(r.fixes[i].kind) << "] " << r.fixes[i].text << "\n";
      for (const auto& d : r.fixes[i].details) out << "       " << d << "\n";
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "(%.0f ms)\n", r.elapsed_ms);
  out << buf;
}

void setup(CLI::App& root, archguard::cli::Context& ctx) {
  struct Opts {
    std::vector<std::string> files;
    bool json = false;
    bool no_smoke = false;
    bool no_deps = false;
    bool no_cache = false;
    std::vector<std::string> cc;
    std::string node;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd = root.add_subcommand(
      "doctor", "Diagnose 'no kernel image is available': devices, versions, binaries, environment, smoke test");
  cmd->add_option("FILE", opts->files, "binaries, libraries, wheels or directories to check against the GPUs");
  cmd->add_flag("--json", opts->json, "print the report as JSON");
  cmd->add_flag("--no-smoke", opts->no_smoke, "skip step 5 (the kernels that really run)");
  cmd->add_flag("--no-deps", opts->no_deps, "do not judge the shared libraries an executable or library FILE loads");
  cmd->add_flag("--no-cache", opts->no_cache, "decode every image of the FILEs again: do not use the results cache");
  cmd->add_option("--cc", opts->cc, "also judge the FILEs for this compute capability (e.g. 9.0; repeatable)")
      ->allow_extra_args(false)
      ->check(archguard::cli::non_empty_cc());
  cmd->add_option("--node", opts->node,
                  "the node's name in the report (default: $SLURMD_NODENAME, else the host name); in a Kubernetes pod, "
                  "the node's name from the downward API");
  cmd->footer(
      "Exit codes: 0 nothing failed, 1 a step failed, 2 bad usage, 3 no CUDA driver (steps 2-4 still ran);\n"
      "with --cc and FILEs on a machine without a driver: 0 the FILEs pass for those GPUs, 1 they fail.");
  cmd->callback([opts, &ctx]() {
    Options o;
    o.files = opts->files;
    if (!o.files.empty()) o.results = archguard::cli::results_cache(opts->no_cache);
    o.node = opts->node;
    // As ARCHGUARD_LIBCUDA names the driver library, ARCHGUARD_LIBNVML names NVML's ("" skips
    // the NVML cross-check): a fake node on a machine with a real NVML (scripts/gpu-fleet.sh).
    if (const char* nvml = std::getenv("ARCHGUARD_LIBNVML")) o.libnvml = nvml;
    for (const auto& text : opts->cc) {
      auto cc = parse_cc(text);
      if (!cc) {
        std::cerr << "archguard doctor: --cc '" << archguard::cli::shown(text) << "' is not a compute capability such as 9.0\n";
        ctx.exit_code = archguard::cli::kExitUsage;
        return;
      }
      archguard::cli::warn_unknown_cc(*cc);
      o.assume_cc.push_back(*cc);
    }
    // A FILE that is not there is bad usage (exit 2), said once, before any step runs.
    for (const std::string& f : opts->files) {
      std::error_code ec;
      if (!std::filesystem::exists(f, ec)) {
        std::cerr << "archguard doctor: " << archguard::cli::shown(f) << ": cannot open: no such file or directory\n";
        ctx.exit_code = archguard::cli::kExitUsage;
        return;
      }
    }
    o.smoke = !opts->no_smoke;
    o.deps = !opts->no_deps;
    o.leave_to_exit = true;  // this process ends after the report
    const Report r = run(o);
    int code = archguard::cli::kExitOk;
    if (!r.driver_found && !(opts->files.empty() || opts->cc.empty())) {
      // FILEs judged for a given --cc: the answer is theirs (step 3), on a machine that needs no
      // driver for it; 1 when they fail, 0 when they pass.
      for (const Step& st : r.steps)
        if (st.name == "binaries" && st.status() == Level::fail) code = archguard::cli::kExitProblem;
    } else if (!r.driver_found) {
      code = archguard::cli::kExitNoDriver;
    } else if (r.overall() == Level::fail) {
      code = archguard::cli::kExitProblem;
    }
    // One line: the node report of a fleet, whole even when srun or kubectl interleave the
    // output of many nodes line by line (jq . or python3 -m json.tool indent it for reading).
    if (opts->json) std::cout << cli::json_text(to_json(r, code), -1) << "\n";
    else render(r, std::cout, archguard::cli::use_colour());
    ctx.exit_code = code;
  });
}

}  // namespace

ARCHGUARD_VERB(setup);
