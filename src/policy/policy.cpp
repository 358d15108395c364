// SPDX-License-Identifier: Apache-2.0
// The policy engine (see <archguard/policy.hpp>): ARCH_POLICY, ARCH_PTX, ARCH_MIN, the visible
// GPUs or a fleet file, and one nvcc's answers, made into an explicit target set. Where a
// target runs is always asked of the compatibility rules (sass_runs_on, ptx_targets); the
// fleet file is read by the one fleet reader (parse_fleet_csv).
#include <archguard/policy.hpp>

#include <archguard/compat.hpp>
#include <archguard/coverage.hpp>

#include "common/fs.hpp"
#include "common/nearest.hpp"
#include "common/version.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace archguard {
namespace {

using common::version_text;

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

std::string cc_text(unsigned sm) { return version_text(cc_of_sm(sm)); }

std::string suffix_text(Suffix s) { return s == Suffix::a ? "a" : s == Suffix::f ? "f"
                                                                                 : ""; }

bool contains(const std::vector<unsigned>& v, unsigned x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// "13.0" >= a table version ("" / none is never reached).
bool at_least(Version2 have, Version2 since) { return !since.empty() && have >= since; }

struct Toolkit {
  std::vector<unsigned> sass, ptx;  // ascending
  std::vector<Arch> variants;       // ascending
  Version2 release;
  std::string v;  // "13.0"
  unsigned lowest = 0, highest = 0;

  explicit Toolkit(const PlanToolkit& t) : sass(t.sass), ptx(t.ptx), variants(t.variants), release(t.release) {
    std::sort(sass.begin(), sass.end());
    sass.erase(std::unique(sass.begin(), sass.end()), sass.end());
    std::sort(ptx.begin(), ptx.end());
    ptx.erase(std::unique(ptx.begin(), ptx.end()), ptx.end());
    std::sort(variants.begin(), variants.end());
    variants.erase(std::unique(variants.begin(), variants.end()), variants.end());
    v = version_text(release);
    if (!sass.empty()) {
      lowest = sass.front();
      highest = sass.back();
    }
  }
  bool builds(Target t) const {
    if (t.arch.suffix != Suffix::none) return std::find(variants.begin(), variants.end(), t.arch) != variants.end();
    return contains(t.kind == CodeKind::ptx ? ptx : sass, t.arch.sm);
  }
  bool lists(unsigned sm) const { return contains(sass, sm) || contains(ptx, sm); }
};

// Whether this nvcc builds a target; otherwise the error, with the nearest valid choice.
std::optional<std::string> check_target(Target t, const std::string& who, const Toolkit& tk) {
  if (tk.builds(t)) return std::nullopt;
  const unsigned sm = t.arch.sm;
  const std::string sfx = suffix_text(t.arch.suffix);
  const std::string name = nvcc_name(t.arch, t.kind);
  std::string why = "this nvcc does not support it", fix;
  bool renamed = false;
  for (const RenameRow& r : rename_rows()) {
    if (r.old_sm == sm && at_least(tk.release, r.cuda)) {
      renamed = true;
      why = "sm_" + std::to_string(sm) + " was renamed sm_" + std::to_string(r.new_sm) + " in CUDA " + version_text(r.cuda);
      fix = "use " + std::to_string(r.new_sm) + sfx;
    }
  }
  const ArchRow* row = find_arch(sm);
  if (!renamed && row != nullptr) {
    Version2 since = row->first_cuda;
    if (t.arch.suffix == Suffix::a) since = row->a_since;
    if (t.arch.suffix == Suffix::f) since = row->f_since;
    if (at_least(tk.release, row->removed_in)) {
      why = "sm_" + std::to_string(sm) + " was removed in CUDA " + version_text(row->removed_in);
      fix = "the lowest supported is " + std::to_string(tk.lowest) + "; build with an older CUDA for CC " + version_text(row->cc);
    } else if (!at_least(tk.release, since)) {
      const std::string s = since.empty() ? "-" : version_text(since);
      why = name + " needs CUDA " + s + " or newer";
      fix = t.arch.suffix != Suffix::none
                ? "use " + std::to_string(sm) + " (plain) or install CUDA " + s
                : "the highest supported is " + std::to_string(tk.highest) + " (add PTX, the default, to reach newer GPUs) or install CUDA " + s;
    }
  }
  if (fix.empty()) {
    if (sm < tk.lowest) fix = "the lowest supported is " + std::to_string(tk.lowest);
    else if (sm > tk.highest) fix = "the highest supported is " + std::to_string(tk.highest);
    else fix = "use one of the supported targets below";
  }
  std::vector<std::string> sass, var;
  for (unsigned s : tk.sass) sass.push_back(std::to_string(s));
  for (Arch a : tk.variants) var.push_back(arch_number(a));
  return who + ": " + name + ": " + why + " (this nvcc is CUDA " + tk.v + "); " + fix + ".\n  This nvcc supports: " + join(sass, " ") +
         "; a/f variants: " + (var.empty() ? std::string("none") : join(var, " "));
}

struct Ctx {
  const PlanRequest& req;
  const Toolkit& tk;
  std::string who;
  Plan& plan;
  std::set<unsigned> inferred_warned;
};

// The GPU "name (X.Y)" of one SM among the request's GPUs, else "CC X.Y".
std::string gpu_name(const std::vector<PlanGpu>& gpus, unsigned sm) {
  for (const PlanGpu& g : gpus) {
    if (g.cc.packed() == sm) return g.name + " (" + version_text(g.cc) + ")";
  }
  return "CC " + cc_text(sm);
}

// One detected or fleet GPU as a target, with a why: note (or a warning for a GPU newer than
// the toolkit), or the error for a GPU the toolkit cannot reach.
Result<Target> gpu_target(Ctx& c, unsigned sm, const std::string& name, const std::vector<unsigned>& all_sms,
                          std::string& note) {
  const Toolkit& tk = c.tk;
  if (contains(tk.sass, sm)) return Target{{sm}, CodeKind::sass};
  if (const RenameRow* r = find_rename(sm); r != nullptr && contains(tk.sass, r->new_sm)) {
    note = name + ": sm_" + std::to_string(sm) + " is called sm_" + std::to_string(r->new_sm) + " by this nvcc";
    return Target{{r->new_sm}, CodeKind::sass};
  }
  const ArchRow* row = find_arch(sm);
  if (sm < tk.lowest) {
    std::string removed;
    if (row != nullptr && !row->removed_in.empty()) {
      removed = " (sm_" + std::to_string(sm) + " was removed in CUDA " + version_text(row->removed_in) + ")";
    }
    std::vector<unsigned> others;
    for (unsigned o : all_sms) {
      if (o >= tk.lowest && !contains(others, o)) others.push_back(o);
    }
    std::sort(others.begin(), others.end());
    std::string fix = "no other GPU here can be targeted by this toolkit either";
    if (!others.empty()) {
      std::vector<std::string> o;
      for (unsigned x : others) o.push_back(std::to_string(x));
      fix = "or leave it out: -DARCH_MIN=" + cc_text(others.front()) + " (the lowest other GPU here), or -DARCH_POLICY=\"" + join(o, ";") + "\"";
    }
    return make_error(ErrorKind::usage, c.who + ": GPU " + name + " cannot be targeted by CUDA " + tk.v + removed +
                                            "; the lowest supported is " + std::to_string(tk.lowest) +
                                            ". Build with an older CUDA toolkit for it, " + fix + ".");
  }
  // SASS of a lower minor that runs on it (the rules decide: never on a Tegra part, never from one).
  const Device device = device_for_cc(cc_of_sm(sm));
  unsigned best = 0;
  for (unsigned s : tk.sass) {
    if (s < sm && sass_runs_on(Arch{s}, device)) best = s;
  }
  if (best != 0) {
    note = name + ": CUDA " + tk.v + " has no sm_" + std::to_string(sm) + "; sm_" + std::to_string(best) + " SASS runs on it";
    return Target{{best}, CodeKind::sass};
  }
  unsigned ptx = 0;
  for (unsigned p : tk.ptx) {
    if (p < sm) ptx = p;
  }
  const std::string install = row != nullptr ? "CUDA " + version_text(row->first_cuda) + " or newer (the first with sm_" + std::to_string(sm) + ")"
                                             : std::string("a CUDA release newer than this architecture table knows");
  c.plan.warnings.push_back(c.who + ": GPU " + name + " is newer than CUDA " + tk.v + " supports (highest sm_" + std::to_string(tk.highest) +
                            "); building PTX compute_" + std::to_string(ptx) +
                            " for it, which the driver JIT-compiles at first load. Install " + install + " for native SASS.");
  note = name + ": newer than the toolkit, clamped to PTX compute_" + std::to_string(ptx);
  return Target{{ptx}, CodeKind::ptx};
}

Result<std::vector<Target>> gpu_targets(Ctx& c, const std::string& lc, const std::vector<PlanGpu>& gpus, unsigned min_sm) {
  std::vector<unsigned> sms;
  for (const PlanGpu& g : gpus) sms.push_back(g.cc.packed());
  std::vector<Target> out;
  std::vector<unsigned> seen;
  std::vector<std::string> below;
  for (unsigned sm : sms) {
    if (contains(seen, sm)) continue;
    seen.push_back(sm);
    const std::string name = gpu_name(gpus, sm);
    if (min_sm != 0 && sm < min_sm) {
      below.push_back(name);
      continue;
    }
    std::string note;
    AG_TRY(Target t, gpu_target(c, sm, name, sms, note));
    out.push_back(t);
    if (!note.empty()) c.plan.why.push_back(note);
  }
  if (!below.empty()) {
    const std::string bm = join(below, ", ");
    if (out.empty()) {
      return make_error(ErrorKind::usage, "ARCH_MIN=" + c.req.min + ": leaves out every GPU of " + c.who + " (" + bm + "); lower ARCH_MIN");
    }
    c.plan.warnings.push_back(c.who + ": ARCH_MIN=" + c.req.min + " leaves out " + bm + ": this build will not run there");
    c.plan.why.push_back("ARCH_MIN=" + c.req.min + " left out " + bm);
  }
  if (lc == "auto") {  // the visible GPUs natively, every other GPU this nvcc supports by JIT
    unsigned floor = c.tk.lowest;
    if (min_sm != 0) {
      for (unsigned p : c.tk.ptx) {
        if (p >= min_sm) {
          floor = p;
          break;
        }
      }
    }
    if (contains(c.tk.ptx, floor)) {
      out.push_back({{floor}, CodeKind::ptx});
      c.plan.why.push_back("auto adds PTX compute_" + std::to_string(floor) + " (the lowest this nvcc supports) so that other GPUs run by JIT");
    }
  }
  return out;
}

// all / all-major from the toolkit's lists; `nvcc_ptx` the PTX nvcc itself embeds (highest X0).
std::vector<Target> toolkit_all(const Toolkit& tk, bool all, unsigned& nvcc_ptx) {
  std::vector<Target> out;
  nvcc_ptx = 0;
  for (unsigned s : tk.sass) {
    if (s % 10 == 0 && contains(tk.ptx, s)) nvcc_ptx = s;
    if (all || s % 10 == 0 || s == tk.lowest) out.push_back({{s}, CodeKind::sass});
  }
  if (nvcc_ptx != 0) out.push_back({{nvcc_ptx}, CodeKind::ptx});
  return out;
}

bool is_separator(char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == ';' || ch == ','; }

std::vector<std::string> split_plain(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : text) {
    if (is_separator(ch)) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// nvcc flag syntax, quotes or brackets: read as one text by the grammar.
bool is_flag_syntax(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '[' || ch == ']' || ch == '"' || ch == '\'') return true;
    const bool start = i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\r' || text[i - 1] == '\n' || text[i - 1] == ';';
    if (start && ch == '-' && i + 1 < text.size() && !std::isdigit(static_cast<unsigned char>(text[i + 1]))) return true;
    if (start && lower(std::string(text.substr(i, 5))) == "arch=") return true;
  }
  return false;
}

// A bare number as the user wrote it (90, 100a) is SASS in ARCH_POLICY.
bool is_bare_number(std::string_view w) {
  std::size_t n = 0;
  while (n < w.size() && std::isdigit(static_cast<unsigned char>(w[n]))) ++n;
  if (n < 2 || n > 3 || w[0] == '0') return false;
  if (n == w.size()) return true;
  return n + 1 == w.size() && std::string_view("aAfF").find(w[n]) != std::string_view::npos;
}

// An architecture the table lacks that this nvcc lists, in one word (109, 109a-real, sm_109,
// compute_109): accepted with one warning, as the rules infer it (arch_inferred).
std::optional<std::vector<Target>> listed_unknown(Ctx& c, std::string w, bool exact) {
  w = lower(w);
  CodeKind only = CodeKind::sass;
  bool has_kind = false, real = false, virt = false;
  if (w.rfind("sm_", 0) == 0) {
    w.erase(0, 3);
    has_kind = true;
  } else if (w.rfind("compute_", 0) == 0) {
    w.erase(0, 8);
    has_kind = true;
    only = CodeKind::ptx;
  }
  if (w.size() > 5 && w.compare(w.size() - 5, 5, "-real") == 0) {
    w.resize(w.size() - 5);
    real = true;
  } else if (w.size() > 8 && w.compare(w.size() - 8, 8, "-virtual") == 0) {
    w.resize(w.size() - 8);
    virt = true;
  }
  if (has_kind && (real || virt)) return std::nullopt;
  Suffix sfx = Suffix::none;
  if (!w.empty() && (w.back() == 'a' || w.back() == 'f')) {
    sfx = w.back() == 'a' ? Suffix::a : Suffix::f;
    w.pop_back();
  }
  if (w.size() < 2 || w.size() > 3 || !std::all_of(w.begin(), w.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) return std::nullopt;
  const unsigned sm = static_cast<unsigned>(std::stoul(w));
  const Arch a{sm, sfx};
  if (find_arch(sm) != nullptr || !c.tk.lists(sm)) return std::nullopt;
  if (sfx != Suffix::none && std::find(c.tk.variants.begin(), c.tk.variants.end(), a) == c.tk.variants.end()) return std::nullopt;
  std::vector<Target> out;
  if (has_kind) out.push_back({a, only});
  else {
    if (!virt) out.push_back({a, CodeKind::sass});
    if (virt || (!real && exact)) out.push_back({a, CodeKind::ptx});
  }
  return out;
}

void warn_inferred(Ctx& c, const std::vector<Target>& targets) {
  for (const Target& t : targets) {
    if (find_arch(t.arch.sm) != nullptr || !c.tk.lists(t.arch.sm) || !c.inferred_warned.insert(t.arch.sm).second) continue;
    const std::string cc = cc_text(t.arch.sm), sm = std::to_string(t.arch.sm);
    c.plan.warnings.push_back("CudaArchGuard: sm_" + sm + " is listed by nvcc " + c.tk.v + " but not in the architecture table: assuming CC " + cc +
                              " (its SASS runs on CC " + cc + " only, its PTX on CC " + cc +
                              " and later; Tegra and family unknown); add an 'arch|" + sm + "|" + cc +
                              "|...' row to cmake/Modules/CudaArchGuard/architectures.txt (see docs/architectures.md)");
  }
}

// In ARCH_POLICY a bare number (between blanks, ';' and ',') is SASS: "90" -> "90-real", the
// separators kept (nvcc flags hold no bare number).
std::string bare_as_sass(std::string_view text) {
  std::string out, word;
  auto flush = [&] {
    out += is_bare_number(word) ? word + "-real" : word;
    word.clear();
  };
  for (char ch : text) {
    if (is_separator(ch)) {
      flush();
      out += ch;
    } else {
      word += ch;
    }
  }
  flush();
  return out;
}

// How a token spells architectures, for the neighbours named in its error.
enum class Style { cmake,
                   sass,
                   ptx,
                   lto,
                   capability };

Style style_of(std::string_view word) {
  const std::string w = lower(std::string(word));
  if (w.rfind("sm_", 0) == 0) return Style::sass;
  if (w.rfind("compute_", 0) == 0) return Style::ptx;
  if (w.rfind("lto_", 0) == 0) return Style::lto;
  if (w.find('.') != std::string::npos) return Style::capability;
  return Style::cmake;
}

std::string styled(unsigned sm, Style style) {
  switch (style) {
    case Style::sass:
      return "sm_" + std::to_string(sm);
    case Style::ptx:
      return "compute_" + std::to_string(sm);
    case Style::lto:
      return "lto_" + std::to_string(sm);
    case Style::capability:
      return cc_text(sm);
    case Style::cmake:
      break;
  }
  return std::to_string(sm);
}

// An architecture the table lacks is an error unless this nvcc lists it (then it is inferred,
// with one warning): "<token>: unknown architecture: ...; nearest valid targets: 90, 100".
std::optional<std::string> check_known(const Ctx& c, Target t, const std::string& token, Style style) {
  if (find_arch(t.arch.sm) != nullptr) return std::nullopt;
  if (c.tk.lists(t.arch.sm) && (t.arch.suffix == Suffix::none || std::find(c.tk.variants.begin(), c.tk.variants.end(), t.arch) != c.tk.variants.end())) {
    return std::nullopt;
  }
  unsigned below = 0, above = 0;
  for (const ArchRow& r : arch_rows()) {
    if (r.sm < t.arch.sm) below = r.sm;
    if (r.sm > t.arch.sm && above == 0) above = r.sm;
  }
  std::vector<std::string> near;
  if (below != 0) near.push_back(styled(below, style));
  if (above != 0) near.push_back(styled(above, style));
  return token + ": unknown architecture: there is no compute capability " + cc_text(t.arch.sm) + "; nearest valid targets: " + join(near, ", ");
}

Result<std::vector<Target>> parse_policy_list(Ctx& c, const std::string& policy, bool exact) {
  const std::string usage = ".\n  ARCH_POLICY takes auto, native, all, all-major, fleet:<csv file> or a list such as \"80;90a;120\", \"8.0;9.0+PTX\" or \"sm_80,sm_90\".";
  auto keyword_error = [&](std::string err) {
    for (const std::string& w : split_plain(policy)) {
      const std::string lw = lower(w.substr(w.find('=') == std::string::npos ? 0 : w.find('=') + 1));
      if (lw == "all" || lw == "all-major" || lw == "native") {
        err = "'" + lw + "' cannot be combined with other entries; use it alone";
        break;
      }
      // "allmajor", "nativ": a misspelt keyword, not an architecture
      if (const std::string near = common::nearest_word(lw, {"auto", "native", "all", "all-major"}); !near.empty()) {
        err = "'" + w + "' is no architecture or keyword; did you mean '" + near + "'?";
        break;
      }
    }
    return make_error(ErrorKind::usage, c.who + ": " + err + usage);
  };
  std::vector<Target> out;
  if (is_flag_syntax(policy)) {
    // The grammar reads nvcc's names literally; the table (or this nvcc) decides what exists.
    auto parsed = parse_list(exact ? policy : bare_as_sass(policy));
    if (!parsed) return keyword_error(parsed.message());
    for (const Target& t : *parsed) {
      const std::string name = nvcc_name(Arch{t.arch.sm}, t.kind);
      if (auto err = check_known(c, t, name, t.kind == CodeKind::ptx ? Style::ptx : t.kind == CodeKind::ltoir ? Style::lto
                                                                                                              : Style::sass)) {
        return keyword_error(*err + " (read from '" + policy + "')");
      }
    }
    out = *parsed;
  } else {
    const std::vector<std::string> words = split_plain(policy);
    if (words.empty()) return keyword_error("empty architecture token");
    for (const std::string& w : words) {
      if (auto u = listed_unknown(c, w, exact)) {
        out.insert(out.end(), u->begin(), u->end());
        continue;
      }
      auto parsed = parse_token(!exact && is_bare_number(w) ? w + "-real" : w);
      if (!parsed) {
        // quote the token as the user wrote it
        auto as_written = parse_token(w);
        return keyword_error(as_written ? parsed.message() : as_written.message());
      }
      for (const Target& t : *parsed) {
        if (auto err = check_known(c, t, w, style_of(w))) return keyword_error(*err);
      }
      out.insert(out.end(), parsed->begin(), parsed->end());
    }
  }
  for (const Target& t : out) {
    if (t.kind == CodeKind::ltoir) {
      return make_error(ErrorKind::usage, c.who + ": lto_" + arch_number(t.arch) +
                                              ": LTO-IR cannot be a target of the policy (CMake has no spelling for it); use " + arch_number(t.arch) +
                                              " and set the target's CUDA_ARCHITECTURES / -dlto flags yourself");
    }
  }
  warn_inferred(c, out);
  return out;
}

Result<unsigned> min_sm_of(const std::string& min) {
  if (min.empty()) return 0u;
  const std::size_t dot = min.find('.');
  auto digits = [](std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }); };
  if (dot != std::string::npos && digits(min.substr(0, dot)) && min.size() == dot + 2 && digits(min.substr(dot + 1))) {
    return static_cast<unsigned>(std::stoul(min.substr(0, dot)) * 10 + std::stoul(min.substr(dot + 1)));
  }
  if (digits(min) && min.size() < 6 && std::stoul(min) >= 10) return static_cast<unsigned>(std::stoul(min));
  return make_error(ErrorKind::usage, "ARCH_MIN='" + min + "': not a compute capability; write 8.0 or 80");
}

