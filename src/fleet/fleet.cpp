// SPDX-License-Identifier: Apache-2.0
// Fleets from node reports, Slurm and Kubernetes (archguard/fleet.hpp).
#include <archguard/fleet.hpp>

#include "common/text.hpp"
#include "common/version.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <tuple>

namespace archguard::fleet {

using nlohmann::json;

std::size_t Node::gpu_count() const {
  std::size_t n = 0;
  for (const auto& g : gpus) n += g.count;
  return n;
}

namespace {

constexpr std::size_t kMaxDepth = 64;  // JSON nesting a node report never needs
constexpr std::size_t kShown = 60;     // characters of bad input quoted in a problem

std::string quote_input(std::string_view s) {
  std::string cut(s.substr(0, kShown));
  std::string out = "'" + common::terminal_text(cut) + "'";
  if (s.size() > kShown) out += "...";
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

bool tegra_of(Version2 cc) {
  const ArchRow* row = find_arch(cc.packed());
  return row != nullptr && row->tegra;
}

// A GPU name to a capability: the site's names first, then the table's products.
std::optional<Version2> lookup_name(std::string_view name, const NameMap& names) {
  const std::string l = lower(name);
  for (const auto& [k, v] : names)
    if (lower(k) == l) return v;
  return cc_for_gpu_name(name);
}

std::string unknown_name_hint(std::string_view name) {
  return " is not a GPU name the architecture table knows; map it with --gpu-name " + std::string(name) + "=X.Y";
}

// ---- node reports -------------------------------------------------------------------------

// The end of the JSON value that starts at text[at] == '{' (one past its closing brace), or
// npos when it does not end; `error` says why.
std::size_t object_end(std::string_view text, std::size_t at, std::string& error) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = at; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > kMaxDepth) {
        error = "nested deeper than " + std::to_string(kMaxDepth) + " levels at byte " + std::to_string(i);
        return std::string_view::npos;
      }
    } else if (c == '}' || c == ']') {
      if (depth == 0) break;
      if (--depth == 0) return i + 1;
    }
  }
  // Truncated output, or the pieces of several nodes' output interleaved (srun without --label
  // cuts each task's output into pieces and mixes them): the document seen first then swallows
  // the others and does not end where the stream ends.
  error =
      "the document does not end (truncated output, or the output of several nodes interleaved? run srun with --label, "
      "or with --output=DIR/%N-%t.json and merge DIR)";
  return std::string_view::npos;
}

