// SPDX-License-Identifier: Apache-2.0
// Reading the recorder's event files (docs/run.md, "Event files"): one JSON object per line.
// A line that does not parse, or an event of an unknown kind, becomes a problem naming the file
// and line; nothing is dropped silently.
#include <archguard/run.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace archguard::run {
namespace {

using nlohmann::json;

std::string s_of(const json& j, const char* k) {
  auto it = j.find(k);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
std::int64_t i_of(const json& j, const char* k, std::int64_t fallback = 0) {
  auto it = j.find(k);
  return it != j.end() && it->is_number() ? it->get<std::int64_t>() : fallback;
}
std::uint64_t u_of(const json& j, const char* k) {
  auto it = j.find(k);
  return it != j.end() && it->is_number_unsigned()  ? it->get<std::uint64_t>()
         : it != j.end() && it->is_number_integer() ? static_cast<std::uint64_t>(std::max<std::int64_t>(0, it->get<std::int64_t>()))
                                                    : 0;
}
double d_of(const json& j, const char* k) {
  auto it = j.find(k);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

/// A place written as <key>, <key>_file, <key>_offset.
Origin place(const json& j, const std::string& key) {
  Origin o;
  o.address = s_of(j, key.c_str());
  const std::string file = s_of(j, (key + "_file").c_str());
  if (!file.empty()) {
    o.kind = "mapped";
    o.path = file;
    o.offset = u_of(j, (key + "_offset").c_str());
  }
  return o;
}

Origin image_origin(const json& j) {
  Origin o = place(j, "image");
  o.image_kind = s_of(j, "image_kind");
  o.size = u_of(j, "image_size");
  const std::string copy = s_of(j, "copy");
  if (!copy.empty()) {
    if (copy.rfind("skipped", 0) == 0) o.copy_note = copy;
    else o.copy = copy;
  }
  if (!s_of(j, "path").empty()) {
    o.kind = "file";
    o.path = s_of(j, "realpath").empty() ? s_of(j, "path") : s_of(j, "realpath");
  } else if (o.kind.empty() && !o.address.empty()) {
    o.kind = "memory";
  }
  return o;
}

void read_process(const json& j, ProcessRecording& p) {
  p.pid = static_cast<long>(i_of(j, "pid"));
  p.ppid = static_cast<long>(i_of(j, "ppid"));
  p.origin = s_of(j, "origin");
  p.exe = s_of(j, "exe");
  p.argv.clear();
  if (auto a = j.find("argv"); a != j.end() && a->is_array())
    for (const auto& v : *a)
      if (v.is_string()) p.argv.push_back(v.get<std::string>());
  if (auto e = j.find("env"); e != j.end() && e->is_object())
    for (auto it = e->begin(); it != e->end(); ++it)
      if (it.value().is_string()) p.env[it.key()] = it.value().get<std::string>();
  p.driver_version_line = s_of(j, "driver_version_line");
}

void read_recorder(const json& j, ProcessRecording& p) {
  p.recorder_status = s_of(j, "status");
  p.recorder_detail = s_of(j, "detail");
  p.cupti = s_of(j, "cupti");
  p.predict = i_of(j, "predict") != 0;
}

void read_counts(const json& j, ProcessRecording& p) {
  p.complete = true;
  p.launches = u_of(j, "launches");
  p.failed_launches = u_of(j, "failed_launches");
  p.module_loads = u_of(j, "module_loads");
  p.modules_loaded = u_of(j, "modules");
  p.lines_dropped = u_of(j, "lines_dropped");
  p.launched_overflow = u_of(j, "launched_overflow");
}

DeviceSeen device_event(const json& j) {
  DeviceSeen d;
  d.ordinal = static_cast<int>(i_of(j, "ordinal", -1));
  d.cc = Version2{static_cast<unsigned>(i_of(j, "cc_major")), static_cast<unsigned>(i_of(j, "cc_minor"))};
  d.integrated = i_of(j, "integrated") != 0;
  d.name = s_of(j, "name");
  d.driver_cuda = static_cast<int>(i_of(j, "driver_cuda"));
  return d;
}

LoadEvent load_event(const json& j) {
  LoadEvent l;
  l.api = s_of(j, "api");
  l.result = static_cast<int>(i_of(j, "result"));
  l.ms = d_of(j, "ms");
  l.inside = s_of(j, "inside");
  l.handle = s_of(j, "handle");
  l.modules = static_cast<unsigned>(u_of(j, "modules"));
  l.origin = image_origin(j);
  l.device = static_cast<int>(i_of(j, "device", -1));
  return l;
}

FailEvent fail_event(const json& j) {
  FailEvent f;
  f.api = s_of(j, "api");
  f.runtime = s_of(j, "domain") == "runtime";
  f.result = static_cast<int>(i_of(j, "result"));
  f.key = u_of(j, "key");
  f.inside = s_of(j, "inside");
  f.kernel = s_of(j, "kernel");
  f.owner = s_of(j, "owner");
  f.function = s_of(j, "function");
  f.module = s_of(j, "module");
  f.func = place(j, "func");
  f.device = static_cast<int>(i_of(j, "device", -1));
  return f;
}

ModuleEvent module_event(const json& j) {
  ModuleEvent m;
  m.id = static_cast<unsigned>(u_of(j, "id"));
  m.size = u_of(j, "size");
  if (j.contains("elf_flags")) m.elf_flags = static_cast<std::uint32_t>(u_of(j, "elf_flags"));
  if (j.contains("elf_abi")) m.elf_abi = static_cast<unsigned>(u_of(j, "elf_abi"));
  m.during = s_of(j, "during");
  m.func = place(j, "func");
  m.function = s_of(j, "function");
  const std::string copy = s_of(j, "copy");
  if (!copy.empty() && copy.rfind("skipped", 0) != 0) m.copy = copy;
  return m;
}

LazyEvent lazy_event(const json& j) {
  LazyEvent l;
  l.api = s_of(j, "api");
  l.ms = d_of(j, "ms");
  l.modules = static_cast<unsigned>(u_of(j, "modules"));
  l.func = place(j, "func");
  l.kernel = s_of(j, "kernel");
  l.device = static_cast<int>(i_of(j, "device", -1));
  return l;
}

LaunchedEvent launched_event(const json& j) {
  LaunchedEvent l;
  l.func = place(j, "func");
  l.kernel = s_of(j, "kernel");
  l.module = s_of(j, "module");
  return l;
}

/// One event into `p`; false when `ev` names no event this reader knows.
bool read_event(const std::string& ev, const json& j, ProcessRecording& p, std::map<std::uint64_t, std::uint64_t>& repeats) {
  if (ev == "process") read_process(j, p);
  else if (ev == "recorder") read_recorder(j, p);
  else if (ev == "device") p.devices.push_back(device_event(j));
  else if (ev == "load") p.loads.push_back(load_event(j));
  else if (ev == "fail") p.failures.push_back(fail_event(j));
  else if (ev == "module") p.modules.push_back(module_event(j));
  else if (ev == "lazy") p.lazy.push_back(lazy_event(j));
  else if (ev == "launched") p.launched.push_back(launched_event(j));
  else if (ev == "repeat") repeats[u_of(j, "key")] = u_of(j, "count");
  else if (ev == "counts") read_counts(j, p);
  else return false;
  return true;
}

}  // namespace

ProcessRecording parse_events(std::string_view text, const std::string& name) {
  ProcessRecording p;
  p.file = name;
  std::size_t line_no = 0;
  std::map<std::uint64_t, std::uint64_t> repeats;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (line.empty()) continue;
    json j = json::parse(line.begin(), line.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      // The last line of a process killed while writing may be cut: say so, go on.
      p.problems.push_back(name + ": line " + std::to_string(line_no) + ": not a complete event (" +
                           std::to_string(line.size()) + " bytes)");
      continue;
    }
    const std::string ev = s_of(j, "ev");
    if (!read_event(ev, j, p, repeats))
      p.problems.push_back(name + ": line " + std::to_string(line_no) + ": unknown event '" + ev + "'");
  }
  for (FailEvent& f : p.failures)
    if (auto it = repeats.find(f.key); it != repeats.end()) f.count = it->second;
  return p;
}

Result<Recording> read_recording(const std::string& dir) {
  namespace fs = std::filesystem;
  Recording rec;
  rec.dir = dir;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Error{ErrorKind::io, dir + ": cannot read the recording: " + ec.message()};
  std::vector<fs::path> files;
  for (const auto& e : it) {
    const std::string n = e.path().filename().string();
    if (n.size() > 8 && n[0] == 'p' && n.ends_with(".events")) files.push_back(e.path());
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      ProcessRecording unreadable;
      unreadable.file = f.string();
      unreadable.problems.push_back(f.string() + ": cannot be read");
      rec.processes.push_back(std::move(unreadable));
      continue;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    rec.processes.push_back(parse_events(ss.str(), f.string()));
  }
  std::sort(rec.processes.begin(), rec.processes.end(),
            [](const ProcessRecording& a, const ProcessRecording& b) { return a.pid < b.pid; });
  return rec;
}

}  // namespace archguard::run
