// SPDX-License-Identifier: Apache-2.0
// Queries over the architecture table compiled in from architectures.txt.
#include <archguard/arch.hpp>
#include <archguard/generated/arch_table.hpp>

#include "common/version.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <string>
#include <vector>

namespace archguard {

std::span<const ArchRow> arch_rows() { return generated::kArchRows; }
std::span<const ReleaseRow> release_rows() { return generated::kReleaseRows; }
std::span<const RenameRow> rename_rows() { return generated::kRenameRows; }

const ArchRow* find_arch(unsigned sm) {
  for (const ArchRow& row : arch_rows()) {
    if (row.sm == sm) return &row;
  }
  return nullptr;
}

const ReleaseRow* find_release(Version2 cuda) {
  for (const ReleaseRow& row : release_rows()) {
    if (row.cuda == cuda) return &row;
  }
  return nullptr;
}

const RenameRow* find_rename(unsigned old_sm) {
  for (const RenameRow& row : rename_rows()) {
    if (row.old_sm == old_sm) return &row;
  }
  return nullptr;
}

bool arch_inferred(Arch arch) { return find_arch(arch.sm) == nullptr; }

std::string inferred_arch_note(Arch arch) {
  const std::string cc = std::to_string(arch.sm / 10) + "." + std::to_string(arch.sm % 10);
  std::string near;
  const ArchRow* below = nullptr;
  const ArchRow* above = nullptr;
  for (const ArchRow& row : arch_rows()) {
    if (row.sm < arch.sm) below = &row;
    if (row.sm > arch.sm && above == nullptr) above = &row;
  }
  for (const ArchRow* row : {below, above}) {
    if (row == nullptr) continue;
    near += (near.empty() ? "" : ", ") + std::string("sm_") + std::to_string(row->sm);
  }
  std::string out = nvcc_name(arch, CodeKind::sass) + " is not in the architecture table: assuming CC " + cc +
                    " (its SASS runs on CC " + cc + " only, its PTX on CC " + cc +
                    " and later; Tegra and family unknown)";
  if (!near.empty()) out += "; nearest known: " + near;
  return out + "; if your nvcc lists it, add an 'arch|" + std::to_string(arch.sm) + "|" + cc +
         "|...' row to cmake/Modules/CudaArchGuard/architectures.txt (see docs/architectures.md)";
}

Version2 newest_known_ptx_isa() {
  Version2 best{};
  for (const ReleaseRow& row : release_rows()) best = std::max(best, row.ptx_isa);
  return best;
}

bool arch_exists(Arch arch) {
  const ArchRow* row = find_arch(arch.sm);
  if (row == nullptr) return false;
  switch (arch.suffix) {
    case Suffix::none:
      return true;
    case Suffix::a:
      return !row->a_since.empty();
    case Suffix::f:
      return !row->f_since.empty();
  }
  return false;
}

std::vector<Arch> arches_of_major(unsigned major) {
  std::vector<Arch> out;
  for (const ArchRow& row : arch_rows()) {
    if (row.cc.major != major) continue;
    out.push_back({row.sm, Suffix::none});
    if (!row.a_since.empty()) out.push_back({row.sm, Suffix::a});
    if (!row.f_since.empty()) out.push_back({row.sm, Suffix::f});
  }
  return out;
}

unsigned family_of(unsigned sm) {
  const ArchRow* row = find_arch(sm);
  return row == nullptr ? 0 : row->family;
}

std::string_view codename_of(const ArchRow& row) {
  std::string_view name = row.codename;
  return name == "-" ? std::string_view{} : name;
}

bool supported_by_release(Arch arch, Version2 cuda) {
  const ArchRow* row = find_arch(arch.sm);
  if (row == nullptr) return false;
  if (cuda < row->first_cuda) return false;
  if (!row->removed_in.empty() && cuda >= row->removed_in) return false;
  switch (arch.suffix) {
    case Suffix::none:
      return true;
    case Suffix::a:
      return !row->a_since.empty() && cuda >= row->a_since;
    case Suffix::f:
      return !row->f_since.empty() && cuda >= row->f_since;
  }
  return false;
}

Status check_release_support(Target target, Version2 cuda) {
  const Arch arch = target.arch;
  const std::string name = nvcc_name(arch, target.kind);
  const std::string rel = common::version_text(cuda);
  const ArchRow* row = find_arch(arch.sm);
  if (row == nullptr) return make_error(ErrorKind::usage, name + ": unknown architecture");
  if (!arch_exists(arch)) return make_error(ErrorKind::usage, name + ": no such variant in any CUDA release");
  if (const RenameRow* rn = find_rename(arch.sm); rn != nullptr && cuda >= rn->cuda) {
    const Arch now{rn->new_sm, arch.suffix};
    return make_error(ErrorKind::unsupported, name + ": renamed " + nvcc_name(now, target.kind) + " in CUDA " + common::version_text(rn->cuda) + "; CUDA " + rel +
                                                  " accepts only the new name: use " + arch_number(now));
  }
  if (!row->removed_in.empty() && cuda >= row->removed_in) {
    return make_error(ErrorKind::unsupported, name + ": removed in CUDA " + common::version_text(row->removed_in) + "; the last CUDA that targets it is older than " +
                                                  common::version_text(row->removed_in));
  }
  if (cuda < row->first_cuda) {
    return make_error(ErrorKind::unsupported, name + ": CUDA " + rel + " predates it; its first CUDA is " + common::version_text(row->first_cuda));
  }
  const Version2 since = arch.suffix == Suffix::a ? row->a_since : arch.suffix == Suffix::f ? row->f_since
                                                                                            : Version2{};
  if (!since.empty() && cuda < since) {
    return make_error(ErrorKind::unsupported, name + ": the '" + std::string(1, arch.suffix == Suffix::a ? 'a' : 'f') +
                                                  "' variant needs CUDA " + common::version_text(since) + " or later, this is CUDA " + rel);
  }
  return Ok{};
}

namespace {

// Parses the table's driver strings; the table is ours, so a bad one is a build-time defect
// that the table tests catch, and here it simply counts as "not recorded".
std::optional<DriverVersion> table_driver(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  Result<DriverVersion> v = parse_driver_version(text);
  if (!v) return std::nullopt;
  return *v;
}

}  // namespace

Version2 ptx_isa_for_driver(DriverVersion driver) {
  Version2 best{};
  for (const ReleaseRow& row : release_rows()) {
    std::optional<DriverVersion> min = table_driver(row.min_driver);
    if (min && driver_at_least(driver, *min) && row.ptx_isa > best) best = row.ptx_isa;
  }
  return best;
}

std::string min_driver_for_ptx_isa(Version2 ptx_isa) {
  for (const ReleaseRow& row : release_rows()) {  // ascending: the oldest release first
    if (row.ptx_isa >= ptx_isa) return table_driver(row.min_driver) ? row.min_driver : "";
  }
  return "";
}

Result<DriverVersion> parse_driver_version(std::string_view text) {
  const std::string_view original = text;
  auto bad = [&](std::string_view why) {
    return make_error(ErrorKind::usage, "driver version '" + std::string(original) + "': " + std::string(why) +
                                            "; expected MAJOR[.MINOR[.PATCH]] such as 580.65.06");
  };
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n' ||
                           text.back() == '\r')) {
    text.remove_suffix(1);
  }
  if (text.empty()) return bad("empty");
  unsigned parts[3] = {0, 0, 0};
  std::size_t n = 0;
  while (true) {
    if (n == 3) return bad("more than three numbers");
    if (text.empty() || text.front() < '0' || text.front() > '9') return bad("a number is missing");
    std::size_t len = 0;
    while (len < text.size() && text[len] >= '0' && text[len] <= '9') ++len;
    if (len > 6) return bad("a number is too long");
    unsigned value = 0;
    std::from_chars(text.data(), text.data() + len, value);
    parts[n++] = value;
    text.remove_prefix(len);
    if (text.empty()) break;
    if (text.front() != '.') return bad("unexpected character '" + std::string(1, text.front()) + "'");
    text.remove_prefix(1);
  }
  return DriverVersion{parts[0], parts[1], parts[2], static_cast<unsigned>(n)};
}