const json* field(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string string_field(const json& j, std::string_view key) {
  const json* v = field(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

/// Calls `fn` on each element of the array `j[key]` (on none when it is absent or no array).
template <class Fn>
void for_each_in(const json& j, std::string_view key, Fn&& fn) {
  if (const json* a = field(j, key); a != nullptr && a->is_array())
    for (const json& e : *a) fn(e);
}

/// Calls `fn` on each finding of the steps numbered `number` of a doctor report.
template <class Fn>
void for_each_finding(const json& doc, int number, Fn&& fn) {
  for_each_in(doc, "steps", [&](const json& st) {
    const json* num = field(st, "number");
    if (num != nullptr && num->is_number_integer() && num->get<int>() == number) for_each_in(st, "findings", fn);
  });
}

std::optional<Version2> version_field(const json& j, std::string_view key) {
  const json* v = field(j, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return common::parse_cc(v->get<std::string>());
}

// A node of a fleet report (archguard.fleet/1), as to_json wrote it.
/// A GPU as a fleet file or a doctor report gives it: its name, compute capability, whether it
/// is a Tegra part (as given, else as the table says), UUID and MIG mode. False without a cc.
bool read_gpu(const json& g, NodeGpu& gpu) {
  gpu.name = string_field(g, "name");
  auto cc = version_field(g, "cc");
  if (!cc) return false;
  gpu.cc = *cc;
  const json* t = field(g, "tegra");
  gpu.tegra = t != nullptr && t->is_boolean() ? t->get<bool>() : tegra_of(gpu.cc);
  gpu.uuid = string_field(g, "uuid");
  gpu.mig = string_field(g, "mig_mode");
  return true;
}

std::optional<Node> node_from_fleet_json(const json& n, std::string& error) {
  Node node;
  node.name = string_field(n, "name");
  if (node.name.empty()) {
    error = "a node without a name";
    return std::nullopt;
  }
  node.source = string_field(n, "source");
  node.where = string_field(n, "where");
  node.verdict = string_field(n, "verdict");
  node.problem = string_field(n, "problem");
  node.time = string_field(n, "time");
  if (auto d = string_field(n, "driver_version"); !d.empty()) {
    auto v = parse_driver_version(d);
    if (!v) {
      error = "node " + node.name + ": driver_version " + quote_input(d) + ": " + v.message();
      return std::nullopt;
    }
    node.driver = *v;
  }
  node.driver_cuda = version_field(n, "driver_cuda");
  if (const json* gpus = field(n, "gpus"); gpus != nullptr && gpus->is_array()) {
    for (const json& g : *gpus) {
      NodeGpu gpu;
      if (!read_gpu(g, gpu)) {
        error = "node " + node.name + ": a GPU without a compute capability (cc \"X.Y\")";
        return std::nullopt;
      }
      const json* c = field(g, "count");
      gpu.count = c != nullptr && c->is_number_unsigned() ? c->get<std::size_t>() : 1;
      node.gpus.push_back(std::move(gpu));
    }
  }
  if (const json* rts = field(n, "runtimes"); rts != nullptr && rts->is_array())
    for (const json& r : *rts)
      if (auto v = version_field(r, "version")) node.runtimes.push_back({string_field(r, "name"), *v, string_field(r, "where")});
  if (const json* files = field(n, "files"); files != nullptr && files->is_array())
    for (const json& f : *files)
      node.files.push_back({string_field(f, "subject"), string_field(f, "status"), string_field(f, "message")});
  return node;
}

// A node report (archguard.doctor/1 with its "node" object).
std::optional<Node> node_from_report(const json& doc, std::string& error) {
  const json* node_obj = field(doc, "node");
  Node node;
  node.source = "report";
  if (node_obj != nullptr) node.name = string_field(*node_obj, "name");
  if (node.name.empty()) {
    error = "the report names no node (\"node\": {\"name\": ...}): made by an older archguard? run 'archguard doctor --json' of this release";
    return std::nullopt;
  }
  if (node_obj != nullptr) {
    node.time = string_field(*node_obj, "time");
    if (const json* rts = field(*node_obj, "runtimes"); rts != nullptr && rts->is_array())
      for (const json& r : *rts)
        if (auto v = version_field(r, "version")) node.runtimes.push_back({string_field(r, "name"), *v, string_field(r, "where")});
  }
  node.verdict = string_field(doc, "verdict");
  const json* found = field(doc, "driver_found");
  if (found != nullptr && found->is_boolean() && !found->get<bool>()) node.problem = string_field(doc, "driver_problem");
  if (auto d = string_field(doc, "driver_version"); !d.empty()) {
    auto v = parse_driver_version(d);
    if (!v) {
      error = "driver_version " + quote_input(d) + ": " + v.message();
      return std::nullopt;
    }
    node.driver = *v;
  }
  node.driver_cuda = version_field(doc, "driver_cuda");
  if (const json* devs = field(doc, "devices"); devs != nullptr) {
    if (!devs->is_array()) {
      error = "\"devices\" is not an array";
      return std::nullopt;
    }
    for (const json& d : *devs) {
      NodeGpu g;
      if (!read_gpu(d, g)) {
        error = "device " + quote_input(g.name) + " has no compute capability (\"cc\": \"X.Y\")";
        return std::nullopt;
      }
      node.gpus.push_back(std::move(g));
    }
  }
  if (node.gpus.empty() && node.problem.empty()) {
    // The devices step says why (cuInit failed, CUDA_VISIBLE_DEVICES hides them, ...).
    for_each_finding(doc, 1, [&node](const json& f) {
      if (string_field(f, "status") == "fail" && node.problem.empty()) node.problem = string_field(f, "message");
    });
  }
  for_each_finding(doc, 3, [&node](const json& f) {
    node.files.push_back({string_field(f, "subject"), string_field(f, "status"), string_field(f, "message")});
  });
  return node;
}

// Natural order: "gpu2" before "gpu10".
bool natural_less(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0, db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      std::size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie])) != 0) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je])) != 0) ++je;
      std::string_view na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      while (na.size() > 1 && na.front() == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb.front() == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      if (ie - i != je - j) return ie - i < je - j;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

// ---- Slurm --------------------------------------------------------------------------------

// Splits a GRES list at commas outside parentheses: "gpu:a100:4(S:0-1),gpu:v100:2".
std::vector<std::string_view> gres_items(std::string_view gres) {
  std::vector<std::string_view> items;
  std::size_t depth = 0, start = 0;
  for (std::size_t i = 0; i <= gres.size(); ++i) {
    if (i == gres.size() || (gres[i] == ',' && depth == 0)) {
      if (i > start) items.push_back(gres.substr(start, i - start));
      start = i + 1;
    } else if (gres[i] == '(') {
      ++depth;
    } else if (gres[i] == ')' && depth > 0) {
      --depth;
    }
  }
  return items;
}

// The GPUs of one Slurm node's GRES; problems for what cannot be read.
void slurm_gpus(Node& node, std::string_view gres, const NameMap& names, const std::string& where, Fleet& into) {
  gres = trim(gres);
  if (gres.empty() || gres == "(null)") return;
  for (std::string_view item : gres_items(gres)) {
    if (const auto paren = item.find('('); paren != std::string_view::npos) item = item.substr(0, paren);
    const std::vector<std::string_view> parts = common::split(item, ":");
    if (parts.empty() || lower(parts[0]) != "gpu") continue;  // mps, shard, nic, ...
    std::string_view type, count_text = "1";
    if (parts.size() == 2) {
      // "gpu:4" (a count) or "gpu:a100" (a type, one GPU)
      const bool digits = std::all_of(parts[1].begin(), parts[1].end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
      if (digits && !parts[1].empty()) count_text = parts[1];
      else type = parts[1];
    } else if (parts.size() >= 3) {
      type = parts[1];
      count_text = parts[2];
    }
    std::size_t count = 0;
    const auto [ptr, ec] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
    if (ec != std::errc{} || ptr != count_text.data() + count_text.size() || count == 0 || count > 4096) {
      into.problems.push_back({where, "gres " + quote_input(item) + ": count " + quote_input(count_text) + " is not a number of GPUs (1 to 4096)"});
      continue;
    }
    if (type.empty()) {
      into.problems.push_back({where, "gres " + quote_input(item) + " names no GPU type, so its " + std::to_string(count) +
                                          " GPU(s) are unknown; give the type in gres.conf (Type=a100) or gather node reports"});
      continue;
    }
    auto cc = lookup_name(type, names);
    if (!cc) {
      into.problems.push_back({where, "gres type " + quote_input(type) + unknown_name_hint(type)});
      continue;
    }
    node.gpus.push_back({std::string(type), *cc, tegra_of(*cc), "", "", count});
  }
}

// The value of `key=` in a Slurm record (up to the next blank), or nullopt.
std::optional<std::string_view> slurm_value(std::string_view record, std::string_view key) {
  for (std::size_t at = record.find(key); at != std::string_view::npos; at = record.find(key, at + 1)) {
    if (at != 0 && std::isspace(static_cast<unsigned char>(record[at - 1])) == 0) continue;
    const std::size_t start = at + key.size();
    std::size_t end = start;
    while (end < record.size() && std::isspace(static_cast<unsigned char>(record[end])) == 0) ++end;
    return record.substr(start, end - start);
  }
  return std::nullopt;
}

// Slurm nodes seen so far: name -> (index in the fleet, its GRES text).
using SeenSlurm = std::map<std::string, std::pair<std::size_t, std::string>>;

void add_slurm_node(Fleet& into, SeenSlurm& seen, Node node, std::string_view gres_text) {
  auto it = seen.find(node.name);
  if (it != seen.end()) {
    // sinfo -N prints a node once per partition: the same GRES again is the same node.
    if (it->second.second == gres_text) return;
    into.problems.push_back({node.where, "node " + node.name + " appears again with gres " + quote_input(gres_text) + " (" +
                                             into.nodes[it->second.first].where + " gave " + quote_input(it->second.second) + "): the first is kept"});
    return;
  }
  seen.emplace(node.name, std::make_pair(into.nodes.size(), std::string(gres_text)));
  into.nodes.push_back(std::move(node));
}

// ---- Kubernetes ---------------------------------------------------------------------------

std::optional<unsigned> label_number(const json& labels, const std::string& key) {
  const std::string v = string_field(labels, key);
  unsigned n = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc{} || ptr != v.data() + v.size()) return std::nullopt;
  return n;
}

// Label value of the first key present (GFD renamed some: cuda.driver.major -> cuda.driver-version.major).
std::optional<unsigned> label_number(const json& labels, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (auto v = label_number(labels, std::string(k))) return v;
  return std::nullopt;
}

}  // namespace

