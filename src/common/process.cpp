// SPDX-License-Identifier: Apache-2.0
#include "common/process.hpp"

#include "common/fd.hpp"
#include "common/fs.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace archguard::common {

namespace {

// Waits for the child, retrying on EINTR.
void reap(pid_t pid, int& status) {
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

Result<ProcessOutput> run_capture(const std::string& program, const std::vector<std::string>& args,
                                  const RunOptions& options) {
  const std::chrono::milliseconds timeout = options.timeout;
  const std::size_t max_output = options.max_output;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno_error("cannot create a pipe: " + errno_text(errno), errno);
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
  if (options.stderr_to == StderrTo::output) posix_spawn_file_actions_adddup2(&actions, write_end.get(), 2);
  else posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);

  std::vector<std::string> storage;
  storage.reserve(args.size() + 1);
  storage.push_back(program);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);

  pid_t pid = 0;
  // posix_spawnp searches PATH only for a name without '/', as execvp does.
  const int rc = program.find('/') == std::string::npos
                     ? ::posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ)
                     : ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return errno_error("cannot run '" + program + "': " + errno_text(rc), rc);
  write_end.reset();

  ProcessOutput out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[65536];
  std::string failure;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      failure = "'" + program + "' did not finish within " + std::to_string(timeout.count()) + " ms and was killed";
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (n < 0) {
      if (errno == EINTR) continue;
      failure = "poll on the output of '" + program + "' failed: " + errno_text(errno);
      break;
    }
    if (n == 0) continue;
    const ssize_t got = ::read(read_end.get(), buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      failure = "reading the output of '" + program + "' failed: " + errno_text(errno);
      break;
    }
    if (got == 0) break;  // EOF: the child closed its end
    out.output.append(buf, static_cast<std::size_t>(got));
    if (out.output.size() > max_output) {
      failure = "'" + program + "' wrote more than " + std::to_string(max_output) + " bytes and was killed";
      break;
    }
  }
  int status = 0;
  if (!failure.empty()) ::kill(pid, SIGKILL);
  reap(pid, status);
  if (!failure.empty()) return make_error(ErrorKind::process, failure);
  if (WIFEXITED(status)) {
    out.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
  }
  return out;
}

}  // namespace archguard::common