std::string format_driver_version(DriverVersion v) {
  auto two = [](unsigned x) { return x < 10 ? "0" + std::to_string(x) : std::to_string(x); };
  if (v.minor == 0 && v.patch == 0) return std::to_string(v.major);
  std::string out = std::to_string(v.major) + "." + two(v.minor);
  if (v.patch != 0) out += "." + two(v.patch);
  return out;
}

}  // namespace archguard

namespace archguard {
namespace {

// The words of a GPU name: runs of letters and digits, lower-cased, vendor and brand words dropped.
std::vector<std::string> gpu_name_words(std::string_view name) {
  std::vector<std::string> words;
  std::string w;
  auto flush = [&] {
    if (!w.empty() && w != "nvidia" && w != "tesla" && w != "geforce" && w != "quadro") words.push_back(w);
    w.clear();
  };
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0) w += static_cast<char>(std::tolower(u));
    else flush();
  }
  flush();
  return words;
}

// Whether `product` (its words) appears in `name` (its words): as consecutive words, or run
// together in fewer words ("rtx5090" for "RTX 5090").
bool holds_product(const std::vector<std::string>& name, const std::vector<std::string>& product) {
  std::string joined;
  for (const auto& p : product) joined += p;
  for (std::size_t i = 0; i < name.size(); ++i) {
    std::string run;
    for (std::size_t j = i; j < name.size() && run.size() < joined.size(); ++j) {
      run += name[j];
      if (run == joined) return true;
    }
  }
  return false;
}

}  // namespace

std::optional<Version2> cc_for_gpu_name(std::string_view name, std::string* product) {
  const auto words = gpu_name_words(name);
  std::optional<Version2> best;
  std::size_t best_len = 0;
  bool tie = false;
  std::string best_product;
  auto consider = [&](Version2 cc, std::string_view list) {
    while (!list.empty()) {
      const std::size_t comma = list.find(',');
      std::string_view p = list.substr(0, comma);
      list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
      while (!p.empty() && p.front() == ' ') p.remove_prefix(1);
      const auto pw = gpu_name_words(p);
      if (pw.empty() || !holds_product(words, pw)) continue;
      std::size_t len = 0;
      for (const auto& w : pw) len += w.size();
      if (len > best_len) {
        best = cc;
        best_len = len;
        best_product = std::string(p);
        tie = false;
      } else if (len == best_len && best && !(*best == cc)) {
        tie = true;
      }
    }
  };
  for (const ArchRow& row : arch_rows()) consider(row.cc, row.products);
  for (const GpuNameRow& row : generated::kGpuNameRows)
    if (row.sm != 0)
      if (const ArchRow* arch = find_arch(row.sm)) consider(arch->cc, row.names);
  if (!best || tie) return std::nullopt;
  if (product != nullptr) *product = best_product;
  return best;
}

}  // namespace archguard