// ---- public ---------------------------------------------------------------------------------

Version2 driver_ptx_isa(const Node& node) {
  if (node.driver) return ptx_isa_for_driver(*node.driver);
  if (node.driver_cuda)
    for (const auto& r : release_rows())
      if (r.cuda == *node.driver_cuda) return r.ptx_isa;
  return {};
}

std::optional<DriverVersion> effective_driver(const Node& node) {
  if (node.driver) return node.driver;
  if (node.driver_cuda) {
    const ReleaseRow* rel = find_release(*node.driver_cuda);
    if (rel != nullptr && *rel->min_driver != '\0')
      if (auto v = parse_driver_version(rel->min_driver)) return *v;
  }
  return std::nullopt;
}

bool looks_like_json(std::string_view text) {
  text = trim(text);
  return !text.empty() && text.front() == '{';
}

namespace {

// The label srun --label ("12: ") or kubectl logs --prefix ("[pod/x/c] ") puts before each
// line; npos when the line has none. Sets `label`.
std::size_t label_end(std::string_view line, std::string_view& label) {
  if (!line.empty() && line.front() == '[') {
    const std::size_t close = line.find("] ");
    if (close == std::string_view::npos || close < 2) return std::string_view::npos;
    label = line.substr(1, close - 1);
    return close + 2;
  }
  std::size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  const std::size_t digits = i;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])) != 0) ++i;
  if (i == digits || i + 1 >= line.size() || line[i] != ':' || line[i + 1] != ' ') return std::string_view::npos;
  label = line.substr(digits, i - digits);
  return i + 2;
}

