// SPDX-License-Identifier: Apache-2.0
// archguard: main() only parses arguments, dispatches to a verb and returns its exit code.
#include "cli.hpp"

#include <unistd.h>

#include <iostream>

namespace archguard::cli {

std::vector<VerbSetup>& verb_registry() {
  static std::vector<VerbSetup> verbs;
  return verbs;
}

bool stdout_is_tty() { return ::isatty(STDOUT_FILENO) == 1; }

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
