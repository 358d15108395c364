// SPDX-License-Identifier: Apache-2.0
// archguard run [--json FILE] [--predict] [--stop-at-first] [--keep DIR] [--cupti LIB] -- CMD...:
// runs CMD unchanged with the recorder injected (CUDA_INJECTION64_PATH), then explains every
// failed launch and load (archguard/run.hpp). The exit status is CMD's own (128 + n when a
// signal ended it); 2 when archguard could not start it. The report goes to stderr, never to
// stdout, which stays the command's.
#include "cli.hpp"

#include <archguard/run.hpp>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using namespace archguard;
using namespace archguard::run;
namespace fs = std::filesystem;

struct RunArgs {
  std::vector<std::string> command;
  std::string json;
  std::string keep;
  std::string cupti;
  std::string inject;
  bool predict = false;
  bool stop_at_first = false;
  bool quiet = false;
  bool watch_launches = false;
};

std::string self_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

/// The injection library: --inject, $ARCHGUARD_INJECT, then beside the tool (build tree: ../lib;
/// install: ../lib, ../lib64).
std::string find_inject(const RunArgs& a) {
  if (!a.inject.empty()) return a.inject;
  if (const char* e = std::getenv("ARCHGUARD_INJECT"); e != nullptr && *e != 0) return e;
  const std::string dir = self_dir();
  for (const char* rel : {"/../lib/libarchguard_inject.so", "/../lib64/libarchguard_inject.so",
                          "/../" ARCHGUARD_LIBDIR "/libarchguard_inject.so", "/libarchguard_inject.so"}) {
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(dir + rel, ec);
    if (!ec && fs::is_regular_file(p, ec)) return p.string();
  }
  return {};
}

/// CUPTI for the recorder to load: --cupti, $ARCHGUARD_CUPTI, the toolkit's, the wheel's; "" lets
/// the recorder try the loader's search (LD_LIBRARY_PATH, ld.so.cache).
std::string find_cupti(const RunArgs& a) {
  if (!a.cupti.empty()) return a.cupti;
  if (const char* e = std::getenv("ARCHGUARD_CUPTI"); e != nullptr && *e != 0) return e;
  std::vector<std::string> roots;
  for (const char* v : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* e = std::getenv(v); e != nullptr && *e != 0) roots.push_back(e);
  roots.push_back("/usr/local/cuda");
  for (const auto& r : roots)
    for (const char* sub : {"/lib64/libcupti.so.13", "/lib64/libcupti.so.12", "/extras/CUPTI/lib64/libcupti.so.13",
                            "/extras/CUPTI/lib64/libcupti.so.12", "/targets/x86_64-linux/lib/libcupti.so.13"}) {
      std::error_code ec;
      if (fs::exists(r + sub, ec)) return r + sub;
    }
  return {};
}

std::string quoted(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?") == std::string::npos;
    out += plain ? cli::shown(a) : "'" + cli::shown(a) + "'";
  }
  return out;
}

/// Whether some event file of the recording already holds an architecture failure.
bool has_architecture_failure(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() < 8 || n[0] != 'p' || !n.ends_with(".events")) continue;
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) {
      const bool fail = line.find("\"ev\":\"fail\"") != std::string::npos;
      const bool load = line.find("\"ev\":\"load\"") != std::string::npos && line.find("\"result\":0,") == std::string::npos;
      if (!fail && !load) continue;
      for (int code : {209, 222, 223, 218, 500, 98})
        if (line.find("\"result\":" + std::to_string(code) + ",") != std::string::npos) return true;
    }
  }
  return false;
}

nlohmann::json origin_json(const Origin& o) {
  nlohmann::json j{{"kind", o.kind}};
  if (!o.path.empty()) j["path"] = o.path;
  if (o.kind == "mapped") j["offset"] = o.offset;
  if (o.size != 0) j["size"] = o.size;
  if (!o.image_kind.empty()) j["image_kind"] = o.image_kind;
  if (!o.copy.empty()) j["copy"] = o.copy;
  if (!o.copy_note.empty()) j["copy_note"] = o.copy_note;
  if (!o.address.empty()) j["address"] = o.address;
  return j;
}

