// SPDX-License-Identifier: Apache-2.0
// The recorder installed in-process (archguard/run.hpp): the same recorder the injection library
// starts, for a test harness or an application that wants the report of its own run.
#include <archguard/run.hpp>

#include "run/recorder.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace archguard::run {
namespace {
std::string g_dir;
}

#if ARCHGUARD_HAVE_CUPTI
Status start_recording(const RecordOptions& options) {
  std::string dir = options.dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != 0 ? tmp : "/tmp") + "/archguard-run-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back(0);
    if (::mkdtemp(buf.data()) == nullptr)
      return Error{ErrorKind::io, pattern + ": cannot create the recording directory"};
    dir = buf.data();
  }
  detail::RecorderConfig c;
  c.dir = dir.c_str();
  c.cupti = options.cupti.empty() ? nullptr : options.cupti.c_str();
  c.predict = options.predict;
  c.max_copy_bytes = options.max_copy_bytes;
  c.origin = "api";
  char why[512] = {};
  g_dir = dir;
  if (!detail::start(c, why, sizeof why)) return Error{ErrorKind::unsupported, why};
  return Ok{};
}
void stop_recording() { detail::stop(); }
#else
Status start_recording(const RecordOptions&) {
  return Error{ErrorKind::unsupported, "this build of archguard has no recorder (built without CUPTI's headers)"};
}
void stop_recording() {}
#endif

std::string recording_dir() { return g_dir; }

Result<Recording> current_recording() {
  if (g_dir.empty()) return Error{ErrorKind::usage, "no recording was started in this process"};
  return read_recording(g_dir);
}

}  // namespace archguard::run