void read_stream(std::string_view text, std::string_view name, Fleet& into);

}  // namespace

void read_reports(std::string_view text, std::string_view name, Fleet& into) {
  // srun --label and kubectl logs --prefix: every line labelled. srun cuts a task's output into
  // pieces of 1 KiB, each labelled on a line of its own, and interleaves the tasks' pieces; the
  // pieces of one label put together give that task's output (JSON needs no line breaks).
  std::vector<std::string> labels;
  std::map<std::string, std::string, std::less<>> streams;
  bool labelled = true, any = false;
  for (std::size_t at = 0; at < text.size() && labelled;) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(at, nl - at);
    at = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (trim(line).empty()) continue;
    std::string_view label;
    const std::size_t start = label_end(line, label);
    if (start == std::string_view::npos) {
      labelled = false;
      break;
    }
    any = true;
    auto it = streams.find(label);
    if (it == streams.end()) {
      labels.emplace_back(label);
      it = streams.emplace(std::string(label), std::string()).first;
    }
    it->second.append(line.substr(start));
  }
  if (!labelled || !any) {
    read_stream(text, name, into);
    return;
  }
  for (const auto& l : labels) read_stream(streams[l], std::string(name) + " [" + l + "]", into);
}

namespace {

void read_stream(std::string_view text, std::string_view name, Fleet& into) {
  std::size_t at = 0, doc_no = 0, line_no = 1;
  auto advance_lines = [&](std::size_t to) {
    for (std::size_t i = at; i < to && i < text.size(); ++i)
      if (text[i] == '\n') ++line_no;
    at = to;
  };
  while (at < text.size()) {
    const char c = text[at];
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      advance_lines(at + 1);
      continue;
    }
    if (c != '{') {
      // Not a document: a line of other output (an srun error, a log prefix). Named, skipped.
      std::size_t nl = text.find('\n', at);
      if (nl == std::string_view::npos) nl = text.size();
      into.problems.push_back({std::string(name) + ":" + std::to_string(line_no) + " (byte " + std::to_string(at) + ")",
                               "not a JSON document: " + quote_input(text.substr(at, nl - at))});
      advance_lines(nl);
      continue;
    }
    ++doc_no;
    ++into.documents;
    const std::string where = std::string(name) + ": document " + std::to_string(doc_no) + " (line " + std::to_string(line_no) +
                              ", byte " + std::to_string(at) + ")";
    std::string error;
    const std::size_t end = object_end(text, at, error);
    if (end == std::string_view::npos) {
      into.problems.push_back({where, error});
      return;  // the rest cannot be split into documents
    }
    const std::string_view doc_text = text.substr(at, end - at);
    advance_lines(end);
    json doc = json::parse(doc_text.begin(), doc_text.end(), nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
      into.problems.push_back({where,
                               "not valid JSON (the output of several nodes interleaved? run srun with --label, or with "
                               "--output=DIR/%N-%t.json and merge DIR)"});
      continue;
    }
    const std::string schema = string_field(doc, "schema");
    if (schema == "archguard.fleet/1") {
      const json* nodes = field(doc, "nodes");
      if (nodes == nullptr || !nodes->is_array()) {
        into.problems.push_back({where, "a fleet report without \"nodes\""});
        continue;
      }
      for (const json& n : *nodes) {
        auto node = node_from_fleet_json(n, error);
        if (!node) {
          into.problems.push_back({where, error});
          continue;
        }
        if (node->where.empty()) node->where = where;
        into.nodes.push_back(std::move(*node));
      }
      // Its inputs count as read here: merging merges gives the counts of one merge.
      if (const json* counts = field(doc, "counts"))
        if (const json* in = field(*counts, "inputs"); in != nullptr && in->is_number_unsigned() && in->get<std::size_t>() > 0)
          into.documents += in->get<std::size_t>() - 1;
      if (const json* probs = field(doc, "problems"); probs != nullptr && probs->is_array())
        for (const json& p : *probs) into.problems.push_back({string_field(p, "where"), string_field(p, "message")});
      continue;
    }
    if (schema.rfind("archguard.doctor/", 0) != 0) {
      into.problems.push_back({where, schema.empty() ? "not an archguard node report (no \"schema\")"
                                                     : "not a node report: schema " + quote_input(schema) + " (expected archguard.doctor/1)"});
      continue;
    }
    auto node = node_from_report(doc, error);
    if (!node) {
      into.problems.push_back({where, error});
      continue;
    }
    node->where = where;
    into.nodes.push_back(std::move(*node));
  }
}

}  // namespace