unsigned highest_sass(const std::vector<Target>& ts) {
  unsigned h = 0;
  for (const Target& t : ts) {
    if (t.kind == CodeKind::sass) h = std::max(h, t.arch.sm);
  }
  return h;
}

Status apply_ptx(Ctx& c, std::vector<Target>& items, unsigned nvcc_ptx) {
  const unsigned max_sass = highest_sass(items);
  const std::string& ptx = c.req.ptx;
  if (ptx == "none") {
    std::erase_if(items, [](const Target& t) { return t.kind == CodeKind::ptx; });
    c.plan.warnings.push_back("ARCH_PTX=none: no PTX is embedded, so GPUs newer than sm_" + std::to_string(max_sass) +
                              " (and any this list does not name) will fail with 'no kernel image is available for execution on the device'. "
                              "Keep ARCH_PTX=highest unless you ship for a closed fleet.");
  } else if (ptx == "all") {
    const std::vector<Target> copy = items;
    for (const Target& t : copy) {
      if (t.kind == CodeKind::sass && contains(c.tk.ptx, t.arch.sm)) items.push_back({{t.arch.sm}, CodeKind::ptx});
    }
  } else if (ptx == "highest") {
    if (nvcc_ptx == 0 && max_sass != 0) {
      bool have = false;
      for (const Target& t : items) {
        if (t.kind == CodeKind::ptx && t.arch.suffix == Suffix::none && t.arch.sm >= max_sass) have = true;
      }
      if (!have && contains(c.tk.ptx, max_sass)) items.push_back({{max_sass}, CodeKind::ptx});
    }
  } else {
    return make_error(ErrorKind::usage, "ARCH_PTX='" + ptx + "': unknown value; use highest, all or none");
  }
  return Ok{};
}

