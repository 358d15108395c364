// SPDX-License-Identifier: Apache-2.0
// Asks an nvcc what it is and what it accepts. The answers are parsed syntactically, not
// checked against the table: a newer nvcc may know architectures the table does not.
#include <archguard/toolkit.hpp>

#include "common/process.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

namespace archguard {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "sm_90a" with the expected prefix -> {90, a}; nullopt for anything else.
std::optional<Arch> arch_from_name(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  std::size_t len = 0;
  unsigned sm = 0;
  while (len < name.size() && is_digit(name[len]) && len < 4) {
    sm = sm * 10 + static_cast<unsigned>(name[len] - '0');
    ++len;
  }
  if (len < 2) return std::nullopt;
  name.remove_prefix(len);
  Arch arch{sm, Suffix::none};
  if (name == "a") {
    arch.suffix = Suffix::a;
  } else if (name == "f") {
    arch.suffix = Suffix::f;
  } else if (!name.empty()) {
    return std::nullopt;
  }
  return arch;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

void sort_unique(std::vector<Arch>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

std::string first_line(std::string_view text) {
  std::string_view line = text.substr(0, text.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200);
  return std::string(trim(line));
}

}  // namespace

bool NvccInfo::supports(Target target) const {
  const std::vector<Arch>& list = target.kind == CodeKind::sass  ? sass
                                  : target.kind == CodeKind::ptx ? ptx
                                                                 : ltoir;
  return std::find(list.begin(), list.end(), target.arch) != list.end();
}

Result<std::string> find_nvcc(std::string_view explicit_path) {
  if (!explicit_path.empty()) {
    std::string path(explicit_path);
    if (!is_executable_file(path)) return make_error(ErrorKind::not_found, "nvcc '" + path + "' does not exist or is not an executable file");
    return path;
  }
  std::vector<std::string> looked;
  if (const char* env = std::getenv("PATH"); env != nullptr) {
    std::string_view rest = env;
    while (true) {
      const std::size_t colon = rest.find(':');
      std::string dir(rest.substr(0, colon));
      if (dir.empty()) dir = ".";
      const std::string candidate = dir + "/nvcc";
      if (is_executable_file(candidate)) return candidate;
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
    looked.emplace_back("PATH");
  }
  const std::string fallback = "/usr/local/cuda/bin/nvcc";
  if (is_executable_file(fallback)) return fallback;
  looked.push_back("/usr/local/cuda/bin");
  std::string where;
  for (const std::string& l : looked) where += (where.empty() ? "" : " and ") + l;
  return make_error(ErrorKind::not_found, "nvcc not found (looked in " + where +
                                              "); install the CUDA toolkit or give the path of nvcc explicitly");
}

Result<Version2> parse_nvcc_version(std::string_view text, std::string* build) {
  const std::size_t at = text.find("release ");
  if (at == std::string_view::npos) {
    return make_error(ErrorKind::process, "nvcc --version: no 'release X.Y' in its output (first line: '" + first_line(text) + "')");
  }
  std::string_view rest = text.substr(at + 8);
  unsigned major = 0, minor = 0;
  std::size_t i = 0;
  while (i < rest.size() && is_digit(rest[i]) && i < 3) major = major * 10 + static_cast<unsigned>(rest[i++] - '0');
  if (i == 0 || i >= rest.size() || rest[i] != '.') return make_error(ErrorKind::process, "nvcc --version: malformed release number");
  ++i;
  const std::size_t minor_start = i;
  while (i < rest.size() && is_digit(rest[i]) && i - minor_start < 3) {
    minor = minor * 10 + static_cast<unsigned>(rest[i++] - '0');
  }
  if (i == minor_start) return make_error(ErrorKind::process, "nvcc --version: malformed release number");
  if (build != nullptr) {
    build->clear();
    const std::size_t v = rest.find(", V");
    if (v != std::string_view::npos) {
      std::string_view b = rest.substr(v + 3);
      std::size_t len = 0;
      while (len < b.size() && (is_digit(b[len]) || b[len] == '.')) ++len;
      *build = std::string(b.substr(0, len));
    }
  }
  return Version2{major, minor};
}

Result<std::vector<Arch>> parse_nvcc_list(std::string_view text, CodeKind kind) {
  const std::string_view prefix = kind == CodeKind::sass ? "sm_" : kind == CodeKind::ptx ? "compute_"
                                                                                         : "lto_";
  std::vector<Arch> out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const std::size_t nl = text.find('\n');
    const std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    std::optional<Arch> arch = arch_from_name(line, prefix);
    if (!arch) {
      return make_error(ErrorKind::process, "nvcc list output line " + std::to_string(line_no) + ": '" + std::string(line) +
                                                "' is not a " + std::string(prefix) + "XY name");
    }
    out.push_back(*arch);
  }
  if (out.empty()) return make_error(ErrorKind::process, "nvcc printed no " + std::string(prefix) + "XY names");
  sort_unique(out);
  return out;
}

Result<std::vector<Target>> parse_nvcc_help_arch_values(std::string_view help) {
  // The section starts at a line beginning with "--gpu-architecture" and ends at the next
  // option, a line beginning with "--".
  std::size_t start = help.starts_with("--gpu-architecture") ? 0 : help.find("\n--gpu-architecture");
  if (start == std::string_view::npos) return make_error(ErrorKind::process, "nvcc --help: no --gpu-architecture section");
  std::string_view section = help.substr(start + 1);
  const std::size_t end = section.find("\n--");
  if (end != std::string_view::npos) section = section.substr(0, end);
  const std::size_t allowed = section.find("Allowed values for this option:");
  if (allowed == std::string_view::npos) {
    return make_error(ErrorKind::process, "nvcc --help: the --gpu-architecture section lists no 'Allowed values'");
  }
  section.remove_prefix(allowed);
  std::vector<Target> out;
  while (true) {
    const std::size_t open = section.find('\'');
    if (open == std::string_view::npos) break;
    const std::size_t close = section.find('\'', open + 1);
    if (close == std::string_view::npos) return make_error(ErrorKind::process, "nvcc --help: unterminated quoted value");
    const std::string_view value = section.substr(open + 1, close - open - 1);
    section.remove_prefix(close + 1);
    if (std::optional<Arch> a = arch_from_name(value, "sm_")) {
      out.push_back({*a, CodeKind::sass});
    } else if (std::optional<Arch> c = arch_from_name(value, "compute_")) {
      out.push_back({*c, CodeKind::ptx});
    } else if (std::optional<Arch> l = arch_from_name(value, "lto_")) {
      out.push_back({*l, CodeKind::ltoir});
    }
    // 'all', 'all-major', 'native' are shorthands, not targets.
  }
  if (out.empty()) return make_error(ErrorKind::process, "nvcc --help: no sm_/compute_ values under --gpu-architecture");
  canonicalize(out);
  return out;
}

Result<NvccInfo> query_nvcc(std::string_view nvcc_path, std::chrono::milliseconds timeout) {
  AG_TRY(std::string path, find_nvcc(nvcc_path));
  auto run = [&](const char* flag) -> Result<std::string> {
    AG_TRY(common::ProcessOutput r, common::run_capture(path, {flag}, timeout));
    if (r.exit_code != 0) {
      return make_error(ErrorKind::process, "'" + path + " " + flag + "' failed (" +
                                                (r.signal != 0 ? "signal " + std::to_string(r.signal)
                                                               : "exit status " + std::to_string(r.exit_code)) +
                                                "): " + first_line(r.output));
    }
    return std::move(r.output);
  };
  NvccInfo info;
  info.path = path;
  AG_TRY(std::string version, run("--version"));
  Result<Version2> release = parse_nvcc_version(version, &info.build);
  if (!release) return rewrap(release.error(), path + ": " + release.message());
  info.release = *release;

  AG_TRY(std::string codes, run("--list-gpu-code"));
  Result<std::vector<Arch>> sass = parse_nvcc_list(codes, CodeKind::sass);
  if (!sass) return rewrap(sass.error(), path + " --list-gpu-code: " + sass.message());
  info.sass = std::move(*sass);

  AG_TRY(std::string arches, run("--list-gpu-arch"));
  Result<std::vector<Arch>> ptx = parse_nvcc_list(arches, CodeKind::ptx);
  if (!ptx) return rewrap(ptx.error(), path + " --list-gpu-arch: " + ptx.message());
  info.ptx = std::move(*ptx);

  // The lists hold the plain targets only; the a/f variants appear in --help.
  AG_TRY(std::string help, run("--help"));
  Result<std::vector<Target>> values = parse_nvcc_help_arch_values(help);
  if (!values) return rewrap(values.error(), path + ": " + values.message());
  for (const Target& t : *values) {
    if (t.kind == CodeKind::ltoir) {
      info.ltoir.push_back(t.arch);
    } else if (t.arch.suffix != Suffix::none) {
      (t.kind == CodeKind::sass ? info.sass : info.ptx).push_back(t.arch);
    }
  }
  sort_unique(info.sass);
  sort_unique(info.ptx);
  sort_unique(info.ltoir);
  return info;
}

}  // namespace archguard
