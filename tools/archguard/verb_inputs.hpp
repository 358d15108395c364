// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shared by the verbs that read files (inspect, verify, check): reading the inputs and the
// JSON spelling of the reader's vocabulary.

#include <archguard/container.hpp>
#include <archguard/coverage.hpp>

#include <nlohmann/json.hpp>

#include <iostream>
#include <string>
#include <vector>

namespace archguard::cli {

struct Inputs {
  std::vector<ScanReport> reports;
  std::vector<std::string> errors;  ///< unreadable inputs and problems inside them
};

/// Reads every path; problems are collected, never fatal, so that one bad file does not hide
/// the verdict on the others (the verb exits 2 when errors is not empty).
inline Inputs read_inputs(const std::vector<std::string>& paths, unsigned threads = 0) {
  Inputs in;
  ScanOptions options;
  options.threads = threads;
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
  for (const auto& e : errors) std::cerr << "archguard: error: " << e << '\n';
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