// 'a' SASS alone leaves the other devices of its family without SASS (100a alone fails on 10.3).
void check_a_only(Ctx& c, const std::vector<Target>& items) {
  for (const Target& t : items) {
    if (t.kind != CodeKind::sass || t.arch.suffix != Suffix::a) continue;
    const ArchRow* row = find_arch(t.arch.sm);
    if (row == nullptr || row->family == 0) continue;
    std::vector<std::string> uncovered;
    for (const ArchRow& d : arch_rows()) {
      if (d.sm <= t.arch.sm || d.family != row->family || !d.removed_in.empty()) continue;
      const Device dev = device_for_cc(d.cc);
      const bool ok = std::any_of(items.begin(), items.end(), [&](const Target& o) { return o.kind == CodeKind::sass && sass_runs_on(o.arch, dev); });
      if (!ok) uncovered.push_back(version_text(d.cc) + " (" + d.products + ")");
    }
    if (!uncovered.empty()) {
      const std::string sm = std::to_string(t.arch.sm);
      c.plan.warnings.push_back(c.who + ": " + sm + "a is arch-specific: its SASS runs only on CC " + version_text(row->cc) + ", so CC " +
                                join(uncovered, ", ") + " of the same family get no SASS from it. Add " + sm + "f or " + sm + " as well.");
    }
  }
}