void read_slurm(std::string_view text, std::string_view name, Fleet& into, const NameMap& names) {
  SeenSlurm seen;
  const std::size_t first_node = into.nodes.size();
  if (text.find("NodeName=") != std::string_view::npos) {
    // scontrol show node [-o]: a record starts at each "NodeName=" that begins a line.
    std::vector<std::size_t> starts;
    for (std::size_t at = text.find("NodeName="); at != std::string_view::npos; at = text.find("NodeName=", at + 1))
      if (at == 0 || text[at - 1] == '\n') starts.push_back(at);
    std::size_t line = 1, counted = 0;  // the line of starts[i], counted incrementally
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const std::string_view record = text.substr(starts[i], (i + 1 < starts.size() ? starts[i + 1] : text.size()) - starts[i]);
      ++into.documents;
      Node node;
      node.source = "slurm";
      node.name = std::string(slurm_value(record, "NodeName=").value_or(""));
      line += static_cast<std::size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(counted), text.begin() + static_cast<std::ptrdiff_t>(starts[i]), '\n'));
      counted = starts[i];
      node.where = std::string(name) + ":" + std::to_string(line) + " (node " + node.name + ")";
      if (node.name.empty()) {
        into.problems.push_back({node.where, "a record without a node name"});
        continue;
      }
      const std::string_view gres = slurm_value(record, "Gres=").value_or("");
      slurm_gpus(node, gres, names, node.where, into);
      add_slurm_node(into, seen, std::move(node), gres);
    }
  } else {
    // sinfo -N -h -o "%N %G": "<node> <gres>" per line.
    std::size_t line_no = 0;
    for (std::size_t at = 0; at < text.size();) {
      std::size_t nl = text.find('\n', at);
      if (nl == std::string_view::npos) nl = text.size();
      const std::string_view line = trim(text.substr(at, nl - at));
      at = nl + 1;
      ++line_no;
      if (line.empty()) continue;
      const std::string where = std::string(name) + ":" + std::to_string(line_no);
      const std::size_t blank = line.find_first_of(" \t");
      const std::string_view node_name = line.substr(0, blank);
      const std::string_view gres = blank == std::string_view::npos ? std::string_view{} : trim(line.substr(blank));
      if (lower(node_name) == "nodelist" || lower(node_name) == "hostnames") continue;  // a header line
      if (gres.find_first_of(" \t") != std::string_view::npos || node_name.find('=') != std::string_view::npos) {
        into.problems.push_back({where, quote_input(line) + " is not '<node> <gres>'; use sinfo -N -h -o \"%N %G\" or scontrol show node"});
        continue;
      }
      ++into.documents;
      Node node;
      node.source = "slurm";
      node.name = std::string(node_name);
      node.where = where + " (node " + node.name + ")";
      slurm_gpus(node, gres, names, node.where, into);
      add_slurm_node(into, seen, std::move(node), gres);
    }
  }
  std::size_t without = 0;
  for (std::size_t i = first_node; i < into.nodes.size(); ++i)
    if (into.nodes[i].gpus.empty()) ++without;
  if (without > 0) into.notes.push_back(std::string(name) + ": " + std::to_string(without) + " node(s) without GPU gres");
}

