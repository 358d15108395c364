// SPDX-License-Identifier: Apache-2.0
// The include scan behind the cache key (see includes.hpp for what it promises).
#include "jit/includes.hpp"

#include "common/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <set>

namespace archguard::jit::detail {
namespace {

struct Directive {
  std::string operand;  // the text inside "" or <>, or the macro name for a computed include
  bool angle = false;
  bool computed = false;
  unsigned line = 0;
};

struct Define {
  std::string name, value;  // value: the full "..." or <...> spelling
};

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Removes comments and joins continued lines, keeping line numbers (a removed newline inside a
// comment or after a backslash is re-emitted after the joined line).
std::string strip(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  std::size_t pending_newlines = 0;
  enum { code,
         line_comment,
         block_comment,
         str,
         chr } st = code;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    const char n = i + 1 < in.size() ? in[i + 1] : '\0';
    if (c == '\\' && n == '\n') {  // continuation
      ++i;
      ++pending_newlines;
      continue;
    }
    switch (st) {
      case code:
        if (c == '/' && n == '/') {
          st = line_comment;
          ++i;
          continue;
        }
        if (c == '/' && n == '*') {
          st = block_comment;
          out.push_back(' ');
          ++i;
          continue;
        }
        if (c == '"') st = str;
        if (c == '\'') st = chr;
        break;
      case line_comment:
        if (c != '\n') continue;
        st = code;
        break;
      case block_comment:
        if (c == '*' && n == '/') {
          st = code;
          ++i;
        } else if (c == '\n') {
          ++pending_newlines;
        }
        continue;
      case str:
      case chr:
        if (c == '\\' && n != '\0') {
          out.push_back(c);
          out.push_back(n);
          ++i;
          continue;
        }
        if ((st == str && c == '"') || (st == chr && c == '\'') || c == '\n') st = code;
        break;
    }
    out.push_back(c);
    if (c == '\n') {
      out.append(pending_newlines, '\n');
      pending_newlines = 0;
    }
  }
  return out;
}

void skip_blank(std::string_view s, std::size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\f' || s[i] == '\v')) ++i;
}

// Reads "..." or <...> at i; returns false when neither.
bool read_header_name(std::string_view s, std::size_t& i, std::string& name, bool& angle) {
  if (i >= s.size() || (s[i] != '"' && s[i] != '<')) return false;
  const char close = s[i] == '"' ? '"' : '>';
  angle = s[i] == '<';
  const std::size_t end = s.find_first_of(std::string{close, '\n'}, i + 1);
  if (end == std::string_view::npos || s[end] != close) return false;
  name = std::string(s.substr(i + 1, end - i - 1));
  i = end + 1;
  return true;
}

// Whether the rest of a directive line is the literal 0 (`#if 0`): that branch is never taken.
bool is_literal_zero(std::string_view rest) {
  std::size_t i = 0;
  skip_blank(rest, i);
  if (i >= rest.size() || rest[i] != '0') return false;
  ++i;
  skip_blank(rest, i);
  return i == rest.size();
}

/// The word of the directive whose '#' is at ln[j] ("include", "if"); j moves past it.
std::string_view directive_word(std::string_view ln, std::size_t& j) {
  ++j;
  skip_blank(ln, j);
  std::size_t k = j;
  while (k < ln.size() && is_ident(ln[k])) ++k;
  const std::string_view word = ln.substr(j, k - j);
  j = k;
  return word;
}

void scan_text(std::string_view text, std::vector<Directive>& out, std::vector<Define>& defines) {
  const std::string s = strip(text);
  unsigned line = 1;
  std::size_t i = 0;
  // Inside `#if 0`: the conditionals opened there, counting the `#if 0` itself (0: not inside).
  // Every other condition is taken as possibly true (the scan over-approximates), but what
  // `#if 0` holds is never compiled: neither its includes nor its definitions count, and a
  // header named only there is not read (a 3 GB file under `#if 0` once was).
  unsigned skipped = 0;
  while (i < s.size()) {
    const std::size_t eol = std::min(s.find('\n', i), s.size());
    const std::string_view ln(s.data() + i, eol - i);
    std::size_t j = 0;
    skip_blank(ln, j);
    if (skipped > 0) {
      if (j < ln.size() && ln[j] == '#') {
        const std::string_view word = directive_word(ln, j);
        if (word == "if" || word == "ifdef" || word == "ifndef") {
          ++skipped;
        } else if (word == "endif") {
          --skipped;
        } else if (skipped == 1 && (word == "else" || word == "elif" || word == "elifdef" || word == "elifndef")) {
          skipped = 0;  // the next branch may be taken
        }
      }
      i = eol + 1;
      ++line;
      continue;
    }
    if (j < ln.size() && ln[j] == '#') {
      const std::string_view word = directive_word(ln, j);
      skip_blank(ln, j);
      if (word == "if" && is_literal_zero(ln.substr(j))) {
        skipped = 1;
        i = eol + 1;
        ++line;
        continue;
      }
      if (word == "include" || word == "include_next" || word == "import") {
        Directive d;
        d.line = line;
        if (!read_header_name(ln, j, d.operand, d.angle)) {
          std::size_t m = j;
          while (m < ln.size() && is_ident(ln[m])) ++m;
          d.computed = true;
          d.operand = std::string(ln.substr(j, m - j));
          if (d.operand.empty()) d.operand = std::string(ln.substr(j));
        }
        out.push_back(std::move(d));
      } else if (word == "define") {
        std::size_t m = j;
        while (m < ln.size() && is_ident(ln[m])) ++m;
        Define def;
        def.name = std::string(ln.substr(j, m - j));
        skip_blank(ln, m);
        std::size_t v = m;
        std::string name;
        bool angle = false;
        if (!def.name.empty() && read_header_name(ln, v, name, angle)) {
          def.value = std::string(ln.substr(m, v - m));
          defines.push_back(std::move(def));
        }
      }
    }
    // __has_include(<x>) / __has_include("x") anywhere: the answer depends on that file.
    for (std::size_t p = ln.find("__has_include"); p != std::string_view::npos; p = ln.find("__has_include", p + 1)) {
      std::size_t q = p + 13;
      if (ln.substr(q, 5) == "_next") q += 5;
      skip_blank(ln, q);
      if (q >= ln.size() || ln[q] != '(') continue;
      ++q;
      skip_blank(ln, q);
      Directive d;
      d.line = line;
      if (read_header_name(ln, q, d.operand, d.angle)) out.push_back(std::move(d));
    }
    i = eol + 1;
    ++line;
  }
}

std::optional<std::string> read_file(const std::string& path) {
  auto text = common::read_file(path, /*regular_only=*/true);
  if (!text) return std::nullopt;
  return std::move(*text);
}

// What a scan of one text yields; shared by the memo below.
struct TextScan {
  bool too_large = false;  // not read: larger than the header limit (kMaxHeaderBytes by default)
  std::string digest;      // hex SHA-256 of the content
  std::vector<Directive> directives;
  std::vector<Define> defines;
};
using TextScanPtr = std::shared_ptr<const TextScan>;

TextScanPtr scan_content(std::string_view text) {
  auto t = std::make_shared<TextScan>();
  t->digest = to_hex(sha256(text));
  scan_text(text, t->directives, t->defines);
  return t;
}

// Process-wide memo of file scans, validated by stat on every use: a file is re-read unless its
// device, inode, size, mtime and ctime all match the recorded ones AND its ctime was more than
// two seconds older than the moment it was read (a write within the file system's timestamp
// granularity after the read could otherwise go unnoticed; ctime cannot be set back by utimes).
// A changed mtime alone therefore costs one re-read and leaves the digest, and the key, as is.
struct FileMemo {
  struct stat st {};  ///< what stat said before the read
  std::chrono::system_clock::time_point read_at;
  TextScanPtr scan;
};

std::mutex g_memo_mu;
std::atomic<std::int64_t> g_racy_window_ns{2'000'000'000};
std::unordered_map<std::string, FileMemo>& memo() {
  static auto* m = new std::unordered_map<std::string, FileMemo>();  // lives for the process
  return *m;
}

bool same_time(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/// Same device, inode, size, mtime and ctime.
bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size && same_time(a.st_mtim, b.st_mtim) &&
         same_time(a.st_ctim, b.st_ctim);
}

// The scan of a file, or nullptr when it is not a readable regular file.
TextScanPtr scan_file(const std::string& path, std::uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    auto t = std::make_shared<TextScan>();
    t->too_large = true;
    return t;
  }
  {
    std::lock_guard<std::mutex> g(g_memo_mu);
    auto it = memo().find(path);
    if (it != memo().end()) {
      const FileMemo& m = it->second;
      const auto ctime_at = std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              std::chrono::seconds(st.st_ctim.tv_sec) + std::chrono::nanoseconds(st.st_ctim.tv_nsec)));
      if (same_file(m.st, st) && ctime_at + std::chrono::nanoseconds(g_racy_window_ns.load()) < m.read_at) {
        return m.scan;
      }
    }
  }
  const auto read_at = std::chrono::system_clock::now();
  auto text = read_file(path);
  if (!text) return nullptr;
  TextScanPtr scan = scan_content(*text);
  std::lock_guard<std::mutex> g(g_memo_mu);
  if (memo().size() > 100000) memo().clear();
  memo()[path] = FileMemo{st, read_at, scan};
  return scan;
}