std::vector<std::string> summary_of(const Plan& p, const PlanRequest& req, const std::string& toolkit) {
  std::vector<std::string> sass, ptx;
  for (const Target& t : p.targets) (t.kind == CodeKind::sass ? sass : ptx).push_back(arch_number(t.arch));
  std::vector<std::string> s;
  s.push_back("policy: " + p.policy + " -> " + p.mode);
  s.push_back("toolkit: " + toolkit);
  s.push_back("GPUs: " + (p.gpus.empty() ? std::string("none used") : join(p.gpus, ", ")));
  s.push_back("SASS: " + join(sass, " "));
  s.push_back("PTX: " + (ptx.empty() ? std::string("none") : join(ptx, " ")));
  if (!req.exact) s.push_back("ARCH_PTX=" + req.ptx + (req.min.empty() ? std::string() : " ARCH_MIN=" + req.min));
  s.push_back("runs: " + p.runs.text);
  for (const std::string& w : p.why) s.push_back("why: " + w);
  return s;
}

Result<std::vector<PlanGpu>> read_fleet(const Ctx& c, const std::string& policy) {
  const std::string file = policy.substr(6);
  std::string abs = file;
  if (file.empty() || file.front() != '/') abs = (c.req.fleet_base.empty() ? std::string(".") : c.req.fleet_base) + "/" + file;
  auto text = common::read_file(abs, true);
  if (!text) {
    const std::string tried = file.front() == '/' ? abs : abs + " (relative paths are resolved against the top-level source directory " + c.req.fleet_base + ")";
    return make_error(ErrorKind::usage, c.who + ": the fleet file does not exist: tried " + tried +
                                            "; gather it with 'nvidia-smi --query-gpu=name,compute_cap --format=csv' on each machine, or give an absolute path");
  }
  AG_TRY(std::vector<FleetModel> models, parse_fleet_csv(*text, abs));
  std::vector<PlanGpu> out;
  for (const FleetModel& m : models) {
    for (std::size_t i = 0; i < m.count; ++i) out.push_back({m.name, m.cc});  // one entry per GPU
  }
  return out;
}

}  // namespace