void read_kubernetes(std::string_view text, std::string_view name, Fleet& into, const NameMap& names) {
  json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    into.problems.push_back({std::string(name), "not a JSON document (use kubectl get nodes -o json)"});
    return;
  }
  std::vector<const json*> items;
  const std::string kind = string_field(doc, "kind");
  if (kind == "Node") {
    items.push_back(&doc);
  } else if (const json* list = field(doc, "items"); list != nullptr && list->is_array() && (kind == "List" || kind == "NodeList")) {
    for (const json& i : *list) items.push_back(&i);
  } else {
    into.problems.push_back({std::string(name), "not a Node or a list of nodes (kind " + quote_input(kind) + "); use kubectl get nodes -o json"});
    return;
  }
  std::size_t without = 0, index = 0;
  std::map<std::string, std::size_t> seen;
  for (const json* item : items) {
    ++index;
    ++into.documents;
    const json* meta = field(*item, "metadata");
    Node node;
    node.source = "kubernetes";
    node.name = meta != nullptr ? string_field(*meta, "name") : "";
    node.where = std::string(name) + ": item " + std::to_string(index) + (node.name.empty() ? "" : " (node " + node.name + ")");
    if (node.name.empty() || string_field(*item, "kind") != "Node") {
      into.problems.push_back({node.where, node.name.empty() ? "an item without metadata.name" : "not a Node (kind " + quote_input(string_field(*item, "kind")) + ")"});
      continue;
    }
    const json* labels_p = meta != nullptr ? field(*meta, "labels") : nullptr;
    const json labels = labels_p != nullptr && labels_p->is_object() ? *labels_p : json::object();
    std::string product = string_field(labels, "nvidia.com/gpu.product");
    auto count = label_number(labels, {"nvidia.com/gpu.count"});
    if (!count) {
      // The device plugin's resource, when Feature Discovery does not run.
      if (const json* status = field(*item, "status"))
        if (const json* cap = field(*status, "capacity")) {
          const std::string c = string_field(*cap, "nvidia.com/gpu");
          unsigned n = 0;
          const auto [ptr, ec] = std::from_chars(c.data(), c.data() + c.size(), n);
          if (!c.empty() && ec == std::errc{} && ptr == c.data() + c.size()) count = n;
        }
    }
    if (product.empty() && (!count || *count == 0)) {
      ++without;
      continue;
    }
    std::string mig;
    if (const auto at = product.find("-MIG-"); at != std::string::npos) {
      product.erase(at);  // MIG 'single' strategy: "A100-SXM4-40GB-MIG-1g.5gb"
      mig = "enabled";
    }
    if (product.size() > 7 && product.compare(product.size() - 7, 7, "-SHARED") == 0) product.erase(product.size() - 7);  // time-slicing
    if (!string_field(labels, "nvidia.com/mig.strategy").empty() && string_field(labels, "nvidia.com/mig.strategy") != "none" &&
        mig.empty() && string_field(labels, "nvidia.com/mig.capable") == "true")
      mig = "enabled";
    std::optional<Version2> cc;
    const auto major = label_number(labels, {"nvidia.com/gpu.compute.major"});
    const auto minor = label_number(labels, {"nvidia.com/gpu.compute.minor"});
    if (major && minor && *major < 100 && *minor < 10) cc = Version2{*major, *minor};
    if (!cc && !product.empty()) cc = lookup_name(product, names);
    if (!cc) {
      into.problems.push_back({node.where, product.empty() ? "nvidia.com/gpu.count is set but neither nvidia.com/gpu.product nor nvidia.com/gpu.compute.major/minor"
                                                           : "nvidia.com/gpu.product " + quote_input(product) + unknown_name_hint(product) +
                                                                 " (or deploy GPU Feature Discovery, whose compute labels say it)"});
      continue;
    }
    const auto dmaj = label_number(labels, {"nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver.major"});
    const auto dmin = label_number(labels, {"nvidia.com/cuda.driver-version.minor", "nvidia.com/cuda.driver.minor"});
    const auto drev = label_number(labels, {"nvidia.com/cuda.driver-version.revision", "nvidia.com/cuda.driver.rev"});
    if (dmaj && dmin) {
      DriverVersion d;
      d.major = *dmaj;
      d.minor = *dmin;
      d.patch = drev.value_or(0);
      d.components = drev ? 3 : 2;
      node.driver = d;
    }
    const auto rmaj = label_number(labels, {"nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime.major"});
    const auto rmin = label_number(labels, {"nvidia.com/cuda.runtime-version.minor", "nvidia.com/cuda.runtime.minor"});
    if (rmaj && rmin) node.driver_cuda = Version2{*rmaj, *rmin};
    NodeGpu g;
    g.name = product.empty() ? "CC " + common::version_text(*cc) : product;
    g.cc = *cc;
    g.tegra = tegra_of(*cc);
    g.mig = mig;
    g.count = count.value_or(1) == 0 ? 1 : count.value_or(1);
    node.gpus.push_back(std::move(g));
    if (seen.count(node.name) != 0) {
      into.problems.push_back({node.where, "node " + node.name + " is listed twice: the first is kept"});
      continue;
    }
    seen.emplace(node.name, into.nodes.size());
    into.nodes.push_back(std::move(node));
  }
  if (without > 0) into.notes.push_back(std::string(name) + ": " + std::to_string(without) + " node(s) without NVIDIA GPU labels or nvidia.com/gpu capacity");
}

void finish(Fleet& fleet) {
  // One node per name: the newest report wins (ISO 8601 UTC times compare as text).
  std::map<std::string, std::size_t> index;
  std::vector<Node> kept;
  for (auto& n : fleet.nodes) {
    auto it = index.find(n.name);
    if (it == index.end()) {
      index.emplace(n.name, kept.size());
      kept.push_back(std::move(n));
      continue;
    }
    Node& old = kept[it->second];
    const bool newer = !n.time.empty() && !old.time.empty() && n.time > old.time;
    const std::string kept_where = newer ? n.where : old.where;
    fleet.problems.push_back({n.where, "node " + n.name + " is reported again (first in " + old.where + "): the report in " + kept_where +
                                           " is kept" + (newer ? " (the newest)" : (n.time.empty() || old.time.empty() || n.time == old.time) ? " (the first)"
                                                                                                                                              : " (the newest)")});
    if (newer) old = std::move(n);
  }
  fleet.nodes = std::move(kept);
  std::sort(fleet.nodes.begin(), fleet.nodes.end(), [](const Node& a, const Node& b) { return natural_less(a.name, b.name); });
  std::map<std::string, std::string> uuids;
  for (const auto& n : fleet.nodes)
    for (const auto& g : n.gpus) {
      if (g.uuid.empty()) continue;
      auto [it, fresh] = uuids.emplace(g.uuid, n.name);
      if (!fresh && it->second != n.name)
        fleet.problems.push_back({n.where, "GPU " + g.uuid + " is reported by nodes " + it->second + " and " + n.name +
                                               ": one machine under two names? (in a container, pass --node with the node's name)"});
    }
}

