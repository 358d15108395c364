// SPDX-License-Identifier: Apache-2.0
// archguard verify FILE... --require LIST: exit 1 unless every kernel-bearing fatbin carries
// the required SASS (and PTX). The CMake verify step calls this after each link.
#include "cli.hpp"
#include "verb_inputs.hpp"

#include <archguard/verify_output.hpp>

#include <cstdio>
#include <memory>

namespace archguard::cli {
namespace {

struct VerifyOptions {
  std::vector<std::string> files;
  ReadLimits limits;
  std::vector<std::string> require;
  std::string ptx;
  bool allow_compatible = false;
  bool strict = false;
  bool json = false;
  bool lines = false;
  bool quiet = false;
};

/// An image whose payload does not decode cannot be loaded by the driver either: saying "ok"
/// for it would be wrong, so it is an error (exit 2) naming the image, not a warning.
/// Decoding streams each payload once and keeps none (docs/cli.md gives the cost).
void check_images_decode(Inputs& in) {
  for (const auto& r : in.reports)
    for (const auto& o : r.objects)
      for (const auto& fb : o.fatbins)
        for (const auto& e : fb.entries)
          // LTO-IR is read by nvJitLink at link time, never by the driver (and nvcc compresses it
          // in its own framing): only SASS and PTX must decode.
          if (e.kind == CodeKind::ltoir) continue;
          else if (auto image = decompress(e, o.path); !image)
            in.errors.push_back(image.message() + "; the driver cannot load this image");
          else if (auto cubin = check_cubin_image(e, *image, o.path); !cubin)  // decodes, but to what?
            in.errors.push_back(cubin.message() + "; the driver cannot load this image");
}

nlohmann::json unit_json(const UnitFinding& u) {
  nlohmann::json compatible = nlohmann::json::array();
  for (const auto& [need, have] : u.compatible)
    compatible.push_back({{"required", nvcc_name(need, CodeKind::sass)}, {"used", nvcc_name(have, CodeKind::sass)}});
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& k : u.kernels) kernels.push_back({{"name", k.name}, {"demangled", k.demangled}});
  return {{"object", u.object},
          {"fatbin", u.fatbin},
          {"section", to_string(u.section)},
          {"identifier", u.identifier},
          {"translation_unit", u.translation_unit},
          {"status", to_string(u.status)},
          {"found_sass", arch_list_json(u.found_sass, CodeKind::sass)},
          {"found_ptx", arch_list_json(u.found_ptx, CodeKind::ptx)},
          {"missing_sass", arch_list_json(u.missing_sass, CodeKind::sass)},
          {"missing_ptx", arch_list_json(u.missing_ptx, CodeKind::ptx)},
          {"missing_ptx_highest", u.missing_ptx_highest},
          {"compatible", std::move(compatible)},
          {"kernels", std::move(kernels)},
          {"message", u.message}};
}

nlohmann::json verify_json(const VerifyReport& report, const Requirement& req, const Inputs& in, bool passed) {
  nlohmann::json units = nlohmann::json::array();
  for (const auto& u : report.units) units.push_back(unit_json(u));
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& f : in.facts)
    for (const auto& s : f.skipped) skipped.push_back(s);
  return {{"schema", "archguard.verify/1"},
          {"passed", passed && in.errors.empty()},
          {"require",
           {{"sass", arch_list_json(req.sass, CodeKind::sass)},
            {"ptx", arch_list_json(req.ptx, CodeKind::ptx)},
            {"ptx_highest", req.ptx_highest},
            {"allow_compatible", req.allow_compatible},
            {"strict", req.strict}}},
          {"objects_checked", report.objects},
          {"skipped", std::move(skipped)},
          {"units", std::move(units)},
          {"errors", in.errors}};
}

int run_verify(const VerifyOptions& opt) {
  std::string list;
  for (const auto& r : opt.require) list += (list.empty() ? "" : " ") + r;
  auto req = parse_requirement(list, opt.ptx);
  if (!req) {
    std::fprintf(stderr, "archguard verify: %s\n", req.message().c_str());
    return kExitUsage;
  }
  if (!opt.quiet) {
    std::vector<Target> named;
    for (Arch a : req->sass) named.push_back({a, CodeKind::sass});
    for (Arch a : req->ptx) named.push_back({a, CodeKind::ptx});
    warn_inferred(named);
  }
  req->allow_compatible = opt.allow_compatible;
  req->strict = opt.strict;
  auto scan = scan_options(opt.limits);
  if (!scan) {
    std::fprintf(stderr, "archguard verify: %s\n", shown(scan.message()).c_str());
    return kExitUsage;
  }
  Inputs in = read_inputs(opt.files, *scan);
  check_images_decode(in);
  VerifyReport report;
  for (const auto& r : in.reports) {  // per input: the reports keep the mapped bytes alive
    VerifyReport part = verify(r.objects, *req);
    report.objects += part.objects;
    for (auto& u : part.units) report.units.push_back(std::move(u));
  }
  const bool passed = report.passed();
  int code = !in.errors.empty() ? kExitUsage : passed ? kExitOk
                                                      : kExitProblem;

  if (opt.json) {
    std::printf("%s\n", cli::json_text(verify_json(report, *req, in, passed)).c_str());
    return code;
  }
  if (opt.lines) {  // the line format of the CMake verify step
    std::fputs(verify_lines(report, in.errors).c_str(), stdout);
    return code;
  }
  std::vector<std::string> no_device;  // every input gets a line; those with device code are in the summary
  for (std::size_t i = 0; i < in.reports.size(); ++i)
    if (!has_device_code(in.reports[i])) no_device.push_back(no_device_code_line(in.facts[i]));
  print_skipped(in);
  print_errors(in.errors);
  std::fputs(verify_text(report, opt.quiet, code != kExitOk, no_device).c_str(), stdout);
  if (report.units.empty() && in.errors.empty()) {
    // Nothing can fail with "no kernel image" when there is no kernel: not an error, but say so
    // (a wrong path given to the verify step shows up here).
    std::fprintf(stderr, "archguard verify: note: no device code in the given files; nothing to verify\n");
    return kExitOk;
  }
  return code;
}

void setup(CLI::App& root, Context& ctx) {
  auto [cmd, opt] = add_command<VerifyOptions>(root, ctx, "verify",
                                               "Fail unless every kernel-bearing fatbin carries the required SASS and PTX", run_verify);
  cmd->add_option("files", opt->files, "Files or directories to check")->required();
  cmd->add_option("--require", opt->require,
                  "Required architectures: 75,80,90,120 | sm_90a | a CMake list such as 80-real;90 "
                  "(-real: SASS, -virtual: PTX) | nvcc flags such as '-gencode arch=compute_80,code=sm_80'")
      ->required()
      ->allow_extra_args(false);
  cmd->add_option("--ptx", opt->ptx, "PTX requirement: highest | <arch> | none (default: what --require says)");
  cmd->add_flag("--allow-compatible", opt->allow_compatible,
                "Accept a binary-compatible lower SASS (e.g. sm_80 for 86) and say so");
  cmd->add_flag("--strict", opt->strict, "Judge fatbins holding only a/f images like the others");
  cmd->add_flag("--json", opt->json, "Machine-readable output (schema: docs/json-schema.md)");
  cmd->add_flag("--lines", opt->lines, "The key=value line format the CMake verify step reads (docs/policy.md)");
  add_limit_flags(cmd, opt->limits);
  cmd->add_flag("-q,--quiet", opt->quiet, "Print only problems");
}

}  // namespace

ARCHGUARD_VERB(setup);

}  // namespace archguard::cli