std::string plan_item(Target t) {
  const char* k = t.kind == CodeKind::sass ? "sass:" : t.kind == CodeKind::ptx ? "ptx:"
                                                                               : "lto:";
  return k + arch_number(t.arch);
}

PlanRuns plan_runs(const std::vector<Target>& targets, const std::vector<unsigned>& extra) {
  PlanRuns r;
  std::vector<unsigned> sms;
  for (const ArchRow& row : arch_rows()) sms.push_back(row.sm);
  for (unsigned e : extra) {
    if (!contains(sms, e)) sms.push_back(e);
  }
  std::sort(sms.begin(), sms.end());
  for (unsigned sm : sms) {
    const Device dev = device_for_cc(cc_of_sm(sm));
    bool native = false, jit = false;
    for (const Target& t : targets) {
      if (t.kind == CodeKind::sass && sass_runs_on(t.arch, dev)) native = true;
      if (t.kind == CodeKind::ptx && ptx_targets(t.arch, dev)) jit = true;
    }
    (native ? r.native : jit ? r.jit
                             : r.none)
        .push_back(sm);
  }
  for (const Target& t : targets) {
    if (t.kind == CodeKind::ptx && t.arch.suffix == Suffix::none) r.top_ptx = std::max(r.top_ptx, t.arch.sm);
  }
  std::vector<std::string> parts;
  auto part = [&](const std::vector<unsigned>& v, const char* how) {
    if (v.empty()) return;
    std::vector<std::string> ccs;
    for (unsigned sm : v) ccs.push_back(cc_text(sm));
    parts.push_back(std::string(how) + " on CC " + join(ccs, " "));
  };
  part(r.native, "natively");
  part(r.jit, "by JIT");
  part(r.none, "not at all");
  r.text = join(parts, "; ");
  r.text += r.top_ptx != 0 ? "; GPUs newer than these by JIT from compute_" + std::to_string(r.top_ptx) : std::string("; no PTX: no GPU newer than these");
  return r;
}