std::vector<Group> groups(const Fleet& fleet) {
  std::vector<Group> out;
  for (const auto& n : fleet.nodes) {
    // Per node: its models (a node lists each GPU; four H100 are one model).
    std::vector<const NodeGpu*> models;
    for (const auto& g : n.gpus) {
      auto same = std::find_if(models.begin(), models.end(), [&](const NodeGpu* m) { return m->name == g.name && m->cc == g.cc && m->tegra == g.tegra; });
      if (same == models.end()) models.push_back(&g);
    }
    for (const NodeGpu* m : models) {
      std::size_t count = 0;
      for (const auto& g : n.gpus)
        if (g.name == m->name && g.cc == m->cc && g.tegra == m->tegra) count += g.count;
      auto key = [&](const Group& gr) {
        return gr.gpu == m->name && gr.cc == m->cc && gr.tegra == m->tegra && gr.driver == n.driver && gr.driver_cuda == n.driver_cuda;
      };
      auto it = std::find_if(out.begin(), out.end(), key);
      if (it == out.end()) {
        out.push_back(Group{m->name, m->cc, m->tegra, n.driver, n.driver_cuda, 0, {}});
        it = out.end() - 1;
      }
      it->gpus += count;
      it->nodes.push_back(n.name);
    }
  }
  return out;
}

std::vector<std::string> nodes_without_gpus(const Fleet& fleet) {
  std::vector<std::string> out;
  for (const auto& n : fleet.nodes)
    if (n.gpus.empty()) out.push_back(n.name);
  return out;
}

std::string node_list(std::vector<std::string> names) {
  std::sort(names.begin(), names.end(), natural_less);
  names.erase(std::unique(names.begin(), names.end()), names.end());
  // prefix + digits: ranges of consecutive numbers of the same width.
  struct Split {
    std::string prefix, digits;
  };
  auto split = [](const std::string& s) {
    std::size_t i = s.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1])) != 0) --i;
    return Split{s.substr(0, i), s.substr(i)};
  };
  std::string out;
  for (std::size_t i = 0; i < names.size();) {
    const Split head = split(names[i]);
    if (head.digits.empty() || head.digits.size() > 9) {
      out += (out.empty() ? "" : ",") + names[i];
      ++i;
      continue;
    }
    std::vector<std::pair<unsigned long, unsigned long>> ranges;
    std::size_t j = i;
    for (; j < names.size(); ++j) {
      const Split s = split(names[j]);
      if (s.prefix != head.prefix || s.digits.size() != head.digits.size() || s.digits.empty()) break;
      const unsigned long v = std::stoul(s.digits);
      if (!ranges.empty() && ranges.back().second + 1 == v) ranges.back().second = v;
      else ranges.emplace_back(v, v);
    }
    if (j - i == 1) {
      out += (out.empty() ? "" : ",") + names[i];
    } else {
      const std::size_t width = head.digits.size();
      auto num = [&](unsigned long v) {
        std::string d = std::to_string(v);
        return std::string(width > d.size() ? width - d.size() : 0, '0') + d;
      };
      std::string body;
      for (const auto& [a, b] : ranges) body += (body.empty() ? "" : ",") + (a == b ? num(a) : num(a) + "-" + num(b));
      out += (out.empty() ? "" : ",") + head.prefix + "[" + body + "]";
    }
    i = j;
  }
  return out;
}