nlohmann::json explained_json(const Explained& x) {
  nlohmann::json j{{"api", x.api}, {"error", x.error}, {"error_name", x.error_name}, {"count", x.count}, {"kernel", x.kernel}, {"kernel_demangled", x.kernel_demangled}, {"device", x.device}, {"file", x.file}, {"translation_unit", x.translation_unit}, {"images", x.images}, {"architecture", x.architecture}, {"cause", x.cause}, {"predicted", x.predicted}};
  j["cc"] = x.cc ? nlohmann::json(cli::version_text(*x.cc)) : nlohmann::json();
  j["fatbin"] = x.fatbin ? nlohmann::json(*x.fatbin) : nlohmann::json();
  j["origin"] = origin_json(x.origin);
  j["fixes"] = nlohmann::json::array();
  for (const auto& f : x.fixes) j["fixes"].push_back({{"kind", doctor::to_string(f.kind)}, {"text", f.text}, {"details", f.details}});
  return j;
}

nlohmann::json report_json(const Report& r, const RunArgs& a, int status, const std::vector<std::string>& problems) {
  nlohmann::json j;
  j["schema"] = "archguard.run/1";
  j["command"] = a.command;
  j["exit_status"] = status;
  j["recorded"] = r.recorded;
  j["predict"] = a.predict;
  j["architecture_failures"] = r.architecture_failures;
  j["other_failures"] = r.other_failures;
  j["disagreements"] = r.disagreements;
  j["problems"] = problems;
  j["processes"] = nlohmann::json::array();
  for (const ProcessReport& p : r.processes) {
    nlohmann::json pj{{"pid", p.pid}, {"ppid", p.ppid}, {"argv", p.argv}, {"complete", p.complete}, {"recorder", {{"status", p.recorder_status}, {"detail", p.recorder_detail}}}, {"environment", p.env}, {"counts", {{"launches", p.launches}, {"failed_launches", p.failed_launches}, {"module_loads", p.module_loads}, {"modules", p.modules}}}, {"problems", p.problems}};
    pj["devices"] = nlohmann::json::array();
    for (const auto& d : p.devices)
      pj["devices"].push_back({{"ordinal", d.ordinal}, {"name", d.name}, {"cc", cli::version_text(d.cc)}, {"integrated", d.integrated}});
    pj["loads"] = nlohmann::json::array();
    for (const auto& l : p.loads) pj["loads"].push_back(explained_json(l));
    pj["failures"] = nlohmann::json::array();
    for (const auto& f : p.failures) pj["failures"].push_back(explained_json(f));
    pj["jit"] = nlohmann::json::array();
    for (const auto& jt : p.jit) pj["jit"].push_back({{"what", jt.what}, {"file", jt.file}, {"image", jt.image}, {"ms", jt.ms}});
    pj["disagreements"] = nlohmann::json::array();
    for (const auto& d : p.disagreements)
      pj["disagreements"].push_back({{"what", d.what}, {"file", d.file}, {"predicted", d.predicted}, {"observed", d.observed}, {"note", d.note}});
    j["processes"].push_back(pj);
  }
  return j;
}