Result<Plan> plan_policy(const PlanRequest& req) {
  Plan plan;
  plan.policy = trim(req.policy);
  if (plan.policy.empty()) plan.policy = "auto";
  plan.who = !req.who.empty() ? req.who : (req.exact ? "CMAKE_CUDA_ARCHITECTURES=" : "ARCH_POLICY=") + plan.policy;
  if (req.ptx != "highest" && req.ptx != "all" && req.ptx != "none") {
    const std::string near = common::nearest_word(req.ptx, {"highest", "all", "none"});
    return make_error(ErrorKind::usage, "ARCH_PTX='" + req.ptx + "': unknown value; " +
                                            (near.empty() ? "" : "did you mean '" + near + "'? ") + "use highest (default), all or none");
  }
  AG_TRY(unsigned min_sm, min_sm_of(req.min));
  const Toolkit tk(req.toolkit);
  if (tk.sass.empty()) return make_error(ErrorKind::usage, "the toolkit lists no GPU code");
  Ctx c{req, tk, plan.who, plan, {}};
  const std::string lc = lower(plan.policy);
  std::vector<Target> items;
  unsigned nvcc_ptx = 0;
  plan.mode = lc;
  if (lc == "auto" || lc == "native" || lc.rfind("fleet:", 0) == 0) {
    std::vector<PlanGpu> gpus;
    if (lc.rfind("fleet:", 0) == 0) {
      AG_TRY(gpus, read_fleet(c, plan.policy));
      plan.mode = "fleet";
      std::string base = plan.policy.substr(6);
      if (base.empty() || base.front() != '/') base = req.fleet_base + "/" + base;
      plan.why.push_back("fleet file " + base);
      plan.inputs.push_back(base);
    } else if (!req.gpus.empty()) {
      gpus = req.gpus;
      plan.mode = "native";
      if (lc == "auto") plan.why.push_back("auto chose native: " + std::to_string(req.gpus.size()) + " GPU(s) visible via " + req.gpu_source);
    } else if (lc == "auto") {
      plan.mode = "all-major";
      plan.why.push_back("auto chose all-major: no GPU visible (" + req.gpu_why + ")");
    } else {
      return make_error(ErrorKind::usage, plan.who + ": no GPU is visible on this host (" + req.gpu_why +
                                              "). Use -DARCH_POLICY=all-major (every major architecture this nvcc supports) "
                                              "or a list such as -DARCH_POLICY=\"80;90\" for the GPUs you deploy to.");
    }
    for (const PlanGpu& g : gpus) {
      plan.gpu_sms.push_back(g.cc.packed());
      const std::string n = g.name + " (" + version_text(g.cc) + ")";
      if (std::find(plan.gpus.begin(), plan.gpus.end(), n) == plan.gpus.end()) plan.gpus.push_back(n);
    }
    if (plan.mode != "all-major") {
      AG_TRY(items, gpu_targets(c, lc, gpus, min_sm));
    }
  }
  if (plan.mode == "all" || plan.mode == "all-major") {
    items = toolkit_all(tk, plan.mode == "all", nvcc_ptx);
    plan.why.push_back(plan.mode + " from this nvcc's --list-gpu-code (what -arch=" + plan.mode + " builds, made explicit)");
  } else if (plan.mode != "native" && plan.mode != "fleet") {
    plan.mode = "list";
    AG_TRY(items, parse_policy_list(c, plan.policy, req.exact));
  }
  for (const Target& t : items) {
    if (auto err = check_target(t, plan.who, tk)) return make_error(ErrorKind::usage, *err);
  }
  if (!req.exact) {
    if (min_sm != 0) {
      std::vector<Target> kept;
      std::vector<std::string> dropped;
      for (const Target& t : items) {
        if (t.arch.sm < min_sm) {
          const std::string n = arch_number(t.arch);
          if (std::find(dropped.begin(), dropped.end(), n) == dropped.end()) dropped.push_back(n);
        } else {
          kept.push_back(t);
        }
      }
      if (kept.empty()) {
        std::vector<std::string> all;
        for (const Target& t : items) all.push_back(plan_item(t));
        return make_error(ErrorKind::usage, "ARCH_MIN=" + req.min + ": drops every target of " + plan.who + " (" + join(all, ";") +
                                                "); lower ARCH_MIN or widen ARCH_POLICY");
      }
      if (!dropped.empty()) plan.why.push_back("ARCH_MIN=" + req.min + " dropped " + join(dropped, " "));
      items = kept;
    }
    AG_TRY_STATUS(apply_ptx(c, items, nvcc_ptx));
  }
  canonicalize(items);
  for (const Target& t : items) {
    if (t.kind == CodeKind::sass && t.arch.suffix == Suffix::f &&
        std::find(items.begin(), items.end(), Target{{t.arch.sm}, CodeKind::sass}) != items.end()) {
      const std::string x = std::to_string(t.arch.sm);
      return make_error(ErrorKind::usage, plan.who + ": sm_" + x + " and sm_" + x +
                                              "f are the same GPU code and nvcc refuses to build both "
                                              "in one compile; keep " +
                                              x + "f (it also runs on the later members of the family) or " + x + ", not both");
    }
  }
  check_a_only(c, items);
  plan.targets = items;
  std::vector<unsigned> extra;
  for (unsigned s : tk.sass) extra.push_back(s);
  plan.runs = plan_runs(items, extra);
  plan.summary = summary_of(plan, req, "CUDA " + tk.v + " (" + req.toolkit.path + ")");
  return plan;
}

