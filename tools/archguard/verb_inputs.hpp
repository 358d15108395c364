// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shared by the verbs that read files (inspect, verify, check): reading the inputs and the
// JSON spelling of the reader's vocabulary.

#include "cli.hpp"

#include <archguard/container.hpp>
#include <archguard/coverage.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>

#include <iostream>
#include <string>
#include <vector>

namespace archguard::cli {

struct Inputs {
  std::vector<ScanReport> reports;
  std::vector<std::string> errors;  ///< unreadable inputs and problems inside them
};

/// The archive budgets as flags (docs/cli.md), shared by inspect, verify and check. Empty: the
/// environment (ARCHGUARD_MAX_INFLATED, ARCHGUARD_MAX_INFLATED_TOTAL, ARCHGUARD_MAX_RATIO),
/// then the library's defaults.
struct ReadLimits {
  std::string max_inflated, max_inflated_total, max_ratio;
  unsigned threads = 0;
};

inline void add_limit_flags(CLI::App* cmd, ReadLimits& l) {
  cmd->add_option("--max-inflated", l.max_inflated,
                  "Most bytes the archives of one input may inflate to (default 8G; env ARCHGUARD_MAX_INFLATED)");
  cmd->add_option("--max-inflated-total", l.max_inflated_total,
                  "Most bytes all inputs' archives may inflate to (default 32G; env ARCHGUARD_MAX_INFLATED_TOTAL)");
  cmd->add_option("--max-ratio", l.max_ratio,
                  "Most bytes inflated per byte of an input, beyond 64M (default 200; env ARCHGUARD_MAX_RATIO)");
}

/// ScanOptions from the flags and the environment; an error names the flag or variable.
inline Result<ScanOptions> scan_options(const ReadLimits& l) {
  ScanOptions o;
  o.threads = l.threads;
  auto pick = [](const std::string& flag_value, const char* flag, const char* env, bool plain,
                 std::uint64_t& out) -> Status {
    std::string text = flag_value, who = flag;
    if (text.empty()) {
      const char* e = std::getenv(env);
      if (e == nullptr || *e == 0) return Ok{};
      text = e;
      who = env;
    }
    auto v = parse_byte_size(text);
    if (!v || (plain && text.find_first_not_of("0123456789") != std::string::npos))
      return Error{who + ": '" + text + "' is not " +
                   (plain ? std::string("a whole number") : std::string("a size (bytes, or with K, M, G or T)")) +
                   " that fits in 64 bits"};
    out = *v;
    return Ok{};
  };
  if (auto st = pick(l.max_inflated, "--max-inflated", "ARCHGUARD_MAX_INFLATED", false, o.budget.per_input); !st) return st.error();
  if (auto st = pick(l.max_inflated_total, "--max-inflated-total", "ARCHGUARD_MAX_INFLATED_TOTAL", false, o.budget.per_run); !st)
    return st.error();
  if (auto st = pick(l.max_ratio, "--max-ratio", "ARCHGUARD_MAX_RATIO", true, o.budget.max_ratio); !st) return st.error();
  return o;
}

/// Reads every path; problems are collected, never fatal, so that one bad file does not hide
/// the verdict on the others (the verb exits 2 when errors is not empty). One ScanOptions for
/// all paths: the per-run inflate budget counts over all of them.
inline Inputs read_inputs(const std::vector<std::string>& paths, const ScanOptions& options = {}) {
  Inputs in;
  for (const auto& p : paths) {
    auto r = scan_path(p, options);
    if (!r) {
      in.errors.push_back(r.message());
      continue;
    }
    for (const auto& e : r->errors) in.errors.push_back(e);
    in.reports.push_back(std::move(*r));
  }
  return in;
}

inline void print_errors(const std::vector<std::string>& errors) {
  for (const auto& e : errors) std::cerr << "archguard: error: " << shown(e) << '\n';
}

inline std::string version_text(Version2 v) { return std::to_string(v.major) + "." + std::to_string(v.minor); }

inline std::string_view kind_text(CodeKind k) {
  switch (k) {
    case CodeKind::sass: return "sass";
    case CodeKind::ptx: return "ptx";
    case CodeKind::ltoir: return "ltoir";
  }
  return "?";
}

inline std::string_view outcome_text(Outcome o) {
  switch (o) {
    case Outcome::native: return "native";
    case Outcome::jit: return "jit";
    case Outcome::fail: return "fail";
  }
  return "?";
}

inline std::string image_name(const Image& im) {
  return nvcc_name(im.arch, im.kind == CodeKind::ltoir ? CodeKind::ptx : im.kind);
}

inline nlohmann::json arch_list_json(const std::vector<Arch>& archs, CodeKind kind) {
  auto j = nlohmann::json::array();
  for (const Arch& a : archs) j.push_back(nvcc_name(a, kind));
  return j;
}

inline nlohmann::json image_json(const Image& im) {
  nlohmann::json j{{"kind", kind_text(im.kind)}, {"arch", image_name(im)}, {"relocatable", im.relocatable}};
  if (im.kind == CodeKind::ptx) j["ptx_isa"] = version_text(im.ptx_isa);
  return j;
}

inline nlohmann::json verdict_json(const Verdict& v, const std::vector<Image>& images) {
  nlohmann::json j{{"outcome", outcome_text(v.outcome)}, {"cuda_error", v.cuda_error}, {"reason", v.reason}};
  if (v.image && *v.image < images.size()) j["image"] = image_json(images[*v.image]);
  else j["image"] = nullptr;
  return j;
}

}  // namespace archguard::cli
