// SPDX-License-Identifier: Apache-2.0
// Architecture tokens in every dialect users write, parsed into targets and formatted back.
// Every check against "does this architecture exist" goes through the table.
#include <archguard/arch.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

namespace archguard {

namespace {

// How the user spelled a token: neighbours in error messages are written the same way.
enum class Style : std::uint8_t { cmake,
                                  sass,
                                  ptx,
                                  lto,
                                  capability };

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string to_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (lower(s[i]) != prefix[i]) return false;
  }
  return true;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

char suffix_char(Suffix s) {
  switch (s) {
    case Suffix::a:
      return 'a';
    case Suffix::f:
      return 'f';
    case Suffix::none:
      break;
  }
  return '\0';
}

std::string capability_name(Arch arch) {
  std::string out = std::to_string(arch.sm / 10) + "." + std::to_string(arch.sm % 10);
  if (arch.suffix != Suffix::none) out += suffix_char(arch.suffix);
  return out;
}

std::string styled(Arch arch, Style style) {
  switch (style) {
    case Style::cmake:
      return arch_number(arch);
    case Style::sass:
      return nvcc_name(arch, CodeKind::sass);
    case Style::ptx:
      return nvcc_name(arch, CodeKind::ptx);
    case Style::lto:
      return nvcc_name(arch, CodeKind::ltoir);
    case Style::capability:
      return capability_name(arch);
  }
  return arch_number(arch);
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

// The lowest SM that has the given suffix variant (9.0 for 'a', 10.0 for 'f').
std::optional<unsigned> lowest_with(Suffix suffix) {
  for (const ArchRow& row : arch_rows()) {
    if ((suffix == Suffix::a && !row.a_since.empty()) ||
        (suffix == Suffix::f && !row.f_since.empty())) {
      return row.sm;
    }
  }
  return std::nullopt;
}

// Checks an architecture against the table; the error says why and lists the valid neighbours.
Status validate(std::string_view token, Arch arch, Style style) {
  const std::string who(token);
  const ArchRow* row = find_arch(arch.sm);
  // An architecture the table lacks is accepted (a newer nvcc knows more than the table) and
  // inferred conservatively; see arch_inferred(). Callers warn with inferred_arch_note().
  if (row == nullptr) {
    // Only a plausible capability is inferred: a major from the table's lowest to one past its
    // highest; anything else ("896" as CC 89.6) is a typo.
    const unsigned lo = arch_rows().front().cc.major, hi = arch_rows().back().cc.major + 1;
    if (arch.sm / 10 >= lo && arch.sm / 10 <= hi) return Ok{};
    std::optional<unsigned> below, above;
    for (const ArchRow& r : arch_rows()) {
      if (r.sm < arch.sm) below = r.sm;
      if (r.sm > arch.sm && !above) above = r.sm;
    }
    std::vector<std::string> near;
    if (below) near.push_back(styled({*below, Suffix::none}, style));
    if (above) near.push_back(styled({*above, Suffix::none}, style));
    return make_error(ErrorKind::usage, who + ": unknown architecture: there is no compute capability " +
                                            capability_name({arch.sm, Suffix::none}) + "; nearest valid targets: " + join(near, ", "));
  }
  if (arch_exists(arch)) return Ok{};
  const char c = suffix_char(arch.suffix);
  std::vector<std::string> valid;
  for (Arch a : arches_of_major(row->cc.major)) valid.push_back(styled(a, style));
  const std::string list = "valid " + std::to_string(row->cc.major) + ".x targets: " + join(valid, ", ");
  std::optional<unsigned> lowest = lowest_with(arch.suffix);
  if (lowest && arch.sm < *lowest) {
    return make_error(ErrorKind::usage, who + ": no '" + std::string(1, c) + "' variant below " +
                                            capability_name({*lowest, Suffix::none}) + "; " + list);
  }
  return make_error(ErrorKind::usage, who + ": " + styled({arch.sm, Suffix::none}, style) + " has no '" +
                                          std::string(1, c) + "' variant; " + list);
}

// Reads an 'a' or 'f' suffix (either case) at the start of `s`; advances `s` past it.
Suffix read_suffix(std::string_view& s) {
  if (s.empty()) return Suffix::none;
  const char c = lower(s.front());
  if (c != 'a' && c != 'f') return Suffix::none;
  s.remove_prefix(1);
  return c == 'a' ? Suffix::a : Suffix::f;
}

// Reads "<digits>[a|f]" at the start of `s`; advances `s`.
std::optional<Arch> read_arch_number(std::string_view& s) {
  std::size_t len = 0;
  while (len < s.size() && is_digit(s[len])) ++len;
  if (len < 2 || len > 3 || s[0] == '0') return std::nullopt;
  unsigned sm = 0;
  for (std::size_t i = 0; i < len; ++i) sm = sm * 10 + static_cast<unsigned>(s[i] - '0');
  s.remove_prefix(len);
  return Arch{sm, read_suffix(s)};
}

Error not_a_token(std::string_view token) {
  return make_error(ErrorKind::usage, std::string(token) +
                                          ": not an architecture token; expected e.g. 90, 90-real, 100f-virtual, sm_90a, "
                                          "compute_80, 8.6, 12.0+PTX, -arch=sm_86, -gencode arch=compute_80,code=sm_80 or a "
                                          "family name such as Hopper");
}

// nvcc names: sm_90a, compute_120f, lto_80.
Result<Arch> parse_nvcc_name(std::string_view word, CodeKind& kind) {
  std::string_view rest = word;
  Style style = Style::sass;
  if (starts_with_nocase(rest, "sm_")) {
    kind = CodeKind::sass;
    rest.remove_prefix(3);
  } else if (starts_with_nocase(rest, "compute_")) {
    kind = CodeKind::ptx;
    style = Style::ptx;
    rest.remove_prefix(8);
  } else if (starts_with_nocase(rest, "lto_")) {
    kind = CodeKind::ltoir;
    style = Style::lto;
    rest.remove_prefix(4);
  } else {
    return not_a_token(word);
  }
  std::optional<Arch> arch = read_arch_number(rest);
  if (!arch || !rest.empty()) return not_a_token(word);
  if (Status st = validate(word, *arch, style); !st) return st.error();
  return *arch;
}

// "9.0a", "12.0+PTX", "8.6".
Result<std::vector<Target>> parse_capability(std::string_view word) {
  std::string_view rest = word;
  std::size_t len = 0;
  while (len < rest.size() && is_digit(rest[len])) ++len;
  if (len == 0 || len > 2 || len + 1 >= rest.size() || rest[len] != '.' || !is_digit(rest[len + 1])) {
    return not_a_token(word);
  }
  unsigned major = 0;
  for (std::size_t i = 0; i < len; ++i) major = major * 10 + static_cast<unsigned>(rest[i] - '0');
  const unsigned minor = static_cast<unsigned>(rest[len + 1] - '0');
  rest.remove_prefix(len + 2);
  if (!rest.empty() && is_digit(rest.front())) {
    return make_error(ErrorKind::usage, std::string(word) + ": the minor version of a compute capability is one digit");
  }
  if (major == 0) return not_a_token(word);
  const Arch arch{major * 10 + minor, read_suffix(rest)};
  bool ptx = false;
  if (!rest.empty()) {
    if (to_lower(rest) != "+ptx") return not_a_token(word);
    ptx = true;
  }
  if (Status st = validate(word, arch, Style::capability); !st) return st.error();
  std::vector<Target> out{{arch, CodeKind::sass}};
  if (ptx) out.push_back({arch, CodeKind::ptx});
  return out;
}

// CMake: "90", "90-real", "90a-virtual", "100f".
Result<std::vector<Target>> parse_cmake(std::string_view word) {
  std::string_view rest = word;
  std::optional<Arch> arch = read_arch_number(rest);
  if (!arch) return not_a_token(word);
  bool sass = true, ptx = true;
  if (rest == "-real") {
    ptx = false;
  } else if (rest == "-virtual") {
    sass = false;
  } else if (!rest.empty()) {
    return not_a_token(word);
  }
  if (Status st = validate(word, *arch, Style::cmake); !st) return st.error();
  std::vector<Target> out;
  if (sass) out.push_back({*arch, CodeKind::sass});
  if (ptx) out.push_back({*arch, CodeKind::ptx});
  return out;
}

std::string first_word_lower(std::string_view codename) {
  std::size_t end = 0;
  while (end < codename.size() && std::isalpha(static_cast<unsigned char>(codename[end])) != 0) ++end;
  return to_lower(codename.substr(0, end));
}

// Family names as PyTorch's TORCH_CUDA_ARCH_LIST spells them ("Ampere", "Ampere+Tegra"),
// expanded from the table: every row whose codename starts with the name, Tegra rows only with
// "+Tegra" (or when the name has only Tegra rows, e.g. Thor), renamed rows under their new SM;
// SASS for each, plus PTX of the highest for a non-Tegra expansion.
Result<std::vector<Target>> parse_family(std::string_view word) {
  std::string name = to_lower(word);
  bool tegra = false;
  if (name.size() > 6 && name.ends_with("+tegra")) {
    tegra = true;
    name.resize(name.size() - 6);
  }
  std::vector<const ArchRow*> plain, integrated;
  std::vector<std::string> known;
  for (const ArchRow& row : arch_rows()) {
    const std::string first = first_word_lower(codename_of(row));
    if (first.empty()) continue;
    std::string display(codename_of(row).substr(0, first.size()));
    if (std::find(known.begin(), known.end(), display) == known.end()) known.push_back(display);
    if (first != name) continue;
    (row.tegra ? integrated : plain).push_back(&row);
  }
  if (plain.empty() && integrated.empty()) {
    return make_error(ErrorKind::usage, std::string(word) + ": unknown architecture family name; known: " +
                                            join(known, ", ") + " (add +Tegra for the integrated parts)");
  }
  if (tegra && integrated.empty()) {
    return make_error(ErrorKind::usage, std::string(word) + ": the " + std::string(word.substr(0, word.size() - 6)) +
                                            " family has no Tegra parts in the table");
  }
  const bool use_tegra = tegra || plain.empty();
  std::vector<Target> out;
  unsigned highest = 0;
  for (const ArchRow* row : use_tegra ? integrated : plain) {
    unsigned sm = row->sm;
    if (const RenameRow* rn = find_rename(sm)) sm = rn->new_sm;
    out.push_back({{sm, Suffix::none}, CodeKind::sass});
    highest = std::max(highest, sm);
  }
  if (!use_tegra) out.push_back({{highest, Suffix::none}, CodeKind::ptx});
  return out;
}

// One word without flags.
Result<std::vector<Target>> parse_word(std::string_view word) {
  if (word.empty()) return make_error(ErrorKind::usage, "empty architecture token");
  const std::string low = to_lower(word);
  if (low == "all" || low == "all-major" || low == "native") {
    return make_error(ErrorKind::usage, std::string(word) +
                                            ": depends on the nvcc release (all, all-major) or on the GPUs present "
                                            "(native); list explicit targets, see 'archguard arch list'");
  }
  if (starts_with_nocase(word, "sm_") || starts_with_nocase(word, "compute_") ||
      starts_with_nocase(word, "lto_")) {
    CodeKind kind{};
    AG_TRY(Arch arch, parse_nvcc_name(word, kind));
    return std::vector<Target>{{arch, kind}};
  }
  if (is_digit(word.front())) {
    if (word.find('.') != std::string_view::npos) return parse_capability(word);
    return parse_cmake(word);
  }
  if (std::isalpha(static_cast<unsigned char>(word.front())) != 0) {
    for (char c : word) {
      if (std::isalpha(static_cast<unsigned char>(c)) == 0 && c != '+') return not_a_token(word);
    }
    return parse_family(word);
  }
  return not_a_token(word);
}

// The words of a list: split at whitespace and ';', but not inside [...] or quotes.
Result<std::vector<std::string>> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::string cur;
  int depth = 0;
  char quote = '\0';
  for (char c : text) {
    if (quote != '\0') {
      if (c == quote) {
        quote = '\0';
      } else {
        cur += c;
      }
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
      continue;
    }
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) return make_error(ErrorKind::usage, std::string(text) + ": unbalanced ']'");
    const bool sep = depth == 0 && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';');
    if (sep) {
      if (!cur.empty()) words.push_back(std::move(cur));
      cur.clear();
    } else if (depth > 0 && (c == ' ' || c == '\t')) {
      continue;  // "code=[sm_80, compute_80]"
    } else {
      cur += c;
    }
  }
  if (quote != '\0') return make_error(ErrorKind::usage, std::string(text) + ": unterminated quote");
  if (depth != 0) return make_error(ErrorKind::usage, std::string(text) + ": unbalanced '['");
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> out;
  while (true) {
    const std::size_t comma = s.find(',');
    out.push_back(s.substr(0, comma));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

// Whether nvcc accepts `code` under the virtual architecture `arch` (checked against nvcc 13.0:
// PTX must repeat the arch; from an 'a' arch only the same 'a' SASS; from an 'f' arch SASS of
// the same family at or above it; from a plain arch any SASS at or above it).
bool code_compatible(Arch arch, Target code) {
  if (code.kind == CodeKind::ptx) return code.arch == arch;
  switch (arch.suffix) {
    case Suffix::a:
      return code.arch == arch;
    case Suffix::f: {
      const unsigned fam = family_of(arch.sm);
      return fam != 0 && family_of(code.arch.sm) == fam && code.arch.sm >= arch.sm;
    }
    case Suffix::none:
      return code.arch.sm >= arch.sm;
  }
  return false;
}

// nvcc's -arch value alone, or combined with -code values.
Status expand_arch_code(std::string_view arch_value, const std::optional<std::string>& code_value,
                        std::vector<Target>& out) {
  CodeKind arch_kind{};
  Result<Arch> arch = parse_nvcc_name(arch_value, arch_kind);
  if (!arch) return arch.error();
  if (arch_kind == CodeKind::ltoir) {
    return make_error(ErrorKind::usage, std::string(arch_value) + ": an lto_ name is a -code value, not an -arch value");
  }
  if (!code_value) {
    // Shorthand: -arch=sm_XY is sm_XY + compute_XY; -arch=compute_XY is the PTX alone. For a
    // suffixed sm_XYa / sm_XYf, nvcc 13.0 also embeds the plain compute_XY (seen in --dryrun:
    // "--image3=kind=ptx,sm=90" next to sm=90a), so that later GPUs can still JIT something.
    if (arch_kind == CodeKind::sass) {
      out.push_back({*arch, CodeKind::sass});
      if (arch->suffix != Suffix::none) out.push_back({{arch->sm, Suffix::none}, CodeKind::ptx});
    }
    out.push_back({*arch, CodeKind::ptx});
    return Ok{};
  }
  if (arch_kind != CodeKind::ptx) {
    return make_error(ErrorKind::usage, "arch=" + std::string(arch_value) +
                                            ": with a code list the arch must be virtual (compute_" + arch_number(*arch) + ")");
  }
  std::string_view codes = *code_value;
  if (codes.size() >= 2 && codes.front() == '[' && codes.back() == ']') {
    codes = codes.substr(1, codes.size() - 2);
  }
  if (codes.empty()) return make_error(ErrorKind::usage, "arch=" + std::string(arch_value) + ": empty code list");
  for (std::string_view c : split_commas(codes)) {
    CodeKind kind{};
    Result<Arch> code = parse_nvcc_name(c, kind);
    if (!code) return code.error();
    if (!code_compatible(*arch, {*code, kind})) {
      return make_error(ErrorKind::usage, "incompatible code generation: arch=" + std::string(arch_value) + " cannot produce " +
                                              std::string(c));
    }
    out.push_back({*code, kind});
  }
  return Ok{};
}

// A -gencode value: "arch=compute_80,code=[sm_80,compute_80]" or "arch=compute_80,code=sm_80".
Status parse_gencode_value(std::string_view value, std::vector<Target>& out) {
  const std::string who = "-gencode " + std::string(value);
  if (!starts_with_nocase(value, "arch=")) return make_error(ErrorKind::usage, who + ": expected arch=compute_XY,code=...");
  std::string_view rest = value.substr(5);
  const std::size_t code_at = rest.find(",code=");
  if (code_at == std::string_view::npos) return make_error(ErrorKind::usage, who + ": missing ',code='");
  return expand_arch_code(rest.substr(0, code_at), std::string(rest.substr(code_at + 6)), out);
}

}  // namespace

