// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// The policy engine: what ARCH_POLICY (with ARCH_PTX, ARCH_MIN, a fleet file or the visible
/// GPUs) becomes for one nvcc, as an explicit set of SASS and PTX targets, checked against
/// what that nvcc builds, with where the result runs. The CMake module asks it through
/// `arch plan` of both tools (archguard, archguard-verify) and applies the answer; the line
/// format those verbs print is format_plan() (docs/policy.md, "The plan format").
/// Built on the compatibility rules (sass_runs_on, ptx_targets) and the one fleet reader
/// (parse_fleet_csv). Never prints: warnings are returned in the plan.

#include <archguard/arch.hpp>
#include <archguard/result.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace archguard {

/// What an nvcc says it builds (its --version, --list-gpu-code, --list-gpu-arch and the a/f
/// values of --help).
struct PlanToolkit {
  std::string path;            ///< for the summary
  Version2 release;            ///< 13.0
  std::vector<unsigned> sass;  ///< plain SM numbers with SASS, any order
  std::vector<unsigned> ptx;   ///< plain SM numbers with PTX
  std::vector<Arch> variants;  ///< the a/f variants it accepts
};

/// One visible or fleet GPU.
struct PlanGpu {
  std::string name;  ///< "NVIDIA H100 80GB HBM3"
  Version2 cc;
};

struct PlanRequest {
  std::string policy = "auto";  ///< auto, native, all, all-major, fleet:<file> or a list
  std::string ptx = "highest";  ///< ARCH_PTX: highest, all or none
  std::string min;              ///< ARCH_MIN: "", "8.0" or "80"
  bool exact = false;           ///< the list is a user's CMAKE_CUDA_ARCHITECTURES (CMake's meaning)
  std::string who;              ///< how messages name the setting; "" = ARCH_POLICY=<policy>
  PlanToolkit toolkit;
  /// auto / native: the GPUs detected on this host (one entry per device), how they were
  /// found ("nvidia-smi") and, when none was, why.
  std::vector<PlanGpu> gpus;
  std::string gpu_source;
  std::string gpu_why;
  /// fleet:<file>: the directory a relative path is resolved against.
  std::string fleet_base;
};

/// Where a target set runs, over the architectures of the table (and any the toolkit lists
/// that the table lacks): natively, by JIT, or not at all.
struct PlanRuns {
  std::vector<unsigned> native, jit, none;
  unsigned top_ptx = 0;  ///< the highest plain PTX (0: none)
  std::string text;      ///< the summary's "runs:" line, without the key
};

struct Plan {
  std::string policy;                 ///< as given (trimmed)
  std::string who;                    ///< how messages named it
  std::string mode;                   ///< the policy used: native, all-major, fleet, list, ...
  std::vector<Target> targets;        ///< canonical order
  std::vector<std::string> gpus;      ///< "NVIDIA H200 (9.0)" per distinct device
  std::vector<unsigned> gpu_sms;      ///< the SM of every GPU used (one per device or fleet row)
  std::vector<std::string> warnings;  ///< to be shown as warnings
  std::vector<std::string> why;       ///< the summary's why: lines
  PlanRuns runs;
  std::vector<std::string> summary;  ///< the configure summary, one entry per line
  std::vector<std::string> inputs;   ///< files the answer was read from (the fleet file), for a caller's cache
};

/// Resolves a policy. Errors are the messages the configure step stops with (usage kind).
Result<Plan> plan_policy(const PlanRequest& request);

/// Where `targets` run (the rules of compat.hpp over the table and `extra` SM numbers).
PlanRuns plan_runs(const std::vector<Target>& targets, const std::vector<unsigned>& extra = {});

/// "sass:80" / "ptx:90a" / "lto:80": the internal item form the CMake module reads.
std::string plan_item(Target target);

/// The plan as `arch plan` prints it: "key=value" lines (format_plan_error for a failure).
/// Keys: format (1), status (ok), mode, items, sass, ptx, gpu (repeated), gpu_sms, runs, runs_text,
/// warning (repeated), summary (repeated), inputs (how many input lines follow), input (repeated:
/// a file the answer depends on; the module re-uses a cached answer while they are unchanged).
/// Newlines and backslashes in values are written as \n and \\.
std::string format_plan(const Plan& plan);
/// "format=1", "status=error", "error=<message>".
std::string format_plan_error(std::string_view message);

/// `arch plan` of both tools: parses its arguments (see docs/policy.md), reads a fleet file
/// when the policy names one, and gives the text to print and the exit code (0, or 2 with
/// the error in the text).
struct PlanCommandOutput {
  std::string text;
  int exit_code = 0;
};
PlanCommandOutput run_plan_command(const std::vector<std::string>& args);

}  // namespace archguard
