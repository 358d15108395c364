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

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace archguard::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitProblem = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNoDriver = 3;

/// Shared state of one invocation: verbs store their exit code here.
struct Context {
  int exit_code = kExitOk;
};

using VerbSetup = void (*)(CLI::App& root, Context& ctx);

std::vector<VerbSetup>& verb_registry();

struct VerbRegistrar {
  explicit VerbRegistrar(VerbSetup setup) { verb_registry().push_back(setup); }
};

#define ARCHGUARD_CONCAT_INNER(a, b) a##b
#define ARCHGUARD_CONCAT(a, b) ARCHGUARD_CONCAT_INNER(a, b)
/// Registers a verb's setup function; use once per verb file at namespace scope.
#define ARCHGUARD_VERB(setup) \
  static const ::archguard::cli::VerbRegistrar ARCHGUARD_CONCAT(archguard_verb_, __LINE__){setup}

/// True when stdout is a terminal (tables get colour/width there).
bool stdout_is_tty();

/// Text for a terminal or a log: control characters (a newline or an escape sequence in a zip
/// member's name, a kernel name, a GPU name) are written as \xNN, so no input can forge an
/// output line or drive the terminal. Every human-readable line built from input goes through
/// this; JSON output escapes by itself.
inline std::string shown(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char digits[] = "0123456789abcdef";
      out += "\\x";
      out += digits[u >> 4];
      out += digits[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}


}  // namespace archguard::cli
