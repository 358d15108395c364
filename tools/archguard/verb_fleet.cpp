// SPDX-License-Identifier: Apache-2.0
// archguard fleet merge REPORT... | -     node reports (archguard doctor --json) into a fleet
// archguard fleet slurm [FILE | -]         what Slurm knows: scontrol show node / sinfo GRES
// archguard fleet kubernetes [FILE | -]    GPU Feature Discovery labels of kubectl get nodes -o json
// Each prints a summary, the fleet report (--json, schema archguard.fleet/1) or the fleet CSV
// (--csv) that ARCH_POLICY=fleet: and check --fleet read; --report/--csv-file write them to files.
// Exit codes: 0 a fleet without problems, 1 problems were named (or no node was found), 2 bad
// usage or an unreadable input.
#include "cli.hpp"

#include <archguard/fleet.hpp>

#include "common/fs.hpp"
#include "common/process.hpp"
#include "common/version.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace archguard::cli {
namespace {

using fleet::Fleet;

constexpr std::size_t kMaxInput = std::size_t{1} << 30;  // 1 GiB: 200,000 node reports

struct FleetOptions {
  std::vector<std::string> inputs;
  std::vector<std::string> gpu_names;  // NAME=X.Y
  bool json = false;
  bool csv = false;
  std::string report_file;
  std::string csv_file;
};

Result<std::string> read_stdin() {
  std::string text;
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && static_cast<std::size_t>(st.st_size) <= kMaxInput)
    text.reserve(static_cast<std::size_t>(st.st_size));  // a file redirected in: one allocation
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(ErrorKind::io, std::string("standard input: read failed: ") + std::strerror(errno));
    }
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxInput) return make_error(ErrorKind::usage, "standard input: more than 1 GiB; give the reports as files");
  }
  return text;
}

// An input as text: "-" is standard input; a directory gives its *.json files, in name order.
Status read_input(const std::string& input, std::vector<std::pair<std::string, std::string>>& out) {
  if (input == "-") {
    AG_TRY(std::string text, read_stdin());
    out.emplace_back("-", std::move(text));
    return Ok{};
  }
  std::error_code ec;
  if (std::filesystem::is_directory(input, ec)) {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(input, ec))
      if (e.path().extension() == ".json" && e.is_regular_file(ec)) files.push_back(e.path().string());
    if (ec) return make_error(ErrorKind::io, input + ": cannot list: " + ec.message());
    std::sort(files.begin(), files.end());
    if (files.empty()) return make_error(ErrorKind::usage, input + ": a directory without *.json node reports");
    for (const auto& f : files) {
      AG_TRY(std::string text, common::read_file(f, true));
      out.emplace_back(f, std::move(text));
    }
    return Ok{};
  }
  struct stat st {};
  if (::stat(input.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) > kMaxInput)
    return make_error(ErrorKind::usage, input + ": " + std::to_string(st.st_size) + " bytes, more than 1 GiB");
  AG_TRY(std::string text, common::read_file(input, true));
  out.emplace_back(input, std::move(text));
  return Ok{};
}

Result<fleet::NameMap> name_map(const std::vector<std::string>& specs) {
  fleet::NameMap names;
  for (const auto& s : specs) {
    const auto eq = s.rfind('=');
    auto cc = eq == std::string::npos ? std::nullopt : common::parse_cc(s.substr(eq + 1));
    if (eq == 0 || !cc)
      return make_error(ErrorKind::usage, "--gpu-name '" + shown(s) + "' is not NAME=X.Y (for example --gpu-name big=9.0)");
    names[s.substr(0, eq)] = *cc;
  }
  return names;
}