std::string join(const std::string& dir, const std::string& name) {
  if (!name.empty() && name.front() == '/') return name;
  if (dir.empty() || dir == ".") return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Collapses "a/./b" and "a/x/../b" so that one file reached two ways is scanned once.
std::string normalize(const std::string& path) {
  std::vector<std::string> parts;
  const bool absolute = !path.empty() && path.front() == '/';
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    const std::string part = path.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);
      }
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out = absolute ? "/" : "";
  for (std::size_t k = 0; k < parts.size(); ++k) out += (k ? "/" : "") + parts[k];
  return out.empty() ? "." : out;
}

}  // namespace

void set_memo_racy_window(std::chrono::nanoseconds window) { g_racy_window_ns.store(window.count()); }

IncludeOptions parse_include_options(const std::vector<std::string>& options) {
  IncludeOptions r;
  for (std::size_t i = 0; i < options.size(); ++i) {
    const std::string& o = options[i];
    auto value_of = [&](std::string_view flag, std::vector<std::string>& into) {
      if (o == flag) {
        if (i + 1 < options.size()) into.push_back(options[++i]);
        return true;
      }
      if (o.size() > flag.size() && o.compare(0, flag.size(), flag) == 0) {
        std::string v = o.substr(flag.size());
        if (!v.empty() && v.front() == '=') v.erase(0, 1);
        into.push_back(v);
        return true;
      }
      return false;
    };
    if (o.rfind("--include-path", 0) == 0) {
      value_of("--include-path", r.dirs);
    } else if (o.rfind("--pre-include", 0) == 0) {
      value_of("--pre-include", r.pre_includes);
    } else if (o == "-include" || o.rfind("-include=", 0) == 0) {
      value_of("-include", r.pre_includes);
    } else if (o.rfind("-I", 0) == 0) {
      value_of("-I", r.dirs);
    }
  }
  return r;
}