void render(std::ostream& out, const Report& r, const RunArgs& a, int status, const std::vector<std::string>& problems) {
  using cli::shown;
  out << "archguard run: " << quoted(a.command) << " exited with " << status << "\n";
  for (const auto& p : problems) out << "archguard run: " << shown(p) << "\n";
  std::size_t used = 0;
  for (const auto& p : r.processes) used += p.recorder_status == "ok" ? 1 : 0;
  if (!r.recorded && problems.empty()) out << "archguard run: nothing was recorded\n";
  out << "archguard run: " << used << " process(es) used CUDA; ";
  if (r.architecture_failures == 0) out << "no launch or load failed for an architecture reason";
  else out << r.architecture_failures << " failure(s) for an architecture reason";
  if (r.other_failures > 0) out << ", " << r.other_failures << " other failure(s)";
  if (a.predict) out << "; " << r.disagreements << " disagreement(s) with the static verdicts";
  out << "\n";
  for (const ProcessReport& p : r.processes) {
    const bool interesting = !p.failures.empty() || !p.disagreements.empty() || p.recorder_status != "ok" || !a.quiet;
    if (!interesting) continue;
    out << "\nprocess " << p.pid << ": " << quoted(p.argv) << "\n";
    if (p.recorder_status != "ok") out << "  recorder: " << shown(p.recorder_status.empty() ? "no status" : p.recorder_status)
                                       << (p.recorder_detail.empty() ? "" : ": " + shown(p.recorder_detail)) << "\n";
    for (const auto& d : p.devices)
      out << "  device " << d.ordinal << ": " << shown(d.name) << ", compute capability " << cli::version_text(d.cc) << "\n";
    out << "  launches: " << (p.launches == 0 && p.failed_launches == 0 ? std::string("not watched (--watch-launches)") : std::to_string(p.launches) + " (" + std::to_string(p.failed_launches) + " failed)") << ", driver loads: " << p.module_loads
        << ", modules loaded: " << p.modules << (p.complete ? "" : " (the process did not exit normally: counts are partial)")
        << "\n";
    for (const Explained& x : p.failures) {
      out << "  " << (x.architecture ? "FAIL " : "error ") << shown(x.api) << ": " << shown(x.error_name) << " (" << x.error << ")";
      if (x.count > 1) out << ", " << x.count << " times";
      out << "\n";
      if (!x.kernel.empty()) out << "    kernel: " << shown(x.kernel_demangled.empty() ? x.kernel : x.kernel_demangled) << "\n";
      if (!x.file.empty()) {
        out << "    file:   " << shown(x.file);
        if (!x.translation_unit.empty() || x.fatbin)
          out << " (" << (x.translation_unit.empty() ? "" : "translation unit " + shown(x.translation_unit))
              << (x.fatbin ? std::string(x.translation_unit.empty() ? "" : ", ") + "fatbin " + std::to_string(*x.fatbin) : "") << ")";
        out << "\n";
      } else if (x.origin.kind == "memory") {
        out << "    image:  from memory at " << x.origin.address << " (" << shown(x.origin.image_kind)
            << (x.origin.size ? ", " + std::to_string(x.origin.size) + " bytes" : "") << "; no file holds it: built at run time, e.g. by NVRTC)\n";
      }
      if (!x.images.empty()) {
        out << "    holds:  ";
        for (std::size_t i = 0; i < x.images.size(); ++i) out << (i ? ", " : "") << x.images[i];
        out << "\n";
      }
      out << "    cause:  " << shown(x.cause) << "\n";
      for (const auto& f : x.fixes) {
        out << "    fix:    " << shown(f.text) << "\n";
        for (const auto& d : f.details) out << "            " << shown(d) << "\n";
      }
    }
    for (const auto& jt : p.jit)
      out << "  jit: " << shown(jt.what) << " (" << shown(jt.image) << "): " << jt.ms << " ms\n";
    for (const auto& d : p.disagreements)
      out << "  DISAGREE " << shown(d.what) << ": check says " << shown(d.predicted) << ", the driver: " << shown(d.observed)
          << (d.note.empty() ? "" : " (" + shown(d.note) + ")") << "\n";
    for (const auto& pr : p.problems) out << "  note: " << shown(pr) << "\n";
  }
}