std::string brief_node_list(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 160;
  std::string list = node_list(names);
  if (list.size() <= kShown) return list;
  const std::size_t cut = list.rfind(',', kShown);
  if (cut == std::string::npos || cut == 0) return list;  // one long name: whole
  const auto end = list.begin() + static_cast<std::ptrdiff_t>(cut);
  const bool open = std::count(list.begin(), end, '[') > std::count(list.begin(), end, ']');
  std::size_t distinct = names.size();
  {
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    distinct = static_cast<std::size_t>(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
  }
  list.resize(cut);
  return list + (open ? ",...]" : ",...") + " (" + std::to_string(distinct) + " in all: --json lists every one)";
}

std::string to_json(const Fleet& fleet) {
  // Text from the input need not be UTF-8: bytes that are not are written as \xNN, so that two
  // names stay two names (JSON's replacement character would make them one).
  auto u = [](std::string_view t) { return common::utf8_escaped(t); };
  auto u_all = [&](const std::vector<std::string>& v) {
    std::vector<std::string> out;
    out.reserve(v.size());
    for (const auto& t : v) out.push_back(u(t));
    return out;
  };
  // Nodes are written one by one into the text: a tree of every node of a large fleet at once
  // would cost several times the text's size.
  std::string nodes_text = "[";
  std::size_t gpu_total = 0;
  for (const auto& n : fleet.nodes) {
    json gpus = json::array();
    for (const auto& g : n.gpus) {
      gpus.push_back({{"name", u(g.name)},
                      {"cc", common::version_text(g.cc)},
                      {"tegra", g.tegra},
                      {"uuid", g.uuid.empty() ? json(nullptr) : json(u(g.uuid))},
                      {"mig_mode", g.mig.empty() ? json(nullptr) : json(u(g.mig))},
                      {"count", g.count}});
      gpu_total += g.count;
    }
    json runtimes = json::array();
    for (const auto& r : n.runtimes) runtimes.push_back({{"name", u(r.name)}, {"version", common::version_text(r.version)}, {"where", u(r.where)}});
    json files = json::array();
    for (const auto& f : n.files) files.push_back({{"subject", u(f.subject)}, {"status", u(f.status)}, {"message", u(f.message)}});
    const Version2 isa = driver_ptx_isa(n);
    const json node{{"name", u(n.name)},
                    {"source", u(n.source)},
                    {"where", u(n.where)},
                    {"time", n.time.empty() ? json(nullptr) : json(u(n.time))},
                    {"gpus", std::move(gpus)},
                    {"driver_version", n.driver ? json(format_driver_version(*n.driver)) : json(nullptr)},
                    {"driver_cuda", n.driver_cuda ? json(common::version_text(*n.driver_cuda)) : json(nullptr)},
                    {"driver_ptx_isa", isa.empty() ? json(nullptr) : json(common::version_text(isa))},
                    {"runtimes", std::move(runtimes)},
                    {"verdict", n.verdict.empty() ? json(nullptr) : json(u(n.verdict))},
                    {"problem", n.problem.empty() ? json(nullptr) : json(u(n.problem))},
                    {"files", std::move(files)}};
    if (nodes_text.size() > 1) nodes_text += ',';
    nodes_text += node.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  nodes_text += ']';
  // GPU models over the fleet: name and capability, GPUs and nodes.
  json models = json::array();
  {
    std::vector<std::tuple<std::string, Version2, std::size_t, std::set<std::string>>> m;
    for (const auto& n : fleet.nodes)
      for (const auto& g : n.gpus) {
        auto it = std::find_if(m.begin(), m.end(), [&](const auto& t) { return std::get<0>(t) == g.name && std::get<1>(t) == g.cc; });
        if (it == m.end()) {
          m.emplace_back(g.name, g.cc, 0, std::set<std::string>{});
          it = m.end() - 1;
        }
        std::get<2>(*it) += g.count;
        std::get<3>(*it).insert(n.name);
      }
    for (const auto& [name, cc, count, ns] : m)
      models.push_back({{"name", u(name)}, {"cc", common::version_text(cc)}, {"gpus", count}, {"nodes", ns.size()}});
  }
  json grps = json::array();
  for (const auto& g : groups(fleet)) {
    Node probe;
    probe.driver = g.driver;
    probe.driver_cuda = g.driver_cuda;
    const Version2 isa = driver_ptx_isa(probe);
    grps.push_back({{"gpu", u(g.gpu)},
                    {"cc", common::version_text(g.cc)},
                    {"tegra", g.tegra},
                    {"driver_version", g.driver ? json(format_driver_version(*g.driver)) : json(nullptr)},
                    {"driver_cuda", g.driver_cuda ? json(common::version_text(*g.driver_cuda)) : json(nullptr)},
                    {"driver_ptx_isa", isa.empty() ? json(nullptr) : json(common::version_text(isa))},
                    {"gpus", g.gpus},
                    {"nodes", u_all(g.nodes)},
                    {"node_list", u(node_list(g.nodes))}});
  }
  json problems = json::array();
  for (const auto& p : fleet.problems) problems.push_back({{"where", u(p.where)}, {"message", u(p.message)}});
  json doc{{"schema", "archguard.fleet/1"},
           {"counts", {{"inputs", fleet.documents}, {"nodes", fleet.nodes.size()}, {"gpus", gpu_total}, {"problems", fleet.problems.size()}}},
           {"models", std::move(models)},
           {"groups", std::move(grps)},
           {"nodes_without_gpus", u_all(nodes_without_gpus(fleet))},
           {"notes", u_all(fleet.notes)},
           {"problems", std::move(problems)}};
  std::string rest = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  return "{\"nodes\":" + nodes_text + "," + rest.substr(1);
}

std::string to_csv(const Fleet& fleet) {
  std::string out = "name, compute_cap\n";
  for (const auto& n : fleet.nodes)
    for (const auto& g : n.gpus) {
      // The CSV splits at the last comma and refuses control characters: keep names plain.
      std::string name;
      for (char c : g.name) {
        const auto u = static_cast<unsigned char>(c);
        name += (u < 0x20 || u == 0x7f) ? ' ' : c;
      }
      if (name.empty()) name = "CC " + common::version_text(g.cc);
      for (std::size_t i = 0; i < g.count; ++i) out += name + ", " + common::version_text(g.cc) + "\n";
    }
  return out;
}

}  // namespace archguard::fleet
