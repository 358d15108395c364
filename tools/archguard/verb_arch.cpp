// SPDX-License-Identifier: Apache-2.0
// archguard arch list | explain | normalize: the architecture table, what a target means, and
// a target list in canonical form. Parses flags, calls the library, renders.
#include "cli.hpp"

#include <archguard/arch.hpp>
#include <archguard/compat.hpp>
#include <archguard/policy.hpp>
#include <archguard/toolkit.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using archguard::Arch;
using archguard::ArchRow;
using archguard::CodeKind;
using archguard::Suffix;
using archguard::Target;
using archguard::Version2;
using nlohmann::json;
namespace cli = archguard::cli;

void fail_usage(const std::string& message) { std::cerr << "archguard: " << cli::shown(message) << "\n"; }

// ---- list ----------------------------------------------------------------------------------

struct ListOptions {
  bool json = false;
  bool rows = false;
  std::string nvcc;
};

// The canonical rows, in exactly the line format of CudaArchGuardTable.cmake -DEMIT=rows.
int print_rows() {
  auto dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  for (const ArchRow& r : archguard::arch_rows()) {
    std::cout << "arch|" << r.sm << "|" << cli::version_or_dash(r.cc) << "|" << r.codename << "|" << dash(r.products) << "|"
              << (r.tegra ? 1 : 0) << "|" << cli::version_or_dash(r.a_since) << "|" << cli::version_or_dash(r.f_since) << "|" << cli::version_or_dash(r.first_cuda)
              << "|" << cli::version_or_dash(r.removed_in) << "|" << (r.family == 0 ? "-" : std::to_string(r.family)) << "\n";
  }
  for (const archguard::RenameRow& r : archguard::rename_rows()) {
    std::cout << "rename|" << r.old_sm << "|" << r.new_sm << "|" << cli::version_or_dash(r.cuda) << "\n";
  }
  for (const archguard::ReleaseRow& r : archguard::release_rows()) {
    std::cout << "release|" << cli::version_or_dash(r.cuda) << "|" << cli::version_or_dash(r.ptx_isa) << "|" << dash(r.min_driver) << "\n";
  }
  return cli::kExitOk;
}

std::string nvcc_marks(const archguard::NvccInfo& info, const ArchRow& r) {
  const bool sm = info.supports({{r.sm}, CodeKind::sass});
  const bool ptx = info.supports({{r.sm}, CodeKind::ptx});
  if (!sm && !ptx) return "no";
  std::string out = sm && ptx ? "yes" : sm ? "sm only"
                                           : "compute only";
  if (info.supports({{r.sm, Suffix::a}, CodeKind::sass})) out += " +a";
  if (info.supports({{r.sm, Suffix::f}, CodeKind::sass})) out += " +f";
  return out;
}

std::string note_of(const ArchRow& r) {
  if (const archguard::RenameRow* rn = archguard::find_rename(r.sm)) {
    return "renamed sm_" + std::to_string(rn->new_sm) + " in " + cli::version_or_dash(rn->cuda);
  }
  if (r.tegra) return "Tegra";
  return "";
}

// Targets the nvcc accepts that the table does not know: the table needs an update.
std::vector<std::string> unknown_to_table(const archguard::NvccInfo& info) {
  std::vector<std::string> out;
  auto scan = [&](const std::vector<Arch>& v, CodeKind k) {
    for (Arch a : v) {
      if (!archguard::arch_exists(a)) out.push_back(archguard::nvcc_name(a, k));
    }
  };
  scan(info.sass, CodeKind::sass);
  scan(info.ptx, CodeKind::ptx);
  scan(info.ltoir, CodeKind::ltoir);
  return out;
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  }
}

json arch_list(const std::vector<Arch>& v, CodeKind k) {
  json a = json::array();
  for (Arch x : v) a.push_back(archguard::nvcc_name(x, k));
  return a;
}