namespace {

std::string escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\\') out += "\\\\";
    else if (ch == '\n') out += "\\n";
    else out += ch;
  }
  return out;
}

}  // namespace

std::string format_plan(const Plan& p) {
  std::ostringstream o;
  std::vector<std::string> items, sass, ptx;
  for (const Target& t : p.targets) {
    items.push_back(plan_item(t));
    (t.kind == CodeKind::sass ? sass : ptx).push_back(arch_number(t.arch));
  }
  auto nums = [](const std::vector<unsigned>& v, const char* how) {
    std::vector<std::string> out;
    for (unsigned sm : v) out.push_back(std::string(how) + ":" + std::to_string(sm));
    return out;
  };
  std::vector<std::string> runs = nums(p.runs.native, "native");
  for (auto& x : nums(p.runs.jit, "jit")) runs.push_back(x);
  for (auto& x : nums(p.runs.none, "none")) runs.push_back(x);
  o << "format=1\nstatus=ok\n";
  o << "mode=" << p.mode << "\n";
  o << "items=" << join(items, ";") << "\n";
  o << "sass=" << join(sass, ";") << "\n";
  o << "ptx=" << join(ptx, ";") << "\n";
  for (const std::string& g : p.gpus) o << "gpu=" << escape(g) << "\n";
  std::vector<std::string> gpu_sms;
  for (unsigned sm : p.gpu_sms) gpu_sms.push_back(std::to_string(sm));
  o << "gpu_sms=" << join(gpu_sms, ";") << "\n";
  o << "runs=" << join(runs, ";") << "\n";
  o << "runs_text=" << p.runs.text << "\n";
  for (const std::string& w : p.warnings) o << "warning=" << escape(w) << "\n";
  for (const std::string& s : p.summary) o << "summary=" << escape(s) << "\n";
  o << "inputs=" << p.inputs.size() << "\n";
  for (const std::string& f : p.inputs) o << "input=" << escape(f) << "\n";
  return o.str();
}

