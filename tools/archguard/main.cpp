// SPDX-License-Identifier: Apache-2.0
// archguard: main() only parses arguments, dispatches to a verb and returns its exit code.
#include "cli.hpp"

#include "build_info.hpp"
#include "common/nearest.hpp"

#include <archguard/arch.hpp>
#include <archguard/results_cache.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace archguard::cli {

std::vector<VerbSetup>& verb_registry() {
  static std::vector<VerbSetup> verbs;
  return verbs;
}

bool stdout_is_tty() { return ::isatty(STDOUT_FILENO) == 1; }
bool stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

bool use_colour() {
  const char* no_colour = std::getenv("NO_COLOR");
  if (no_colour != nullptr && *no_colour != '\0') return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::strcmp(term, "dumb") == 0) return false;
  return stdout_is_tty();
}

std::string producer_text() { return std::string("archguard ") + ARCHGUARD_VERSION + " commit " + ARCHGUARD_GIT_COMMIT; }

namespace {
std::unique_ptr<archguard::ResultsCache> g_results;
std::string g_results_warning;
bool g_results_opened = false;
}  // namespace

FactsStore* results_cache(bool no_cache) {
  if (no_cache) return nullptr;
  if (!g_results_opened) {
    g_results_opened = true;
    // No home directory at all (a bare service environment): no cache, and nothing to say.
    const bool homeless = std::getenv("ARCHGUARD_CACHE_DIR") == nullptr && std::getenv("XDG_CACHE_HOME") == nullptr &&
                          std::getenv("HOME") == nullptr;
    if (!homeless) g_results = archguard::ResultsCache::open(producer_text(), g_results_warning);
  }
  return g_results.get();
}

void report_results_cache() {
  if (!g_results_warning.empty()) std::cerr << "archguard: warning: " << shown(g_results_warning) << "\n";
  if (!g_results) return;
  for (const auto& w : g_results->warnings()) std::cerr << "archguard: warning: results cache: " << shown(w) << "\n";
  if (const char* stats = std::getenv("ARCHGUARD_RESULTS_CACHE_STATS"); stats != nullptr && std::strcmp(stats, "1") == 0) {
    const auto c = g_results->counters();
    std::cerr << "archguard: results cache " << shown(g_results->dir()) << ": " << c.hits << " hits, " << c.misses << " misses, "
              << c.stores << " stored, " << c.scans_known << " searches skipped, " << c.files_known << " files known, "
              << c.judgements_known << " judgements known, " << c.trees_known << " trees known, " << c.answers_known
              << " answers known\n";
  }
}

using common::edit_distance;

std::string nearest_subcommand(const CLI::App& root, const std::string& word) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const CLI::App* sub : root.get_subcommands({})) {
    const std::string& name = sub->get_name();
    const std::size_t d = edit_distance(word, name);
    if (d < best_d || (d == best_d && !best.empty() && name < best)) {
      best_d = d;
      best = name;
    }
  }
  return best;
}

namespace {
// "--versoin" -> "--version": the nearest of `names` within the distance nearest_subcommand allows.
std::string nearest_word(const std::vector<std::string>& names, const std::string& word) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const std::string& name : names) {
    const std::size_t d = edit_distance(word, name);
    if (d < best_d) {
      best_d = d;
      best = name;
    }
  }
  return best;
}
}  // namespace

std::string command_words(const std::vector<std::string>& path) {
  std::string out = "archguard";
  for (const std::string& w : path) out += " " + w;
  return out;
}

/// Says what was wrong with a command line CLI11 refused, when it is an unknown option or
/// sub-command, with the nearest name; false when it is something else (CLI11's message then).
bool explain_parse_error(const CLI::App& root, int argc, const char* const* argv) {
  const CLI::App* cur = &root;
  std::vector<std::string> path;
  for (int i = 1; i < argc; ++i) {
    const std::string w = argv[i];
    if (w == "--") return false;
    if (w.size() > 1 && w[0] == '-') {
      // --name=value, -xVALUE: the name alone
      const std::string name = w[1] == '-' ? w.substr(0, w.find('=')) : w.substr(0, 2);
      const CLI::Option* found = nullptr;
      std::vector<std::string> names;
      for (const CLI::Option* opt : cur->get_options({})) {
        if (opt->get_positional()) continue;
        if (opt->check_name(name)) found = opt;
        for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
      }
      if (found == nullptr) {
        std::cerr << "archguard: error: unknown option '" << shown(name) << "' for '" << command_words(path) << "'";
        if (const std::string near = nearest_word(names, name); !near.empty())
          std::cerr << "; did you mean '" << near << "'?";
        std::cerr << "\nRun '" << command_words(path) << " --help' for more information.\n";
        return true;
      }
      const bool valued = found->get_type_size_max() > 0 && found->get_expected_max() > 0;
      if (valued && w[1] == '-' && w.find('=') == std::string::npos) ++i;  // its value
      continue;
    }
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : cur->get_subcommands({}))
      if (sub->check_name(w)) next = sub;
    if (next != nullptr) {
      cur = next;
      path.push_back(next->get_name());
      continue;
    }
    const bool takes_positionals = !cur->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
    if (!cur->get_subcommands({}).empty() && !takes_positionals) {
      std::cerr << "archguard: error: unknown command '" << shown(w) << "' for '" << command_words(path) << "'";
      if (const std::string near = nearest_subcommand(*cur, w); !near.empty())
        std::cerr << "; did you mean '" << command_words(path) << " " << near << "'?";
      std::cerr << "\ncommands:";
      for (const CLI::App* sub : cur->get_subcommands({})) std::cerr << ' ' << sub->get_name();
      std::cerr << "\n";
      return true;
    }
  }
  return false;
}

}  // namespace archguard::cli