/// One row of the architecture table, with what `nvcc` (when there is one) accepts of it.
json arch_row_json(const ArchRow& r, const archguard::NvccInfo* nvcc) {
  json products = json::array();
  std::stringstream ss(r.products);
  for (std::string p; std::getline(ss, p, ',');) {
    p.erase(0, p.find_first_not_of(' '));
    if (!p.empty()) products.push_back(p);
  }
  json a = {{"sm", r.sm},
            {"cc", cli::version_or_dash(r.cc)},
            {"codename", std::string(archguard::codename_of(r))},
            {"products", products},
            {"tegra", r.tegra},
            {"a_since", r.a_since.empty() ? json(nullptr) : json(cli::version_or_dash(r.a_since))},
            {"f_since", r.f_since.empty() ? json(nullptr) : json(cli::version_or_dash(r.f_since))},
            {"first_cuda", cli::version_or_dash(r.first_cuda)},
            {"removed_in", r.removed_in.empty() ? json(nullptr) : json(cli::version_or_dash(r.removed_in))},
            {"family", r.family == 0 ? json(nullptr) : json(r.family)}};
  if (const archguard::RenameRow* rn = archguard::find_rename(r.sm)) {
    a["renamed"] = {{"to", rn->new_sm}, {"in", cli::version_or_dash(rn->cuda)}};
  }
  if (nvcc) {
    a["nvcc"] = {{"sm", nvcc->supports({{r.sm}, CodeKind::sass})},
                 {"compute", nvcc->supports({{r.sm}, CodeKind::ptx})},
                 {"a", nvcc->supports({{r.sm, Suffix::a}, CodeKind::sass})},
                 {"f", nvcc->supports({{r.sm, Suffix::f}, CodeKind::sass})}};
  }
  return a;
}

json list_json(const archguard::Result<archguard::NvccInfo>& nvcc) {
  json j;
  if (nvcc) {
    j["nvcc"] = {{"path", nvcc->path},
                 {"release", cli::version_or_dash(nvcc->release)},
                 {"build", nvcc->build},
                 {"sass", arch_list(nvcc->sass, CodeKind::sass)},
                 {"ptx", arch_list(nvcc->ptx, CodeKind::ptx)},
                 {"ltoir", arch_list(nvcc->ltoir, CodeKind::ltoir)},
                 {"unknown_to_table", unknown_to_table(*nvcc)}};
  } else {
    j["nvcc"] = nullptr;
    j["nvcc_error"] = nvcc.message();
  }
  j["architectures"] = json::array();
  for (const ArchRow& r : archguard::arch_rows()) j["architectures"].push_back(arch_row_json(r, nvcc ? &*nvcc : nullptr));
  j["releases"] = json::array();
  for (const archguard::ReleaseRow& r : archguard::release_rows()) {
    j["releases"].push_back({{"cuda", cli::version_or_dash(r.cuda)},
                             {"ptx_isa", cli::version_or_dash(r.ptx_isa)},
                             {"min_driver", *r.min_driver == '\0' ? json(nullptr) : json(r.min_driver)}});
  }
  return j;
}

/// The architecture table as text, with a column for `nvcc` when there is one.
void print_arch_table(const archguard::NvccInfo* nvcc) {
  const std::string nvcc_head = nvcc ? "nvcc " + cli::version_or_dash(nvcc->release) : "";
  std::vector<std::vector<std::string>> rows{
      {"SM", "CC", "CODENAME", "a", "f", "FAMILY", "FIRST", "REMOVED", "NOTE", "EXAMPLES"}};
  if (nvcc) rows[0].insert(rows[0].begin() + 2, nvcc_head);
  for (const ArchRow& r : archguard::arch_rows()) {
    std::string family = r.family == 0 ? "-" : std::to_string(r.family) + "f";
    std::vector<std::string> row{std::to_string(r.sm),
                                 cli::version_or_dash(r.cc),
                                 archguard::codename_of(r).empty() ? "-" : std::string(archguard::codename_of(r)),
                                 cli::version_or_dash(r.a_since),
                                 cli::version_or_dash(r.f_since),
                                 family,
                                 cli::version_or_dash(r.first_cuda),
                                 cli::version_or_dash(r.removed_in),
                                 note_of(r).empty() ? "-" : note_of(r),
                                 *r.products == '\0' ? "-" : r.products};
    if (nvcc) row.insert(row.begin() + 2, nvcc_marks(*nvcc, r));
    rows.push_back(std::move(row));
  }
  print_table(rows);
}

