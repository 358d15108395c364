// SPDX-License-Identifier: Apache-2.0
// archguard: main() only parses arguments, dispatches to a verb and returns its exit code.
#include "cli.hpp"

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

namespace {
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

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


}  // namespace archguard::cli

int main(int argc, char** argv) {
  using namespace archguard::cli;
  CLI::App app{"archguard: find, predict and fix 'no kernel image is available for execution on the device'",
               "archguard"};
  app.set_version_flag("--version", std::string("archguard ") + ARCHGUARD_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  Context ctx;
  for (VerbSetup setup : verb_registry()) setup(app, ctx);
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
    app.exit(e);
    return kExitUsage;
  }
  return ctx.exit_code;
}
