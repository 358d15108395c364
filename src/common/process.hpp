// SPDX-License-Identifier: Apache-2.0
#pragma once
// The library's one way to run a program: posix_spawn, no shell, stdin from /dev/null, output
// captured, a deadline after which the child is killed. Internal to the library (src/common).
#include <archguard/result.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace archguard::common {

struct ProcessOutput {
  int exit_code = -1;  ///< exit status, or -1 when killed by a signal
  int signal = 0;      ///< the signal that ended it, 0 when it exited
  std::string output;  ///< what it wrote (stdout, and stderr unless discarded)
};

/// Where the child's standard error goes.
enum class StderrTo { output,
                      null };

struct RunOptions {
  std::chrono::milliseconds timeout{60000};  ///< the child is killed (SIGKILL) after this
  std::size_t max_output = 32u << 20;        ///< the child is killed when it writes more
  StderrTo stderr_to = StderrTo::output;     ///< interleaved with stdout, or discarded
};

/// Spawns `program` with `args` (argv[1]...) and waits for it. A `program` without a '/' is
/// looked up on PATH, as a shell would; nothing else of a shell applies (no quoting, no
/// expansion). Fails when it cannot be started, when it runs past the timeout or writes more
/// than max_output (it is killed in both cases); a non-zero exit is not a failure here.
Result<ProcessOutput> run_capture(const std::string& program, const std::vector<std::string>& args,
                                  const RunOptions& options);

/// The same with a timeout and the other options at their defaults.
inline Result<ProcessOutput> run_capture(const std::string& program, const std::vector<std::string>& args,
                                         std::chrono::milliseconds timeout) {
  RunOptions o;
  o.timeout = timeout;
  return run_capture(program, args, o);
}

}  // namespace archguard::common
