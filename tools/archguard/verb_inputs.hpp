// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shared by the verbs that read files (inspect, verify, check): reading the inputs and the
// JSON spelling of the reader's vocabulary.

#include "cli.hpp"

#include <archguard/container.hpp>
#include <archguard/coverage.hpp>
#include <archguard/deps.hpp>
#include <archguard/elf.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <functional>
#include <optional>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>
#include <string>
#include <thread>
#include <vector>

namespace archguard::cli {

/// What reading one input found besides its objects.
struct InputFacts {
  std::string input;                ///< the path as given
  std::size_t files_scanned = 0;    ///< files read for it (a directory's files, its libraries)
  std::size_t libraries = 0;        ///< shared libraries it loads (found by the walk)
  std::vector<Dependency> missing;  ///< libraries it loads that were not found
  std::vector<std::string> notes;   ///< problems of the walk (not errors of the input)
  /// Files and members that could hold device code but were not read, "<path>: <why>"
  /// (ScanReport::skipped): not counted in files_scanned.
  std::vector<std::string> skipped;
};

struct Inputs {
  std::vector<ScanReport> reports;
  std::vector<InputFacts> facts;    ///< one per reports entry, same order
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
  // The one parser of every budget and limit: the flag's value, else the variable's; a value
  // below `least` (or not a number, or past 64 bits) is a usage error naming it and the value.
  auto pick = [](const std::string& flag_value, const char* flag, const char* env, bool plain, std::uint64_t& out,
                 std::uint64_t least = 0) -> Status {
    std::string text = flag_value, who = flag;
    if (text.empty()) {
      const char* e = std::getenv(env);
      if (e == nullptr || *e == 0) return Ok{};
      text = e;
      who = env;
    }
    auto v = parse_byte_size(text);
    if (!v || (plain && text.find_first_not_of("0123456789") != std::string::npos))
      return Error{ErrorKind::usage, who + ": '" + text + "' is not " +
                                         (plain ? std::string("a whole number") : std::string("a size (bytes, or with K, M, G or T)")) +
                                         " that fits in 64 bits"};
    if (*v < least) return Error{ErrorKind::usage, who + ": '" + text + "' is below the least value " + std::to_string(least)};
    out = *v;
    return Ok{};
  };
  AG_TRY_STATUS(pick(l.max_inflated, "--max-inflated", "ARCHGUARD_MAX_INFLATED", false, o.budget.per_input));
  if (auto st = pick(l.max_inflated_total, "--max-inflated-total", "ARCHGUARD_MAX_INFLATED_TOTAL", false, o.budget.per_run); !st)
    return st.error();
  AG_TRY_STATUS(pick(l.max_ratio, "--max-ratio", "ARCHGUARD_MAX_RATIO", true, o.budget.max_ratio));
  std::uint64_t mappings = o.max_mappings;  // no flag: a limit of the machine (vm.max_map_count), not of the input
  AG_TRY_STATUS(pick("", "ARCHGUARD_MAX_MAPPINGS", "ARCHGUARD_MAX_MAPPINGS", true, mappings));
  o.max_mappings = static_cast<std::size_t>(mappings);
  // What is derived from input (docs/cli.md): no flags, as for the mappings; raised for one run
  // that needs it (a library with longer names than any seen so far), not per input.
  AG_TRY_STATUS(pick("", "ARCHGUARD_MAX_NAME_LENGTH", "ARCHGUARD_MAX_NAME_LENGTH", false, o.limits.max_name_length, 1));
  AG_TRY_STATUS(pick("", "ARCHGUARD_MAX_KERNEL_NAMES", "ARCHGUARD_MAX_KERNEL_NAMES", false, o.limits.max_kernel_name_bytes, 1));
  AG_TRY_STATUS(pick("", "ARCHGUARD_MAX_SEARCH_WORK", "ARCHGUARD_MAX_SEARCH_WORK", true, o.limits.search_work_per_8_bytes, 1));
  // From which image size kernel lists are decoded keeping only what they read (fatbin.hpp):
  // a tuning of the process, for benchmarks; no flag.
  std::uint64_t sparse_from = sparse_decode_from();
  AG_TRY_STATUS(pick("", "ARCHGUARD_SPARSE_FROM", "ARCHGUARD_SPARSE_FROM", false, sparse_from));
  set_sparse_decode_from(sparse_from);
  std::uint64_t max_threads = o.max_threads;
  AG_TRY_STATUS(pick("", "ARCHGUARD_MAX_THREADS", "ARCHGUARD_MAX_THREADS", true, max_threads, 1));
  if (max_threads > 65536)
    return Error{ErrorKind::usage, "ARCHGUARD_MAX_THREADS: '" + std::to_string(max_threads) + "' is above the most threads 65536"};
  o.max_threads = static_cast<unsigned>(max_threads);
  if (o.threads > o.max_threads)
    return Error{ErrorKind::usage, "--threads: " + std::to_string(o.threads) + " is above the limit " + std::to_string(o.max_threads) +
                                       " (raise it with ARCHGUARD_MAX_THREADS)"};
  return o;
}

struct ReadOptions {
  /// Budgets and limits (scan_options); `threads` below overrides scan.threads when not 0.
  ScanOptions scan;
  unsigned threads = 0;
  /// Also read the shared libraries an executable or shared library input loads (deps.hpp),
  /// each once over all inputs; their objects get ObjectFatbins::loaded_by. Directories and
  /// archives are not walked: their files are judged one by one.
  bool deps = false;
  DependencyOptions dependency_options;
  /// Per path (by index), a walk of it made already (SharedWalk), or none.
  std::vector<SharedWalk*> walks;
  /// Called with each input's report and facts as soon as it is read, in input order; the
  /// report's objects and storage are then dropped (Inputs keeps its shell: input, counts,
  /// notes), so that a reader that prints as it goes (inspect's table, with scan.each_file for
  /// a directory's files) holds one input at a time.
  std::function<void(ScanReport&, const InputFacts&)> each_input;
};

bool stderr_is_tty();  // main.cpp

/// A progress line on stderr while one input is being read: drawn only when stderr is a
/// terminal and the read has taken more than a second (small inputs print nothing), erased
/// when the read ends, so that piped and redirected output never contains it.
class ScanProgress {
 public:
  ScanProgress(const std::string& path, std::size_t index, std::size_t count) {
    if (!stderr_is_tty()) return;
    worker_ = std::thread([this, path, index, count] {
      using namespace std::chrono_literals;
      const auto start = std::chrono::steady_clock::now();
      std::unique_lock lock(mutex_);
      bool drawn = false;
      while (!cv_.wait_for(lock, 250ms, [this] { return done_; })) {
        const auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (secs < 1.0) continue;
        char elapsed[32];
        std::snprintf(elapsed, sizeof elapsed, "%.0f s", secs);
        std::cerr << "\r\033[Karchguard: reading " << shown(path);
        if (count > 1) std::cerr << " (" << index + 1 << "/" << count << ")";
        std::cerr << " ... " << elapsed << std::flush;
        drawn = true;
      }
      if (drawn) std::cerr << "\r\033[K" << std::flush;
    });
  }
  ~ScanProgress() {
    if (!worker_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    worker_.join();
  }
  ScanProgress(const ScanProgress&) = delete;
  ScanProgress& operator=(const ScanProgress&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread worker_;
};

/// Reads every path; problems are collected, never fatal, so that one bad file does not hide
/// the verdict on the others (the verb exits 2 when errors is not empty). One ScanOptions for
/// all paths: the per-run inflate budget counts over all of them.
inline Inputs read_inputs(const std::vector<std::string>& paths, const ReadOptions& options) {
  Inputs in;
  ScanOptions scan = options.scan;  // copies share the per-run inflate budget
  if (options.threads != 0) scan.threads = options.threads;
  std::set<std::string> seen;  // real paths already judged: each library once over all inputs
  for (const auto& p : paths) seen.insert(real_path_or_self(p));
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::string& p = paths[i];
    scan.walk = i < options.walks.size() ? options.walks[i] : options.scan.walk;
    auto r = [&] {
      // A directory printed while it is read shows its progress itself: no line beside it.
      std::error_code ec;
      std::optional<ScanProgress> progress;
      if (!scan.each_file || !std::filesystem::is_directory(p, ec)) progress.emplace(p, i, paths.size());
      return scan_path(p, scan);
    }();
    if (!r) {
      in.errors.push_back(r.message());
      continue;
    }
    for (const auto& e : r->errors) in.errors.push_back(e);
    InputFacts facts;
    facts.input = p;
    facts.files_scanned = r->files_read;
    facts.skipped = r->skipped;
    if (options.deps && is_program(*r)) {
      LoadedLibraries libs = add_loaded_libraries(*r, seen, options.dependency_options, scan);
      facts.files_scanned += libs.files_read;
      facts.libraries = libs.libraries;
      facts.missing = std::move(libs.missing);
      facts.notes = std::move(libs.notes);
    }
    if (options.each_input) {
      options.each_input(*r, facts);
      r->objects = {};
      r->storage = {};
    }
    in.reports.push_back(std::move(*r));
    in.facts.push_back(std::move(facts));
  }
  return in;
}

inline Inputs read_inputs(const std::vector<std::string>& paths, const ScanOptions& scan) {
  ReadOptions o;
  o.scan = scan;
  return read_inputs(paths, o);
}

inline Inputs read_inputs(const std::vector<std::string>& paths, unsigned threads = 0) {
  ReadOptions o;
  o.threads = threads;
  return read_inputs(paths, o);
}

/// Whether a report holds any fatbin (its input needs no "no device code" line).
inline bool has_device_code(const ScanReport& r) {
  for (const auto& o : r.objects)
    if (!o.fatbins.empty()) return true;
  return false;
}

/// "<input>: no device code (N files scanned)": every input gets at least one line.
inline std::string no_device_code_line(const InputFacts& f) {
  std::string s = f.input + ": no device code (" + std::to_string(f.files_scanned) +
                  (f.files_scanned == 1 ? " file" : " files") + " scanned";
  if (f.libraries > 0) s += ", including " + std::to_string(f.libraries) + (f.libraries == 1 ? " loaded library" : " loaded libraries");
  if (!f.skipped.empty()) s += "; " + std::to_string(f.skipped.size()) + " not read";
  return s + ")";
}

/// Says on stderr which files and members were not read, and why: nothing is skipped in silence.
inline void print_skipped(const Inputs& in) {
  for (const auto& f : in.facts)
    for (const auto& k : f.skipped) std::cerr << "archguard: note: not read: " << shown(k) << '\n';
}

/// Notes about the libraries an input loads that were not found (ld.so would refuse to start
/// the program on this machine; device code in them is not judged).
inline std::vector<std::string> dependency_notes(const InputFacts& f) {
  std::vector<std::string> out;
  for (const auto& d : f.missing)
    out.push_back(f.input + ": note: " + d.needed + " (needed by " + d.loaded_by +
                  ") was not found on this machine; its device code is not judged");
  for (const auto& n : f.notes) out.push_back(f.input + ": note: " + n);
  return out;
}

inline void print_errors(const std::vector<std::string>& errors) {
  for (const auto& e : errors) std::cerr << "archguard: error: " << shown(e) << '\n';
}

inline std::string_view outcome_text(Outcome o) {
  static constexpr common::Named<Outcome> names[] = {{Outcome::native, "native"}, {Outcome::jit, "jit"}, {Outcome::fail, "fail"}};
  return common::name_in(names, o);
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