std::string arch_number(Arch arch) {
  std::string out = std::to_string(arch.sm);
  if (arch.suffix != Suffix::none) out += suffix_char(arch.suffix);
  return out;
}

std::string nvcc_name(Arch arch, CodeKind kind) {
  switch (kind) {
    case CodeKind::sass:
      return "sm_" + arch_number(arch);
    case CodeKind::ptx:
      return "compute_" + arch_number(arch);
    case CodeKind::ltoir:
      return "lto_" + arch_number(arch);
  }
  return arch_number(arch);
}

void canonicalize(std::vector<Target>& targets) {
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
}

Result<std::vector<Target>> parse_token(std::string_view token) {
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front())) != 0) token.remove_prefix(1);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())) != 0) token.remove_suffix(1);
  if (token.empty()) return make_error(ErrorKind::usage, "empty architecture token");
  // Flags and gencode clauses may span words; the list parser handles them.
  if (token.front() == '-' || starts_with_nocase(token, "arch=") ||
      token.find_first_of(" \t;,") != std::string_view::npos) {
    return parse_list(token);
  }
  Result<std::vector<Target>> r = parse_word(token);
  if (r) canonicalize(*r);
  return r;
}

Result<std::vector<Target>> parse_list(std::string_view text) {
  AG_TRY(std::vector<std::string> words, split_words(text));
  std::vector<Target> out;
  std::optional<std::string> pending_arch;
  auto flush = [&]() -> Status {
    if (!pending_arch) return Ok{};
    Status st = expand_arch_code(*pending_arch, std::nullopt, out);
    pending_arch.reset();
    return st;
  };
  const std::vector<std::string>& w = words;
  for (std::size_t i = 0; i < w.size(); ++i) {
    std::string_view word = w[i];
    if (word.front() == '-' && word.size() > 1 && !is_digit(word[1])) {
      std::string_view name = word;
      std::optional<std::string> value;
      if (const std::size_t eq = word.find('='); eq != std::string_view::npos) {
        name = word.substr(0, eq);
        value = std::string(word.substr(eq + 1));
      }
      const bool is_gencode = name == "-gencode" || name == "--generate-code";
      const bool is_arch = name == "-arch" || name == "--gpu-architecture";
      const bool is_code = name == "-code" || name == "--gpu-code";
      if (!is_gencode && !is_arch && !is_code) {
        return make_error(ErrorKind::usage, std::string(word) +
                                                ": not an architecture flag; expected -gencode, --generate-code, -arch, "
                                                "--gpu-architecture, -code or --gpu-code");
      }
      if (!value) {
        if (i + 1 >= w.size()) return make_error(ErrorKind::usage, std::string(word) + ": missing value");
        value = w[++i];
      }
      if (value->empty()) return make_error(ErrorKind::usage, std::string(word) + ": empty value");
      if (is_gencode) {
        if (Status st = flush(); !st) return st.error();
        if (Status st = parse_gencode_value(*value, out); !st) return st.error();
      } else if (is_arch) {
        if (Status st = flush(); !st) return st.error();
        const std::string low = to_lower(*value);
        if (low == "all" || low == "all-major" || low == "native") {
          return parse_word(*value).error();
        }
        pending_arch = *value;
      } else {
        if (!pending_arch) return make_error(ErrorKind::usage, std::string(word) + ": -code needs a preceding -arch=compute_XY");
        if (Status st = expand_arch_code(*pending_arch, *value, out); !st) return st.error();
        pending_arch.reset();
      }
      continue;
    }
    if (Status st = flush(); !st) return st.error();
    if (starts_with_nocase(word, "arch=")) {
      if (Status st = parse_gencode_value(word, out); !st) return st.error();
      continue;
    }
    for (std::string_view piece : split_commas(word)) {  // TensorFlow writes "sm_80,compute_90"
      if (piece.empty()) continue;
      AG_TRY(std::vector<Target> r, parse_word(piece));
      out.insert(out.end(), r.begin(), r.end());
    }
  }
  if (Status st = flush(); !st) return st.error();
  if (out.empty()) return make_error(ErrorKind::usage, "no architecture targets in '" + std::string(text) + "'");
  canonicalize(out);
  return out;
}