namespace {

/// The walk of one request's include tree: every file met, once, with what it includes.
class IncludeWalk {
 public:
  IncludeWalk(const CompileRequest& request, std::uint64_t max_header_bytes)
      : inc_(parse_include_options(request.options)), main_dir_(common::dir_of(request.name)), max_header_bytes_(max_header_bytes) {
    for (const Header& h : request.headers) provided_.emplace(h.name, &h);
    work_.push_back({scan_content(request.source), main_dir_, request.name});
  }

  IncludeScan run() {
    for (const std::string& pre : inc_.pre_includes) resolve(pre, false, main_dir_);
    while (!work_.empty()) {
      Work w = std::move(work_.back());
      work_.pop_back();
      for (const Define& def : w.scan->defines) on_define(def);
      for (const Directive& d : w.scan->directives) {
        if (d.computed) {
          on_use(d, w.dir, w.where);
          continue;
        }
        ++result_.work;
        resolve(d.operand, d.angle, w.dir);
      }
    }
    for (const Use& u : uses_) {
      if (values_of_.count(u.macro) != 0) continue;
      result_.complete = false;
      result_.note = "computed #include " + u.macro + " at " + u.at +
                     " could not be resolved: the include tree is unknown, so the result is not cached";
      break;
    }
    result_.deps.assign(deps_.begin(), deps_.end());
    return std::move(result_);
  }

 private:
  struct Work {
    TextScanPtr scan;
    std::string dir;  // "" for provided headers: no directory of their own
    std::string where;
  };
  struct Use {
    std::string macro, at;  // at: "<file>:<line>", for the note
  };

  /// A header the request provides: true when `name` is one.
  bool resolve_provided(const std::string& name, const std::string& spelling) {
    auto it = provided_.find(name);
    if (it == provided_.end()) return false;
    if (visited_.insert("provided:" + name).second) {
      TextScanPtr t = scan_content(it->second->content);
      provided_digest_[name] = t->digest;
      work_.push_back({t, "", "provided:" + name});
    }
    deps_.insert({spelling, "provided:" + name, provided_digest_[name]});
    return true;
  }