// Writes `text` to `path` through a temporary file in the same directory (no half-written file).
Status write_output(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return make_error(ErrorKind::io, path + ": cannot write: " + std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    return make_error(ErrorKind::io, path + ": write failed: " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return make_error(ErrorKind::io, path + ": cannot replace: " + why);
  }
  return Ok{};
}

std::string gpu_text(const fleet::NodeGpu& g) {
  std::string s = std::to_string(g.count) + " x " + g.name + " (CC " + version_text(g.cc) + (g.tegra ? ", tegra" : "");
  if (g.mig == "enabled") s += ", MIG";
  return s + ")";
}

std::string driver_text(const std::optional<DriverVersion>& driver, const std::optional<Version2>& cuda) {
  fleet::Node probe;
  probe.driver = driver;
  probe.driver_cuda = cuda;
  const Version2 isa = fleet::driver_ptx_isa(probe);
  std::string s = driver ? "driver " + format_driver_version(*driver) : cuda ? "driver for CUDA " + version_text(*cuda)
                                                                             : "driver unknown";
  if (driver && cuda) s += " (CUDA " + version_text(*cuda) + (isa.empty() ? ")" : ", PTX ISA " + version_text(isa) + ")");
  else if (!isa.empty()) s += " (PTX ISA " + version_text(isa) + ")";
  return s;
}

void print_summary(const Fleet& f, const std::string& from) {
  std::size_t gpus = 0;
  for (const auto& n : f.nodes) gpus += n.gpu_count();
  const auto groups = fleet::groups(f);
  std::printf("fleet: %zu node%s, %zu GPU%s in %zu group%s (%zu input%s from %s)\n", f.nodes.size(), f.nodes.size() == 1 ? "" : "s", gpus,
              gpus == 1 ? "" : "s", groups.size(), groups.size() == 1 ? "" : "s", f.documents, f.documents == 1 ? "" : "s", shown(from).c_str());
  for (const auto& g : groups) {
    std::printf("  %s (CC %s%s), %s: %zu GPU%s on %zu node%s: %s\n", shown(g.gpu).c_str(), version_text(g.cc).c_str(), g.tegra ? ", tegra" : "",
                driver_text(g.driver, g.driver_cuda).c_str(), g.gpus, g.gpus == 1 ? "" : "s", g.nodes.size(), g.nodes.size() == 1 ? "" : "s",
                shown(fleet::brief_node_list(g.nodes)).c_str());
  }
  if (f.nodes.size() <= 20) {
    for (const auto& n : f.nodes) {
      std::string line = n.name + ": ";
      // One entry per model: a report lists each GPU, the summary counts them.
      std::vector<fleet::NodeGpu> models;
      for (const auto& g : n.gpus) {
        auto it = std::find_if(models.begin(), models.end(), [&](const fleet::NodeGpu& m) { return m.name == g.name && m.cc == g.cc && m.mig == g.mig; });
        if (it == models.end()) models.push_back(g);
        else it->count += g.count;
      }
      for (std::size_t i = 0; i < models.size(); ++i) line += (i ? ", " : "") + gpu_text(models[i]);
      if (n.gpus.empty()) line += "no GPU";
      line += ", " + driver_text(n.driver, n.driver_cuda);
      if (!n.problem.empty()) line += "; " + n.problem;
      std::printf("  node %s\n", shown(line).c_str());
    }
  } else {
    std::printf("  (%zu nodes: --json lists every one)\n", f.nodes.size());
  }
  const auto without = fleet::nodes_without_gpus(f);
  if (!without.empty()) std::printf("nodes without a GPU: %s\n", shown(fleet::brief_node_list(without)).c_str());
  for (const auto& note : f.notes) std::printf("note: %s\n", shown(note).c_str());
  if (!f.problems.empty()) {
    std::printf("problems (%zu):\n", f.problems.size());
    for (const auto& p : f.problems) std::printf("  %s: %s\n", shown(p.where).c_str(), shown(p.message).c_str());
  }
}

// What every fleet sub-verb does once its inputs are read.
int finish_and_print(Fleet& f, const FleetOptions& opt, const std::string& from, const char* verb) {
  fleet::finish(f);
  if (!opt.report_file.empty())
    if (auto s = write_output(opt.report_file, fleet::to_json(f) + "\n"); !s) {
      std::fprintf(stderr, "archguard fleet %s: %s\n", verb, shown(s.message()).c_str());
      return kExitUsage;
    }
  if (!opt.csv_file.empty())
    if (auto s = write_output(opt.csv_file, fleet::to_csv(f)); !s) {
      std::fprintf(stderr, "archguard fleet %s: %s\n", verb, shown(s.message()).c_str());
      return kExitUsage;
    }
  if (opt.json) {
    std::printf("%s\n", fleet::to_json(f).c_str());
  } else if (opt.csv) {
    std::fputs(fleet::to_csv(f).c_str(), stdout);
    for (const auto& p : f.problems) std::fprintf(stderr, "archguard fleet %s: %s: %s\n", verb, shown(p.where).c_str(), shown(p.message).c_str());
  } else {
    print_summary(f, from);
  }
  if (f.nodes.empty()) {
    std::fprintf(stderr, "archguard fleet %s: no node found in %s\n", verb, shown(from).c_str());
    return kExitProblem;
  }
  return f.problems.empty() ? kExitOk : kExitProblem;
}

int run_merge(const FleetOptions& opt) {
  if (opt.json && opt.csv) {
    std::fprintf(stderr, "archguard fleet merge: give one of --json and --csv\n");
    return kExitUsage;
  }
  std::vector<std::pair<std::string, std::string>> texts;
  for (const auto& in : opt.inputs)
    if (auto s = read_input(in, texts); !s) {
      std::fprintf(stderr, "archguard fleet merge: %s\n", shown(s.message()).c_str());
      return kExitUsage;
    }
  Fleet f;
  for (const auto& [name, text] : texts) fleet::read_reports(text, name, f);
  std::string from = opt.inputs.size() == 1 ? opt.inputs[0] : std::to_string(opt.inputs.size()) + " inputs";
  return finish_and_print(f, opt, from, "merge");
}

// Reads FILE, "-", or runs `program args` when no input is given.
Result<std::pair<std::string, std::string>> source_text(const FleetOptions& opt, const std::string& program, const std::vector<std::string>& args) {
  if (opt.inputs.size() > 1) return make_error(ErrorKind::usage, "give one input (a file, or - for standard input)");
  if (!opt.inputs.empty()) {
    std::vector<std::pair<std::string, std::string>> texts;
    AG_TRY_STATUS(read_input(opt.inputs[0], texts));
    if (texts.size() != 1) return make_error(ErrorKind::usage, opt.inputs[0] + ": give one file, not a directory");
    return texts[0];
  }
  common::RunOptions ro;
  ro.timeout = std::chrono::milliseconds(60000);
  ro.max_output = 512u << 20;
  ro.stderr_to = common::StderrTo::null;
  std::string cmd = program;
  for (const auto& a : args) cmd += " " + a;
  auto out = common::run_capture(program, args, ro);
  if (!out) return make_error(ErrorKind::usage, "'" + cmd + "': " + out.message() + "; or give its saved output as FILE");
  if (out->exit_code != 0)
    return make_error(ErrorKind::usage, "'" + cmd + "' exited with " + std::to_string(out->exit_code) + "; or give its saved output as FILE");
  return std::make_pair(cmd, std::move(out->output));
}

int run_source(const FleetOptions& opt, const char* verb) {
  if (opt.json && opt.csv) {
    std::fprintf(stderr, "archguard fleet %s: give one of --json and --csv\n", verb);
    return kExitUsage;
  }
  auto names = name_map(opt.gpu_names);
  if (!names) {
    std::fprintf(stderr, "archguard fleet %s: %s\n", verb, names.message().c_str());
    return kExitUsage;
  }
  const bool slurm = std::string(verb) == "slurm";
  auto text = slurm ? source_text(opt, "scontrol", {"show", "node", "--oneliner"}) : source_text(opt, "kubectl", {"get", "nodes", "-o", "json"});
  if (!text) {
    std::fprintf(stderr, "archguard fleet %s: %s\n", verb, shown(text.message()).c_str());
    return kExitUsage;
  }
  Fleet f;
  if (slurm) fleet::read_slurm(text->second, text->first, f, *names);
  else fleet::read_kubernetes(text->second, text->first, f, *names);
  return finish_and_print(f, opt, text->first, verb);
}

void add_output_flags(CLI::App* cmd, FleetOptions& o) {
  cmd->add_flag("--json", o.json, "Print the fleet report (schema archguard.fleet/1, docs/json-schema.md)");
  cmd->add_flag("--csv", o.csv, "Print the fleet CSV (name, compute_cap per GPU) that ARCH_POLICY=fleet: reads");
  cmd->add_option("--report", o.report_file, "Also write the fleet report to this file (check --fleet reads it)");
  cmd->add_option("--csv-file", o.csv_file, "Also write the fleet CSV to this file");
}

void setup(CLI::App& root, Context& ctx) {
  CLI::App* fleet_cmd = root.add_subcommand("fleet", "Gather a cluster's GPUs and drivers: node reports, Slurm, Kubernetes");
  fleet_cmd->require_subcommand(1);
  fleet_cmd->footer("Exit codes: 0 a fleet without problems, 1 problems were named or no node found, 2 bad usage.");

  auto [m, merge] = add_command<FleetOptions>(
      *fleet_cmd, ctx, "merge", "Merge node reports (archguard doctor --json, concatenated as srun or kubectl logs print them)", run_merge);
  m->add_option("REPORT", merge->inputs, "Node or fleet reports: files, directories of *.json, or - for standard input")->required();
  add_output_flags(m, *merge);

  auto [s, slurm] = add_command<FleetOptions>(*fleet_cmd, ctx, "slurm", "The fleet Slurm knows, from the GPU types of its GRES (no job runs)",
                                              [](const FleetOptions& o) { return run_source(o, "slurm"); });
  s->add_option("FILE", slurm->inputs, "Saved 'scontrol show node' or 'sinfo -N -h -o \"%N %G\"' output, or -; default: run scontrol");
  s->add_option("--gpu-name", slurm->gpu_names, "A site's GRES type and its compute capability, e.g. --gpu-name big=9.0 (repeatable)");
  add_output_flags(s, *slurm);

  auto [k, kube] = add_command<FleetOptions>(*fleet_cmd, ctx, "kubernetes",
                                             "The fleet of a Kubernetes cluster, from NVIDIA GPU Feature Discovery's node labels",
                                             [](const FleetOptions& o) { return run_source(o, "kubernetes"); });
  k->add_option("FILE", kube->inputs, "Saved 'kubectl get nodes -o json' output, or -; default: run kubectl");
  k->add_option("--gpu-name", kube->gpu_names, "A product label and its compute capability, when no compute labels are set (repeatable)");
  add_output_flags(k, *kube);
}

}  // namespace

ARCHGUARD_VERB(setup);

}  // namespace archguard::cli