Result<Dialect> parse_dialect(std::string_view name) {
  const std::string low = to_lower(name);
  if (low == "cmake") return Dialect::cmake;
  if (low == "gencode" || low == "nvcc") return Dialect::nvcc;
  if (low == "torch" || low == "pytorch") return Dialect::torch;
  if (low == "tf" || low == "tensorflow") return Dialect::tf;
  if (low == "codes") return Dialect::codes;
  return make_error(ErrorKind::usage, "unknown format '" + std::string(name) + "'; use cmake, gencode, torch, tf or codes");
}

namespace {

struct Group {
  bool sass = false, ptx = false, lto = false;
};

std::map<Arch, Group> group_by_arch(std::span<const Target> targets) {
  std::map<Arch, Group> groups;
  for (const Target& t : targets) {
    Group& g = groups[t.arch];
    switch (t.kind) {
      case CodeKind::sass:
        g.sass = true;
        break;
      case CodeKind::ptx:
        g.ptx = true;
        break;
      case CodeKind::ltoir:
        g.lto = true;
        break;
    }
  }
  return groups;
}

}  // namespace

std::string format_targets(std::span<const Target> targets, Dialect dialect) {
  std::vector<std::string> items;
  for (const auto& [arch, g] : group_by_arch(targets)) {
    switch (dialect) {
      case Dialect::cmake:
        if (g.sass && g.ptx) {
          items.push_back(arch_number(arch));
        } else if (g.sass) {
          items.push_back(arch_number(arch) + "-real");
        } else if (g.ptx) {
          items.push_back(arch_number(arch) + "-virtual");
        }
        if (g.lto) items.push_back(nvcc_name(arch, CodeKind::ltoir));  // no CMake spelling
        break;
      case Dialect::nvcc: {
        std::vector<std::string> codes;
        if (g.sass) codes.push_back(nvcc_name(arch, CodeKind::sass));
        if (g.ptx) codes.push_back(nvcc_name(arch, CodeKind::ptx));
        if (g.lto) codes.push_back(nvcc_name(arch, CodeKind::ltoir));
        std::string code = codes.size() == 1 ? codes.front() : "[" + join(codes, ",") + "]";
        items.push_back("-gencode=arch=" + nvcc_name(arch, CodeKind::ptx) + ",code=" + code);
        break;
      }
      case Dialect::torch:
        if (g.sass || g.ptx) items.push_back(capability_name(arch) + (g.ptx ? "+PTX" : ""));
        break;
      case Dialect::tf:
        if (g.sass) items.push_back(nvcc_name(arch, CodeKind::sass));
        if (g.ptx) items.push_back(nvcc_name(arch, CodeKind::ptx));
        break;
      case Dialect::codes:
        if (g.sass) items.push_back(nvcc_name(arch, CodeKind::sass));
        if (g.ptx) items.push_back(nvcc_name(arch, CodeKind::ptx));
        if (g.lto) items.push_back(nvcc_name(arch, CodeKind::ltoir));
        break;
    }
  }
  switch (dialect) {
    case Dialect::cmake:
    case Dialect::torch:
    case Dialect::codes:
      return join(items, ";");
    case Dialect::nvcc:
      return join(items, " ");
    case Dialect::tf:
      return join(items, ",");
  }
  return join(items, ";");
}

Status check_expressible(std::span<const Target> targets, Dialect dialect) {
  for (const auto& [arch, g] : group_by_arch(targets)) {
    if (g.lto && dialect != Dialect::nvcc && dialect != Dialect::codes) {
      return make_error(ErrorKind::usage, nvcc_name(arch, CodeKind::ltoir) +
                                              ": LTO-IR has no spelling in this format; use the gencode format");
    }
    if (dialect == Dialect::torch && g.ptx && !g.sass) {
      return make_error(ErrorKind::usage, nvcc_name(arch, CodeKind::ptx) + ": PyTorch's arch list cannot ask for PTX without SASS (" +
                                              capability_name(arch) + "+PTX adds " + nvcc_name(arch, CodeKind::sass) + ")");
    }
  }
  return Ok{};
}

Result<std::string> normalize_list(std::string_view text, std::string_view format) {
  AG_TRY(const Dialect dialect, parse_dialect(format));
  AG_TRY(const std::vector<Target> targets, parse_list(text));
  AG_TRY_STATUS(check_expressible(targets, dialect));
  return format_targets(targets, dialect);
}

}  // namespace archguard