int run_command(const RunArgs& a, const std::string& dir, const std::string& inject, const std::string& cupti) {
  std::vector<std::string> env_strings;
  const char* prev = std::getenv("CUDA_INJECTION64_PATH");
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (v.starts_with("CUDA_INJECTION64_PATH=") || v.starts_with("ARCHGUARD_RUN_DIR=") ||
        v.starts_with("ARCHGUARD_RUN_PREDICT=") || (a.watch_launches && v.starts_with("ARCHGUARD_RUN_LAUNCHES=")) || v.starts_with("ARCHGUARD_RUN_CHAIN=") || v.starts_with("ARCHGUARD_CUPTI="))
      continue;
    env_strings.emplace_back(v);
  }
  env_strings.push_back("CUDA_INJECTION64_PATH=" + inject);
  env_strings.push_back("ARCHGUARD_RUN_DIR=" + dir);
  if (!cupti.empty()) env_strings.push_back("ARCHGUARD_CUPTI=" + cupti);
  if (a.predict) env_strings.push_back("ARCHGUARD_RUN_PREDICT=1");
  if (a.watch_launches) env_strings.push_back("ARCHGUARD_RUN_LAUNCHES=all");
  if (prev != nullptr && *prev != 0 && inject != prev) env_strings.push_back(std::string("ARCHGUARD_RUN_CHAIN=") + prev);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = a.command;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  // Like env(1) and time(1): the terminal's interrupt goes to the command; archguard waits for
  // it and still writes the report.
  struct sigaction ignore {
  }, old_int{}, old_quit{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &old_int);
  ::sigaction(SIGQUIT, &ignore, &old_quit);
  const pid_t child = ::fork();
  if (child < 0) {
    std::cerr << "archguard run: error: fork failed: " << std::strerror(errno) << "\n";
    return -1;
  }
  if (child == 0) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    const int err = errno;
    std::cerr << "archguard run: error: cannot run '" << cli::shown(a.command[0]) << "': " << std::strerror(err) << "\n";
    ::_exit(err == ENOENT ? 127 : 126);
  }
  int status = 0;
  bool stopped = false;
  for (;;) {
    const pid_t w = ::waitpid(child, &status, a.stop_at_first ? WNOHANG : 0);
    if (w == child) break;
    if (w < 0 && errno != EINTR) break;
    if (a.stop_at_first && !stopped && has_architecture_failure(dir)) {
      stopped = true;
      ::kill(child, SIGTERM);
      for (int i = 0; i < 100 && ::waitpid(child, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (::waitpid(child, &status, WNOHANG) == 0) ::kill(child, SIGKILL);
    }
    if (a.stop_at_first) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void run_verb(const RunArgs& a, cli::Context& ctx) {
  if (a.command.empty()) {
    std::cerr << "archguard run: error: no command given; usage: archguard run [options] -- <command> [args...]\n";
    ctx.exit_code = cli::kExitUsage;
    return;
  }
  std::vector<std::string> problems;
  const std::string inject = find_inject(a);
  if (inject.empty())
    problems.push_back("the injection library libarchguard_inject.so was not found beside the tool (name it with --inject or ARCHGUARD_INJECT); the command runs unwatched");
  const std::string cupti = find_cupti(a);
  std::string dir = a.keep;
  bool temporary = false;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != 0 ? tmp : "/tmp") + "/archguard-run-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back(0);
    if (::mkdtemp(buf.data()) == nullptr) {
      std::cerr << "archguard run: error: " << pattern << ": cannot create the recording directory: " << std::strerror(errno) << "\n";
      ctx.exit_code = cli::kExitUsage;
      return;
    }
    dir = buf.data();
    temporary = true;
  } else {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) {
      std::cerr << "archguard run: error: --keep " << cli::shown(dir) << ": not a directory\n";
      ctx.exit_code = cli::kExitUsage;
      return;
    }
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if ((n[0] == 'p' && n.ends_with(".events")) || (n[0] == 'm' && n.ends_with(".bin"))) fs::remove(e.path(), ec);
    }
    dir = fs::absolute(dir).string();
  }
  const int status = run_command(a, dir, inject.empty() ? std::string("/nonexistent/libarchguard_inject.so") : inject, cupti);
  if (status < 0) {
    ctx.exit_code = cli::kExitUsage;
    return;
  }
  Recording rec;
  if (auto r = read_recording(dir); r) rec = std::move(*r);
  else problems.push_back(r.error().message);
  AnalyzeOptions opts;
  opts.predict = a.predict;
  opts.dir = dir;
  const Report report = analyze(rec, opts);
  for (const auto& p : report.problems) problems.push_back(p);
  if (!a.quiet || report.architecture_failures > 0 || report.disagreements > 0 || !report.recorded) render(std::cerr, report, a, status, problems);
  if (!a.json.empty()) {
    const std::string text = cli::json_text(report_json(report, a, status, problems));
    if (a.json == "-") {
      std::cerr << text << "\n";
    } else {
      std::ofstream out(a.json, std::ios::trunc);
      out << text << "\n";
      if (!out) std::cerr << "archguard run: error: cannot write " << cli::shown(a.json) << "\n";
    }
  }
  if (temporary) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  ctx.exit_code = status;
}

void setup(CLI::App& root, cli::Context& ctx) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = root.add_subcommand(
      "run", "Run a command, watch its CUDA calls (CUPTI) and explain each failed launch or load: archguard run -- CMD...");
  cmd->add_option("command", args->command, "The command and its arguments (after --)")->expected(-1);
  cmd->add_option("--json", args->json, "Also write the report as JSON to FILE (- for stderr); schema in docs/run.md");
  cmd->add_flag("--predict", args->predict,
                "Also compare what check predicts for every loaded module and launched kernel with what the driver did");
  cmd->add_flag("--stop-at-first", args->stop_at_first,
                "Stop the command (SIGTERM, then SIGKILL after 5 s) at the first failure for an architecture reason");
  cmd->add_option("--keep", args->keep, "Keep the recording (event files, image copies) in DIR");
  cmd->add_option("--cupti", args->cupti, "The libcupti to use (default: the CUDA toolkit's, then the loader's search)");
  cmd->add_option("--inject", args->inject, "The injection library (default: libarchguard_inject.so beside the tool)");
  cmd->add_flag("--watch-launches", args->watch_launches,
                "Also watch every launch call (counts, the runtime's host function; costs about 1 us per launch)");
  cmd->add_flag("-q,--quiet", args->quiet, "Print the report only when something failed or nothing was recorded");
  cmd->positionals_at_end(false);
  cmd->callback([args, &ctx]() { run_verb(*args, ctx); });
}

ARCHGUARD_VERB(setup);

}  // namespace