int main(int argc, char** argv) {
  using namespace archguard::cli;
  CLI::App app{"archguard: find, predict and fix 'no kernel image is available for execution on the device'",
               "archguard"};
  // The version, the commit it was built from and the newest CUDA release the architecture table
  // knows (what a bug report needs to reproduce a verdict).
  std::string version = std::string("archguard ") + ARCHGUARD_VERSION + "\ncommit " + ARCHGUARD_GIT_COMMIT;
  if (const auto releases = archguard::release_rows(); !releases.empty())
    version += "\narchitecture table: newest release CUDA " + version_text(releases.back().cuda) + " (PTX ISA " +
               version_text(releases.back().ptx_isa) + ")";
  app.set_version_flag("-V,--version", version, "Print the version, the commit and the architecture table's newest release");
  app.require_subcommand(1);
  app.fallthrough(false);
  Context ctx;
  for (VerbSetup setup : verb_registry()) setup(app, ctx);
  CLI::App* help = app.add_subcommand("help", "Show the help of archguard or of a command (archguard help cache stat)");
  std::vector<std::string> help_words;
  help->add_option("command", help_words, "The command, and its sub-command, to describe");
  if (argc >= 2 && (std::strcmp(argv[1], "--help-man") == 0 || std::strcmp(argv[1], "--help-completion") == 0)) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    return generate_docs(app, std::string("archguard ") + ARCHGUARD_VERSION, args);
  }
  // An unknown first word is most often a typo of a verb: say which one was meant instead of
  // CLI11's "A subcommand is required".
  const auto known = [&app](const std::string& w) {
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(w)) return true;
    return false;
  };
  if (argc >= 2 && argv[1][0] != '-' && !known(argv[1])) {
    const std::string word = argv[1];
    std::cerr << "archguard: error: unknown command '" << word << "'";
    if (const std::string near = nearest_subcommand(app, word); !near.empty())
      std::cerr << "; did you mean '" << near << "'?";
    std::cerr << "\ncommands:";
    for (const CLI::App* sub : app.get_subcommands({})) std::cerr << ' ' << sub->get_name();
    std::cerr << "\nRun 'archguard --help' for more information.\n";
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // An unknown option or sub-command gets a did-you-mean instead of CLI11's "A subcommand is
    // required" or "The following arguments were not expected".
    if (!explain_parse_error(app, argc, argv)) app.exit(e);
    return kExitUsage;
  }
  if (help->parsed()) {
    const CLI::App* target = &app;
    std::vector<std::string> path;
    for (const std::string& w : help_words) {
      const CLI::App* next = nullptr;
      for (const CLI::App* sub : target->get_subcommands({}))
        if (sub->check_name(w)) next = sub;
      if (next == nullptr) {
        std::cerr << "archguard: error: no command '" << shown(w) << "' in '" << command_words(path) << "'";
        if (const std::string near = nearest_subcommand(*target, w); !near.empty())
          std::cerr << "; did you mean '" << near << "'?";
        std::cerr << "\n";
        return kExitUsage;
      }
      target = next;
      path.push_back(w);
    }
    // CLI11 names a sub-command alone in its usage line; prefix the words that lead to it.
    if (!path.empty()) path.pop_back();
    // The formatter directly: App::help() of the root would describe the selected 'help' itself.
    const std::string usage = target == &app ? "archguard" : command_words(path) + " " + target->get_name();
    std::cout << target->get_formatter()->make_help(target, usage, CLI::AppFormatMode::Normal);
    return kExitOk;
  }
  report_results_cache();
  return ctx.exit_code;
}