std::string format_plan_error(std::string_view message) { return "format=1\nstatus=error\nerror=" + escape(message) + "\n"; }

namespace {

Result<std::vector<unsigned>> sm_list(std::string_view text, const std::string& flag) {
  std::vector<unsigned> out;
  for (const std::string& w : split_plain(text)) {
    if (w.empty() || w.size() > 4 || !std::all_of(w.begin(), w.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
      return make_error(ErrorKind::usage, flag + ": '" + w + "' is not an SM number");
    }
    out.push_back(static_cast<unsigned>(std::stoul(w)));
  }
  return out;
}

Result<Version2> cc_of(std::string_view text, const std::string& what) {
  const std::string t = trim(text);
  const std::size_t dot = t.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 2 != t.size() || dot > 3 ||
      !std::all_of(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(dot), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }) ||
      !std::isdigit(static_cast<unsigned char>(t.back()))) {
    return make_error(ErrorKind::usage, what + ": '" + t + "' is not X.Y");
  }
  return Version2{static_cast<unsigned>(std::stoul(t.substr(0, dot))), static_cast<unsigned>(t.back() - '0')};
}

std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == '\\')) {
      out += s[i + 1] == 'n' ? '\n' : '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A request file: "name=value" lines, one option each (--name=value), \n and \\ escaped.
Result<std::vector<std::string>> request_args(const std::string& path) {
  AG_TRY(std::string text, common::read_file(path, true));
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line == "exact") {
      out.push_back("--exact");
      continue;
    }
    if (line.find('=') == std::string::npos) return make_error(ErrorKind::usage, path + ": '" + line + "' is not name=value");
    out.push_back("--" + unescape(line));
  }
  return out;
}

}  // namespace

PlanCommandOutput run_plan_command(const std::vector<std::string>& given) {
  PlanRequest req;
  auto fail = [](const std::string& m) { return PlanCommandOutput{format_plan_error(m), 2}; };
  std::vector<std::string> args;
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (given[i] == "--request" && i + 1 < given.size()) {
      auto more = request_args(given[++i]);
      if (!more) return fail(more.message());
      args.insert(args.end(), more->begin(), more->end());
    } else {
      args.push_back(given[i]);
    }
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--exact") {
      req.exact = true;
      continue;
    }
    std::string v;
    if (const std::size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      v = a.substr(eq + 1);  // --name=value: the value may be empty
      a.resize(eq);
    } else if (i + 1 < args.size()) {
      v = args[++i];
    } else {
      return fail("arch plan: " + a + " needs a value");
    }
    if (a == "--policy") req.policy = v;
    else if (a == "--ptx") req.ptx = v;
    else if (a == "--min") req.min = v;
    else if (a == "--who") req.who = v;
    else if (a == "--nvcc-path") req.toolkit.path = v;
    else if (a == "--nvcc-release") {
      auto r = cc_of(v, "--nvcc-release");
      if (!r) return fail(r.message());
      req.toolkit.release = *r;
    } else if (a == "--nvcc-sass" || a == "--nvcc-ptx") {
      auto l = sm_list(v, a);
      if (!l) return fail(l.message());
      (a == "--nvcc-sass" ? req.toolkit.sass : req.toolkit.ptx) = *l;
    } else if (a == "--nvcc-variants") {
      for (const std::string& w : split_plain(v)) {
        auto t = parse_token(w + "-real");
        if (!t || t->empty() || t->front().arch.suffix == Suffix::none) {
          // the table may lack it: keep what the toolkit says
          const char last = w.empty() ? '\0' : w.back();
          if (last != 'a' && last != 'f') return fail("--nvcc-variants: '" + w + "' is not an a/f variant");
          auto n = sm_list(w.substr(0, w.size() - 1), "--nvcc-variants");
          if (!n || n->size() != 1) return fail("--nvcc-variants: '" + w + "' is not an a/f variant");
          req.toolkit.variants.push_back({n->front(), last == 'a' ? Suffix::a : Suffix::f});
        } else {
          req.toolkit.variants.push_back(t->front().arch);
        }
      }
    } else if (a == "--gpu") {
      // "NAME (X.Y)"
      const std::size_t open = v.rfind('(');
      if (open == std::string::npos || v.back() != ')') return fail("--gpu: '" + v + "' is not 'name (X.Y)'");
      auto cc = cc_of(std::string_view(v).substr(open + 1, v.size() - open - 2), "--gpu");
      if (!cc) return fail(cc.message());
      req.gpus.push_back({trim(std::string_view(v).substr(0, open)), *cc});
    } else if (a == "--gpu-source") req.gpu_source = v;
    else if (a == "--gpu-why") req.gpu_why = v;
    else if (a == "--fleet-base") req.fleet_base = v;
    else return fail("arch plan: unknown option '" + a + "'");
  }
  if (req.toolkit.release.empty()) return fail("arch plan: --nvcc-release is required (the toolkit's answers come from the caller)");
  auto plan = plan_policy(req);
  if (!plan) return fail(plan.message());
  return {format_plan(*plan), 0};
}

}  // namespace archguard
