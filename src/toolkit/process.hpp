// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runs a program without a shell and captures what it writes (stdout and stderr together).
#include <archguard/result.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace archguard::toolkit_detail {

struct ProcessOutput {
  int exit_code = -1;      ///< exit status, or -1 when killed by a signal
  int signal = 0;          ///< the signal that ended it, 0 when it exited
  std::string output;      ///< stdout and stderr interleaved
};

/// Spawns `program` (a path) with `args` (argv[1]...), stdin from /dev/null, and waits for it.
/// Fails when it cannot be started, when it runs past `timeout` (it is killed), or when it
/// writes more than `max_output` bytes.
Result<ProcessOutput> run_capture(const std::string& program, const std::vector<std::string>& args,
                                  std::chrono::milliseconds timeout, std::size_t max_output = 32u << 20);

}  // namespace archguard::toolkit_detail