int run_list(const ListOptions& opt) {
  if (opt.rows) return print_rows();
  archguard::Result<archguard::NvccInfo> nvcc = archguard::query_nvcc(opt.nvcc);
  if (!nvcc && !opt.nvcc.empty()) {  // asked for that nvcc explicitly: its failure is an error
    fail_usage(nvcc.message());
    return cli::kExitUsage;
  }
  if (opt.json) {
    std::cout << cli::json_text(list_json(nvcc)) << "\n";
    return cli::kExitOk;
  }
  if (nvcc) {
    std::cout << "nvcc: " << nvcc->path << " (release " << cli::version_or_dash(nvcc->release)
              << (nvcc->build.empty() ? "" : ", V" + nvcc->build) << ")\n\n";
  } else {
    std::cerr << "archguard: " << cli::shown(nvcc.message()) << "; the nvcc column is left out\n";
  }
  print_arch_table(nvcc ? &*nvcc : nullptr);
  if (nvcc) {
    const std::vector<std::string> extra = unknown_to_table(*nvcc);
    if (!extra.empty()) {
      std::cout << "\nnvcc also accepts targets the table does not know (update architectures.txt):";
      for (const std::string& e : extra) std::cout << " " << e;
      std::cout << "\n";
    }
  }
  std::cout << "\n";
  std::vector<std::vector<std::string>> rel{{"CUDA", "PTX ISA", "MIN DRIVER (Linux)"}};
  for (const archguard::ReleaseRow& r : archguard::release_rows()) {
    rel.push_back({cli::version_or_dash(r.cuda), cli::version_or_dash(r.ptx_isa), *r.min_driver == '\0' ? "-" : r.min_driver});
  }
  print_table(rel);
  return cli::kExitOk;
}

// ---- explain -------------------------------------------------------------------------------

struct ExplainOptions {
  bool json = false;
  std::string token;
  std::string cuda;  ///< "X.Y": also say whether that CUDA release's nvcc accepts each target
};

std::optional<Version2> parse_release(const std::string& text) {
  unsigned major = 0, minor = 0;
  char dot = 0;
  std::istringstream in(text);
  if (!(in >> major >> dot >> minor) || dot != '.' || !in.eof() || major == 0 || major > 99 || minor > 99) {
    return std::nullopt;
  }
  return Version2{major, minor};
}

int run_explain(const ExplainOptions& opt) {
  std::optional<Version2> cuda;
  if (!opt.cuda.empty()) {
    cuda = parse_release(opt.cuda);
    if (!cuda) {
      fail_usage("--cuda '" + opt.cuda + "': expected a CUDA release such as 12.9");
      return cli::kExitUsage;
    }
  }
  archguard::Result<std::vector<Target>> targets = archguard::parse_token(opt.token);
  if (!targets) {
    if (opt.json) std::cout << cli::json_text(json{{"token", opt.token}, {"error", targets.message()}}) << "\n";
    fail_usage(targets.message());
    return cli::kExitUsage;
  }
  cli::warn_inferred(*targets);
  int rc = cli::kExitOk;
  std::vector<std::string> support;  // per target: "" when accepted, else why not
  if (cuda) {
    for (const Target& t : *targets) {
      archguard::Status st = archguard::check_release_support(t, *cuda);
      support.push_back(st ? "" : st.message());
      if (!st) rc = cli::kExitProblem;
    }
  }
  if (opt.json) {
    json j{{"token", opt.token},
           {"cmake", archguard::format_targets(*targets, archguard::Dialect::cmake)},
           {"targets", json::array()}};
    for (std::size_t i = 0; i < targets->size(); ++i) {
      const Target& t = (*targets)[i];
      json loads = json::array();
      for (Version2 cc : archguard::loads_on(t)) loads.push_back(cli::version_or_dash(cc));
      json item{{"name", archguard::nvcc_name(t.arch, t.kind)},
                {"kind", cli::kind_text(t.kind)},
                {"arch", archguard::arch_number(t.arch)},
                {"loads_on", loads},
                {"explanation", archguard::explain_target(t)}};
      if (cuda) {
        item["cuda"] = cli::version_or_dash(*cuda);
        item["accepted"] = support[i].empty();
        if (!support[i].empty()) item["not_accepted_because"] = support[i];
      }
      j["targets"].push_back(item);
    }
    std::cout << cli::json_text(std::move(j)) << "\n";
    return rc;
  }
  for (std::size_t i = 0; i < targets->size(); ++i) {
    const Target& t = (*targets)[i];
    std::cout << archguard::nvcc_name(t.arch, t.kind) << ": " << archguard::explain_target(t) << "\n";
    if (cuda) {
      std::cout << "  CUDA " << cli::version_or_dash(*cuda) << ": "
                << (support[i].empty() ? "nvcc accepts it" : "not accepted: " + support[i]) << "\n";
    }
  }
  return rc;
}

