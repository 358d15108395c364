// SPDX-License-Identifier: Apache-2.0
#include <archguard/coverage.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

namespace archguard {
namespace {

void sort_unique(std::vector<Arch>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

std::string join_names(const std::vector<Arch>& archs, CodeKind kind, std::string_view sep = ", ") {
  std::string out;
  for (const Arch& a : archs) {
    if (!out.empty()) out += sep;
    out += nvcc_name(a, kind);
  }
  return out;
}

std::string join_numbers(const std::vector<Arch>& archs) {
  std::string out;
  for (const Arch& a : archs) {
    if (!out.empty()) out += ';';
    out += arch_number(a);
  }
  return out;
}

/// A token that is only a number, with an optional a/f suffix: "90", "90a", "100f".
bool bare_number(std::string_view t) {
  std::size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) != 0) ++i;
  if (i == 0) return false;
  if (i == t.size()) return true;
  return i + 1 == t.size() && (t[i] == 'a' || t[i] == 'f');
}

std::vector<std::string_view> split_list(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ';' || text[i] == ',' || std::isspace(static_cast<unsigned char>(text[i])) != 0) {
      if (i > start) out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string unit_name(const Unit& u) {
  std::string s = u.object->path + ": fatbin " + std::to_string(u.fatbin->index);
  if (const std::string id = u.fatbin->identifier(); !id.empty()) s += " (" + id + ")";
  return s;
}

int severity(Outcome o) { return o == Outcome::fail ? 2 : o == Outcome::jit ? 1 : 0; }

}  // namespace

std::vector<Unit> units_of(const ObjectFatbins& object) {
  std::vector<Unit> units;
  bool has_main = false;
  for (const auto& fb : object.fatbins)
    if (fb.section != FatbinSection::nv_relfatbin && !fb.device_link) has_main = true;
  for (const auto& fb : object.fatbins) {
    if (fb.device_link) continue;
    if (has_main == (fb.section == FatbinSection::nv_relfatbin)) continue;
    Unit u;
    u.object = &object;
    u.fatbin = &fb;
    auto add = [&u](const Fatbin& from) {
      const auto images = from.images();
      for (std::size_t i = 0; i < images.size(); ++i) {
        u.images.push_back(images[i]);
        u.entries.push_back(&from.entries[i]);
      }
    };
    add(fb);
    if (fb.linked) {  // -rdc link: the driver may JIT-link the relocatable PTX (rule 8)
      // The relocatable SASS comes along too: it is what tells the engine that a SASS-only -rdc
      // executable without a matching image fails with 500, not 209 (rule 8, seen on the H200).
      for (const auto& rel : object.fatbins) {
        if (rel.section != FatbinSection::nv_relfatbin) continue;
        const auto images = rel.images();
        for (std::size_t i = 0; i < images.size(); ++i) {
          if (images[i].kind == CodeKind::ltoir) continue;
          u.images.push_back(images[i]);
          u.entries.push_back(&rel.entries[i]);
        }
      }
    }
    units.push_back(std::move(u));
  }
  return units;
}

CoverageSummary summarize(const ObjectFatbins& object) {
  CoverageSummary s;
  for (const auto& fb : object.fatbins) {
    if (fb.device_link) continue;
    ++s.fatbins;
    for (const auto& e : fb.entries) {
      ++s.images;
      switch (e.kind) {
        case CodeKind::sass: s.sass.push_back(e.arch); break;
        case CodeKind::ptx:
          s.ptx.push_back(e.arch);
          s.highest_ptx_isa = std::max(s.highest_ptx_isa, e.version);
          break;
        case CodeKind::ltoir: s.ltoir.push_back(e.arch); break;
      }
    }
  }
  sort_unique(s.sass);
  sort_unique(s.ptx);
  sort_unique(s.ltoir);
  return s;
}

Result<Requirement> parse_requirement(std::string_view require, std::string_view ptx) {
  Requirement req;
  if (require.find("arch=") != std::string_view::npos || require.find("-arch") != std::string_view::npos ||
      require.find("--gpu-") != std::string_view::npos) {
    // nvcc flags (-gencode arch=compute_80,code=[sm_80,compute_80], -arch=sm_90): their codes
    // say exactly which SASS and PTX they embed.
    auto targets = parse_list(require);
    if (!targets) return Error{"--require: " + targets.message()};
    for (const Target& target : *targets) {
      if (target.kind == CodeKind::sass) req.sass.push_back(target.arch);
      else if (target.kind == CodeKind::ptx) req.ptx.push_back(target.arch);
    }
  } else {
    const auto tokens = split_list(require);
    if (tokens.empty()) return Error{"--require: no architecture given"};
    const bool cmake_list = std::any_of(tokens.begin(), tokens.end(), [](std::string_view t) {
      return t.ends_with("-real") || t.ends_with("-virtual");
    });
    for (std::string_view t : tokens) {
      auto targets = parse_token(t);
      if (!targets) return Error{"--require: " + targets.message()};
      const bool sass_only = !cmake_list && bare_number(t);
      for (const Target& target : *targets) {
        if (target.kind == CodeKind::sass) req.sass.push_back(target.arch);
        else if (target.kind == CodeKind::ptx && !sass_only) req.ptx.push_back(target.arch);
      }
    }
  }
  if (ptx == "none") {
    req.ptx.clear();
  } else if (ptx == "highest") {
    req.ptx_highest = true;
  } else if (!ptx.empty()) {
    auto targets = parse_token(ptx);
    if (!targets) return Error{"--ptx: " + targets.message()};
    for (const Target& target : *targets) req.ptx.push_back(target.arch);
  }
  sort_unique(req.sass);
  sort_unique(req.ptx);
  if (req.sass.empty() && req.ptx.empty() && !req.ptx_highest)
    return Error{"--require '" + std::string(require) + "': names no SASS or PTX target"};
  return req;
}

std::string_view to_string(UnitStatus s) {
  switch (s) {
    case UnitStatus::ok: return "ok";
    case UnitStatus::compatible: return "compatible";
    case UnitStatus::specific_extra: return "specific-extra";
    case UnitStatus::missing: return "missing";
  }
  return "?";
}

bool VerifyReport::passed() const {
  return std::none_of(units.begin(), units.end(), [](const UnitFinding& u) { return u.status == UnitStatus::missing; });
}

VerifyReport verify(std::span<const ObjectFatbins> objects, const Requirement& req) {
  VerifyReport report;
  for (const ObjectFatbins& object : objects) {
    const auto units = units_of(object);
    if (!units.empty()) ++report.objects;
    for (const Unit& u : units) {
      UnitFinding f;
      f.object = object.path;
      f.fatbin = u.fatbin->index;
      f.section = u.fatbin->section;
      f.identifier = u.fatbin->identifier();
      for (const Image& im : u.images) {
        if (im.kind == CodeKind::sass) f.found_sass.push_back(im.arch);
        if (im.kind == CodeKind::ptx) f.found_ptx.push_back(im.arch);
      }
      sort_unique(f.found_sass);
      sort_unique(f.found_ptx);
      if (u.fatbin->only_specific() && !req.strict) {
        f.status = UnitStatus::specific_extra;
        f.message = unit_name(u) + " holds only architecture-specific images (" +
                    join_names(f.found_sass, CodeKind::sass) + (f.found_sass.empty() || f.found_ptx.empty() ? "" : ", ") +
                    join_names(f.found_ptx, CodeKind::ptx) + "): an extra, not judged (use --strict to judge it)";
        report.units.push_back(std::move(f));
        continue;
      }
      for (const Arch& need : req.sass) {
        if (std::find(f.found_sass.begin(), f.found_sass.end(), need) != f.found_sass.end()) continue;
        std::optional<Arch> lower;
        if (req.allow_compatible && need.suffix == Suffix::none) {
          if (const ArchRow* row = find_arch(need.sm); row != nullptr) {
            const Device dev = device_for_cc(row->cc);
            for (const Arch& have : f.found_sass)  // the highest compatible one, as the driver picks
              if (have.sm < need.sm && sass_runs_on(have, dev)) lower = have;
          }
        }
        if (lower) f.compatible.emplace_back(need, *lower);
        else f.missing_sass.push_back(need);
      }
      for (const Arch& need : req.ptx)
        if (std::find(f.found_ptx.begin(), f.found_ptx.end(), need) == f.found_ptx.end()) f.missing_ptx.push_back(need);
      unsigned highest = 0;
      for (const Arch& a : req.sass) highest = std::max(highest, a.sm);
      for (const Arch& a : req.ptx) highest = std::max(highest, a.sm);
      if (req.ptx_highest) {
        f.missing_ptx_highest = std::none_of(f.found_ptx.begin(), f.found_ptx.end(), [&](const Arch& a) {
          return a.suffix == Suffix::none && a.sm >= highest;
        });
      }
      const bool failed = !f.missing_sass.empty() || !f.missing_ptx.empty() || f.missing_ptx_highest;
      f.status = failed ? UnitStatus::missing : !f.compatible.empty() ? UnitStatus::compatible : UnitStatus::ok;
      if (failed) {
        std::vector<std::string> parts;
        std::string fix;
        if (!f.missing_sass.empty()) {
          // Split what is missing: no image at all on that GPU, or only a JIT of lower PTX.
          std::vector<Arch> bare, jit_only;
          std::optional<Arch> jit;
          for (const Arch& need : f.missing_sass) {
            std::optional<Arch> usable;  // the highest PTX the driver could JIT for that GPU
            const Device dev = device_for_cc(cc_of_sm(need.sm));
            for (const Arch& p : f.found_ptx)
              if (ptx_targets(p, dev)) usable = p;
            if (usable) {
              jit_only.push_back(need);
              if (!jit || *jit < *usable) jit = usable;
            } else {
              bare.push_back(need);
            }
          }
          const std::string found = f.found_sass.empty() ? "no SASS" : join_names(f.found_sass, CodeKind::sass);
          if (!bare.empty()) {
            parts.push_back("has no SASS for " + join_names(bare, CodeKind::sass) + " and no PTX <= " +
                            std::to_string(bare.front().sm) + " (found " + found + ")");
          }
          if (!jit_only.empty()) {
            parts.push_back("has no SASS for " + join_names(jit_only, CodeKind::sass) +
                            (bare.empty() ? " (found " + found + "; " : " (") + "only " + nvcc_name(*jit, CodeKind::ptx) +
                            " PTX would be JIT-compiled at first launch)");
          }
          fix = "add " + join_numbers(f.missing_sass) + " to ARCH_POLICY" + (bare.empty() ? "" : " or enable PTX");
        }
        if (!f.missing_ptx.empty()) {
          parts.push_back("has no PTX for " + join_names(f.missing_ptx, CodeKind::ptx) + " (found " +
                          (f.found_ptx.empty() ? std::string("no PTX") : join_names(f.found_ptx, CodeKind::ptx)) + ")");
          if (fix.empty()) fix = "enable PTX for " + join_numbers(f.missing_ptx);
        }
        if (f.missing_ptx_highest) {
          parts.push_back("has no PTX >= " + std::to_string(highest) + " for future GPUs (found " +
                          (f.found_ptx.empty() ? std::string("no PTX") : join_names(f.found_ptx, CodeKind::ptx)) + ")");
          if (fix.empty()) fix = "enable PTX for the highest architecture (" + std::to_string(highest) + ")";
        }
        f.message = unit_name(u) + " ";
        for (std::size_t i = 0; i < parts.size(); ++i) f.message += (i == 0 ? "" : " and ") + parts[i];
        f.message += "; " + fix;
      } else if (!f.compatible.empty()) {
        f.message = unit_name(u) + " uses compatible lower SASS: ";
        for (std::size_t i = 0; i < f.compatible.size(); ++i) {
          if (i != 0) f.message += ", ";
          f.message += nvcc_name(f.compatible[i].second, CodeKind::sass) + " for " + nvcc_name(f.compatible[i].first, CodeKind::sass);
        }
      }
      report.units.push_back(std::move(f));
    }
  }
  return report;
}

ObjectVerdict check_object(const ObjectFatbins& object, const Device& device, const DriverSettings& settings) {
  ObjectVerdict v;
  v.object = object.path;
  for (const Unit& u : units_of(object)) {
    UnitVerdict uv;
    uv.object = object.path;
    uv.fatbin = u.fatbin->index;
    uv.section = u.fatbin->section;
    uv.identifier = u.fatbin->identifier();
    uv.images = u.images;
    uv.verdict = select_image(uv.images, device, settings);
    if (severity(uv.verdict.outcome) > severity(v.outcome)) {
      v.outcome = uv.verdict.outcome;
      v.cuda_error = uv.verdict.cuda_error;
    }
    v.units.push_back(std::move(uv));
  }
  return v;
}

Result<std::vector<Kernel>> kernels_of(const Fatbin& fatbin, std::string_view name) {
  std::optional<Error> first_error;
  for (CodeKind want : {CodeKind::sass, CodeKind::ptx}) {
    for (const auto& e : fatbin.entries) {
      if (e.kind != want) continue;
      auto image = decompress(e, name);
      if (!image) {
        if (!first_error) first_error = image.error();
        continue;
      }
      auto kernels = list_kernels(e, *image, name);
      if (kernels) return kernels;
      if (!first_error) first_error = kernels.error();
    }
  }
  if (first_error) return *first_error;
  return std::vector<Kernel>{};
}

Result<std::vector<KernelFinding>> kernels_without_image(const ObjectFatbins& object, const ObjectVerdict& verdict) {
  std::vector<KernelFinding> out;
  for (const UnitVerdict& uv : verdict.units) {
    if (uv.verdict.outcome != Outcome::fail) continue;
    const Fatbin* fb = nullptr;
    for (const auto& f : object.fatbins)
      if (f.index == uv.fatbin) fb = &f;
    if (fb == nullptr) continue;
    auto kernels = kernels_of(*fb, object.path);
    if (!kernels) return kernels.error();
    for (auto& k : *kernels) out.push_back(KernelFinding{object.path, uv.fatbin, std::move(k), uv.verdict});
  }
  return out;
}

Result<std::vector<FleetModel>> parse_fleet_csv(std::string_view text, std::string_view name) {
  // The grammar the CMake module's fleet reader shares (one test corpus, tests/data/fleet):
  // lines end at '\n', a trailing '\r' and spaces or tabs around lines and fields are ignored,
  // empty lines and the header "name, compute_cap" are skipped, every other line is
  // "<name>, <X.Y>" split at its last comma. Anything else is an error naming the line.
  std::vector<FleetModel> models;
  std::map<std::pair<std::string, unsigned>, std::size_t> index;  // (name, cc) -> models[i]
  std::size_t line_no = 0;
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  // Control characters in messages are written as \xNN: a line cannot forge output.
  auto shown = [](std::string_view s) {
    std::string out;
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", u);
        out += buf;
      } else {
        out += c;
      }
    }
    return out;
  };
  const std::string hint = "; use the output of 'nvidia-smi --query-gpu=name,compute_cap --format=csv' (one line per GPU: name, X.Y)";
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    const std::string where = std::string(name) + ":" + std::to_string(line_no) + ": ";
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF
    line = trim(line);
    for (char c : line) {
      const auto u = static_cast<unsigned char>(c);
      if (u == 0) return Error{where + "the line holds a NUL byte; a fleet file is text"};
      if ((u < 0x20 && c != '\t') || u == 0x7f)
        return Error{where + "the line holds control character " + std::to_string(u) + "; a fleet file is text"};
    }
    if (line.empty()) continue;
    const std::size_t comma = line.rfind(',');
    if (comma == std::string_view::npos)
      return Error{where + "'" + shown(line) + "' is not 'name, compute_cap'" + hint};
    const std::string_view model = trim(line.substr(0, comma));
    const std::string_view cc_text = trim(line.substr(comma + 1));
    if (lower(model) == "name" && lower(cc_text) == "compute_cap") continue;  // a (repeated) header
    if (model.empty()) return Error{where + "'" + shown(line) + "' has no GPU name before the comma" + hint};
    // X.Y: one to three digits, a dot, one digit (what nvidia-smi prints: 7.5, 9.0, 12.1).
    const std::size_t dot = cc_text.find('.');
    bool ok = dot != std::string_view::npos && dot >= 1 && dot <= 3 && cc_text.size() == dot + 2;
    for (std::size_t i = 0; ok && i < cc_text.size(); ++i)
      if (i != dot && std::isdigit(static_cast<unsigned char>(cc_text[i])) == 0) ok = false;
    if (!ok)
      return Error{where + "compute capability '" + shown(cc_text) + "' of '" + shown(model) + "' is not X.Y" + hint};
    Version2 cc;
    cc.major = static_cast<unsigned>(std::stoul(std::string(cc_text.substr(0, dot))));
    cc.minor = static_cast<unsigned>(cc_text[dot + 1] - '0');
    // Indexed: a file of many distinct names stays linear (the fuzzer found the scan slow).
    auto [it, fresh] = index.try_emplace({std::string(model), cc.major * 10 + cc.minor}, models.size());
    if (fresh) models.push_back(FleetModel{std::string(model), cc, 1});
    else ++models[it->second].count;
  }
  if (models.empty()) return Error{std::string(name) + ": the file lists no GPU (expected nvidia-smi --query-gpu=name,compute_cap --format=csv output)"};
  return models;
}

}  // namespace archguard
