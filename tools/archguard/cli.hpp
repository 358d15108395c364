// SPDX-License-Identifier: Apache-2.0
#pragma once
// The verb registry of the archguard tool. Each verb_<name>.cpp defines a setup function that
// adds its subcommand to the root CLI11 app and registers it with ARCHGUARD_VERB(setup).
//
// Exit codes (documented in docs/cli.md):
//   0  ok
//   1  the check found a problem (verify failed, check predicts a failure, doctor found one)
//   2  bad usage or unreadable input
//   3  doctor: no CUDA driver on this machine (steps that need none still ran)

#include <archguard/arch.hpp>
#include <archguard/fatbin.hpp>

#include "common/names.hpp"
#include "common/text.hpp"
#include "common/version.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>
#include <set>
#include <span>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace archguard::cli {

/// "9.0": the library's one text form of a two-number version (compute capability, CUDA, PTX ISA).
using common::version_text;
/// version_text, or "-" for an empty (unknown) version, as tables show it.
inline std::string version_or_dash(Version2 v) { return v.empty() ? "-" : version_text(v); }

/// The kind of an image as the JSON and text outputs spell it: "sass", "ptx", "ltoir".
inline std::string_view kind_text(CodeKind k) {
  static constexpr common::Named<CodeKind> names[] = {{CodeKind::sass, "sass"}, {CodeKind::ptx, "ptx"}, {CodeKind::ltoir, "ltoir"}};
  return common::name_in(names, k);
}

/// The archguard version and the commit it was built from ("archguard 0.1.0 commit abc..."):
/// what the results cache keys its entries by, so that another build reads none of them.
std::string producer_text();
/// The results cache of this run (archguard/results_cache.hpp), opened on first use; null
/// when turned off (`no_cache`, ARCHGUARD_CACHE_DISABLE=1, no home directory) or unusable.
/// Its problems are printed on stderr once, when the verb is done (report_results_cache).
FactsStore* results_cache(bool no_cache);
/// Prints the results cache's problems (and, with ARCHGUARD_RESULTS_CACHE_STATS=1, its counters).
void report_results_cache();

inline constexpr int kExitOk = 0;
inline constexpr int kExitProblem = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNoDriver = 3;

/// Shared state of one invocation: verbs store their exit code here.
struct Context {
  int exit_code = kExitOk;
};

using VerbSetup = void (*)(CLI::App& root, Context& ctx);

/// A subcommand of `parent` and the options it fills (held with its callback), whose callback
/// stores `run(options)` as the exit code: what every verb and sub-verb is made of.
template <class Options>
struct Command {
  CLI::App* app;
  std::shared_ptr<Options> options;
};

template <class Options, class Run>
Command<Options> add_command(CLI::App& parent, Context& ctx, std::string name, std::string description, Run run) {
  auto options = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand(std::move(name), std::move(description));
  app->callback([options, &ctx, run] { ctx.exit_code = run(*options); });
  return {app, options};
}

std::vector<VerbSetup>& verb_registry();

struct VerbRegistrar {
  explicit VerbRegistrar(VerbSetup setup) { verb_registry().push_back(setup); }
};

#define ARCHGUARD_CONCAT_INNER(a, b) a##b
#define ARCHGUARD_CONCAT(a, b) ARCHGUARD_CONCAT_INNER(a, b)
/// Registers a verb's setup function; use once per verb file at namespace scope.
#define ARCHGUARD_VERB(setup) \
  static const ::archguard::cli::VerbRegistrar ARCHGUARD_CONCAT(archguard_verb_, __LINE__) { setup }

/// Warns on stderr, once per architecture and process, about each target whose architecture
/// the table lacks and that is therefore inferred (see archguard::inferred_arch_note).
inline void warn_inferred(std::span<const Target> targets) {
  static std::set<unsigned> warned;
  for (const Target& t : targets) {
    if (arch_inferred(t.arch) && warned.insert(t.arch.sm).second) {
      std::cerr << "archguard: warning: " << inferred_arch_note(Arch{t.arch.sm, Suffix::none}) << "\n";
    }
  }
}

/// Warns on stderr when a compute capability given on the command line (--cc 9.9, --cc 13.0)
/// has no row in the architecture table: it is judged by the inferred rules, said once.
inline void warn_unknown_cc(Version2 cc) {
  const unsigned sm = cc.major * 10 + cc.minor;
  const Target t{Arch{sm, Suffix::none}, CodeKind::sass};
  warn_inferred(std::span<const Target>(&t, 1));
}

/// CLI11 check for a compute capability option: an empty value (--cc "") is refused instead of
/// meaning "no --cc".
inline CLI::Validator non_empty_cc() {
  return CLI::Validator(
      [](std::string& v) {
        return v.find_first_not_of(" \t") == std::string::npos
                   ? std::string("an empty compute capability; give one such as 9.0, or leave --cc out")
                   : std::string();
      },
      "CC");
}

/// True when stdout is a terminal (tables get colour/width there).
bool stdout_is_tty();
/// True when stderr is a terminal (progress lines are drawn there, and only there).
bool stderr_is_tty();
/// Whether to colour stdout: a terminal, TERM not "dumb", and NO_COLOR unset or empty
/// (https://no-color.org).
bool use_colour();

/// The registered subcommand nearest to `word` by edit distance, "" when none is close enough
/// (at most 2 edits, or a third of the word for long names): `inpsect` -> `inspect`.
std::string nearest_subcommand(const CLI::App& root, const std::string& word);

/// Writes the man page (`--help-man [FILE]`) or a shell completion (`--help-completion bash|zsh
/// [FILE]`) generated from `root`'s definitions to FILE or stdout (docgen.cpp); args start at the
/// option. The build runs these hidden options and installs what they write.
int generate_docs(const CLI::App& root, const std::string& version, std::span<const std::string> args);

/// Text for a terminal or a log: control characters (a newline or an escape sequence in a zip
/// member's name, a kernel name, a GPU name; C1 controls too), bytes that are not UTF-8 and the
/// code points that reorder text are written as \xNN, so no input can forge an output line or
/// drive the terminal (common::terminal_text). Every human-readable line built from input goes
/// through this; JSON output goes through json_text.
inline std::string shown(std::string_view text) { return common::terminal_text(text); }

/// Makes every string of `j` (object keys included) valid UTF-8, in place: bytes that are not
/// UTF-8 (a Latin-1 file name, a tar member, a section name) are written as \xNN, as shown()
/// does. nlohmann-json refuses to write anything else (it throws).
inline void make_utf8(nlohmann::json& j) {
  if (j.is_string()) {
    auto& s = j.get_ref<std::string&>();
    if (!common::valid_utf8(s)) s = common::utf8_escaped(s);
  } else if (j.is_array()) {
    for (auto& v : j) make_utf8(v);
  } else if (j.is_object()) {
    bool keys_ok = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      keys_ok = keys_ok && common::valid_utf8(it.key());
      make_utf8(it.value());
    }
    if (!keys_ok) {
      nlohmann::json out = nlohmann::json::object();
      for (auto it = j.begin(); it != j.end(); ++it) out[common::utf8_escaped(it.key())] = std::move(it.value());
      j = std::move(out);
    }
  }
}

/// The text of a JSON document as the verbs print it (indent 2), never throwing on input bytes.
inline std::string json_text(nlohmann::json j, int indent = 2) {
  make_utf8(j);
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace archguard::cli