  /// The directories searched for `name`, in the compiler's order.
  std::vector<std::string> search_dirs(const std::string& name, bool angle, const std::string& cur_dir) const {
    std::vector<std::string> dirs;
    if (!name.empty() && name.front() == '/') {
      dirs.push_back("");
    } else {
      if (!angle) {
        if (!cur_dir.empty()) dirs.push_back(cur_dir);
        dirs.push_back(main_dir_);
      }
      dirs.insert(dirs.end(), inc_.dirs.begin(), inc_.dirs.end());
    }
    return dirs;
  }

  std::string size_limit_text() const {
    return max_header_bytes_ % (1 << 20) == 0 ? std::to_string(max_header_bytes_ >> 20) + " MiB"
                                              : std::to_string(max_header_bytes_) + " bytes";
  }

  void resolve(const std::string& name, bool angle, const std::string& cur_dir) {
    const std::string spelling = angle ? "<" + name + ">" : "\"" + name + "\"";
    bool found = resolve_provided(name, spelling);
    for (const std::string& d : search_dirs(name, angle, cur_dir)) {
      const std::string path = normalize(join(d, name));
      if (visited_.count("file:" + path) != 0) {
        found = true;
        continue;
      }
      TextScanPtr t = scan_file(path, max_header_bytes_);
      if (!t) continue;
      found = true;
      visited_.insert("file:" + path);
      if (t->too_large) {
        result_.complete = false;
        if (result_.note.empty())
          result_.note = "#include " + spelling + ": " + path + " is larger than " + size_limit_text() +
                         " and not read for the key, so the result is not cached (raise it with ARCHGUARD_CACHE_MAX_HEADER)";
        deps_.insert({spelling, path, "too-large"});
        continue;
      }
      deps_.insert({spelling, path, t->digest});
      work_.push_back({std::move(t), common::dir_of(path), path});
    }
    if (!found) deps_.insert({spelling, "", ""});
  }

  // Computed includes (#include MACRO) are resolved through the definitions of MACRO seen
  // anywhere, as both turn up: a new definition is tried for every directory that uses the
  // macro, a new use (macro, directory) with every definition seen so far. Each pair is tried
  // once, so the work is linear in the directives, the definitions and the pairs; the rounds
  // over every unresolved include this replaces cost O(rounds x unresolved x defines) and took
  // 18 s to key a 323 KB source.
  void try_value(const std::string& value, const std::string& cur_dir) {
    ++result_.work;
    std::size_t i = 0;
    std::string name;
    bool angle = false;
    if (read_header_name(value, i, name, angle)) resolve(name, angle, cur_dir);
  }

  void on_define(const Define& def) {
    ++result_.work;
    if (!seen_values_.insert(def.name + "\n" + def.value).second) return;
    values_of_[def.name].push_back(def.value);
    if (auto users = dirs_of_.find(def.name); users != dirs_of_.end())
      for (const std::string& d : users->second) try_value(def.value, d);
  }

  void on_use(const Directive& d, const std::string& cur_dir, const std::string& where) {
    ++result_.work;
    uses_.push_back({d.operand, where + ":" + std::to_string(d.line)});
    if (!seen_uses_.insert(d.operand + "\n" + cur_dir).second) return;
    dirs_of_[d.operand].push_back(cur_dir);
    if (auto values = values_of_.find(d.operand); values != values_of_.end())
      for (const std::string& v : values->second) try_value(v, cur_dir);
  }

  const IncludeOptions inc_;
  const std::string main_dir_;
  const std::uint64_t max_header_bytes_;
  std::map<std::string, const Header*> provided_;
  std::vector<Work> work_;
  std::set<std::string> visited_;
  std::set<IncludeDep> deps_;
  std::map<std::string, std::string> provided_digest_;
  IncludeScan result_;
  std::unordered_map<std::string, std::vector<std::string>> values_of_;  // macro -> "..." / <...> spellings
  std::unordered_map<std::string, std::vector<std::string>> dirs_of_;    // macro -> directories using it
  std::unordered_set<std::string> seen_values_, seen_uses_;              // "macro\nvalue", "macro\ndir"
  std::vector<Use> uses_;                                                // in the order met
};

}  // namespace

IncludeScan scan_includes(const CompileRequest& request, std::uint64_t max_header_bytes) {
  return IncludeWalk(request, max_header_bytes).run();
}

}  // namespace archguard::jit::detail