// ---- normalize -----------------------------------------------------------------------------

struct NormalizeOptions {
  std::string format = "cmake";
  std::vector<std::string> tokens;
};

int run_normalize(const NormalizeOptions& opt) {
  std::string text;
  for (const std::string& t : opt.tokens) text += (text.empty() ? "" : " ") + t;
  archguard::Result<std::string> normal = archguard::normalize_list(text, opt.format);
  if (!normal) {
    fail_usage(normal.message());
    return cli::kExitUsage;
  }
  std::cout << *normal << "\n";
  return cli::kExitOk;
}

void setup(CLI::App& root, cli::Context& ctx) {
  CLI::App* arch = root.add_subcommand("arch", "Architectures: the table, what a target means, canonical forms");
  arch->require_subcommand(1);

  auto [list, list_opt] = cli::add_command<ListOptions>(
      *arch, ctx, "list", "Print the architecture table and mark what the installed nvcc accepts (asked of nvcc itself)", run_list);
  list->add_flag("--json", list_opt->json, "Machine-readable output");
  list->add_flag("--rows", list_opt->rows,
                 "Print the canonical table rows, as 'cmake -DEMIT=rows -P CudaArchGuardTable.cmake' does");
  list->add_option("--nvcc", list_opt->nvcc, "The nvcc to ask (default: PATH, then /usr/local/cuda/bin)");

  auto [explain, explain_opt] =
      cli::add_command<ExplainOptions>(*arch, ctx, "explain", "Explain one target token in plain words", run_explain);
  explain->add_option("token", explain_opt->token, "e.g. sm_100a, 90-real, 8.6, compute_80, Hopper")->required();
  explain->add_flag("--json", explain_opt->json, "Machine-readable output");
  explain->add_option("--cuda", explain_opt->cuda,
                      "Also say whether this CUDA release's nvcc accepts it (exit 1 when not), e.g. 12.8");

  auto norm_opt = std::make_shared<NormalizeOptions>();
  CLI::App* normalize = arch->add_subcommand(
      "normalize", "Print targets (any dialect, nvcc flags included) in canonical form");
  normalize->add_option("--format", norm_opt->format, "Output dialect: cmake (default), gencode, torch, tf or codes (every code by its nvcc name)");
  // nvcc flags (-arch=sm_86, -gencode ...) are not archguard options: from the first word that
  // is not --format on, everything is kept in order and --format picked out by hand.
  normalize->prefix_command();
  normalize->callback([norm_opt, normalize, &ctx] {
    NormalizeOptions opt = *norm_opt;
    const std::vector<std::string> words = normalize->remaining();
    for (std::size_t i = 0; i < words.size(); ++i) {
      if (words[i] == "--") continue;
      if (words[i] == "--format" && i + 1 < words.size()) {
        opt.format = words[++i];
      } else if (words[i].rfind("--format=", 0) == 0) {
        opt.format = words[i].substr(9);
      } else {
        opt.tokens.push_back(words[i]);
      }
    }
    if (opt.tokens.empty()) {
      fail_usage("arch normalize: give at least one target, e.g. 'archguard arch normalize 80 sm_90a'");
      ctx.exit_code = cli::kExitUsage;
      return;
    }
    ctx.exit_code = run_normalize(opt);
  });

  // plan: the policy engine in the line format the CMake module reads (docs/policy.md, "The
  // plan format"); its options are the library's (run_plan_command), shared with archguard-verify.
  CLI::App* plan = arch->add_subcommand(
      "plan", "Resolve ARCH_POLICY for an nvcc's answers and print the plan as key=value lines");
  plan->prefix_command();
  plan->callback([plan, &ctx] {
    std::vector<std::string> words;
    for (const std::string& w : plan->remaining()) {
      if (w != "--") words.push_back(w);
    }
    const archguard::PlanCommandOutput out = archguard::run_plan_command(words);
    std::cout << out.text;
    ctx.exit_code = out.exit_code;
  });
}

}  // namespace

ARCHGUARD_VERB(setup);
