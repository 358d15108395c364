// SPDX-License-Identifier: Apache-2.0
// archguard jit compile | info: compile a kernel source with NVRTC into the cache (no GPU needed,
// so build hosts can pre-warm caches), and show which NVRTC would be used.
#include "cli.hpp"
#include "jit_common.hpp"

#include "common/fd.hpp"
#include "common/fs.hpp"

#include <archguard/device.hpp>
#include <archguard/jit.hpp>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <memory>

namespace {

namespace cli = archguard::cli;
namespace jc = archguard::cli::jit_common;
using nlohmann::json;

struct CompileOptions {
  std::string source;
  std::string name;
  std::vector<std::string> archs;
  std::string cache_dir;
  std::string output;
  std::vector<std::string> includes;
  std::vector<std::string> name_expressions;
  std::vector<std::string> nvrtc_options;
  bool no_cache = false;
  bool json = false;
};

// Writes a file the user named with -o (never one of the cache's files).
archguard::Status write_output(const std::string& path, const std::vector<std::byte>& bytes) {
  archguard::common::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return archguard::errno_error(path + ": cannot create: " + archguard::common::errno_text(errno), errno);
  if (auto s = archguard::common::write_all(fd.get(), bytes, path); !s) return s.error();
  if (const int e = fd.close(); e != 0) return archguard::errno_error(path + ": close failed: " + archguard::common::errno_text(e), e);
  return archguard::Ok{};
}

int run_compile(const CompileOptions& o) {
  auto text = archguard::jit::read_text_file(o.source);
  if (!text) return jc::fail(cli::kExitUsage, text.message());
  auto compiler = jc::make_compiler(o.cache_dir, o.no_cache);
  if (!compiler) return jc::fail(cli::kExitUsage, compiler.message());
  auto targets = jc::parse_targets(o.archs, **compiler);
  if (!targets) return jc::fail(cli::kExitUsage, targets.message());
  if (!o.output.empty() && targets->size() != 1) {
    return jc::fail(cli::kExitUsage, "-o needs exactly one target, got " + std::to_string(targets->size()));
  }
  if (!(*compiler)->cache_problem().empty())
    std::cerr << "archguard: warning: cache unusable: " << cli::shown((*compiler)->cache_problem()) << "\n";
  json results = json::array();
  int rc = cli::kExitOk;
  for (const jc::TargetChoice& t : *targets) {
    archguard::jit::CompileRequest r;
    r.name = o.name.empty() ? o.source : o.name;
    r.source = *text;
    r.target = t.target;
    r.driver_cuda = t.driver_cuda;
    for (const std::string& i : o.includes) r.options.push_back("-I" + i);
    r.options.insert(r.options.end(), o.nvrtc_options.begin(), o.nvrtc_options.end());
    r.name_expressions = o.name_expressions;
    auto out = (*compiler)->compile(r);
    if (!out) {
      std::cerr << "archguard jit compile: " << cli::shown(out.message()) << "\n";
      rc = cli::kExitProblem;
      results.push_back({{"target", jc::target_name(t.target)}, {"error", out.message()}});
      continue;
    }
    if (!o.output.empty()) {
      if (auto s = write_output(o.output, out->image); !s) return jc::fail(cli::kExitUsage, s.message());
    }
    json j = jc::compiled_json(*out);
    j["source"] = o.source;
    if (!t.note.empty()) j["target_reason"] = t.note;
    if (!o.output.empty()) j["output"] = o.output;
    results.push_back(j);
    if (!o.json) {
      std::cout << cli::shown(o.source) << ": " << jc::target_name(t.target) << "  " << out->image.size() << " bytes  "
                << cli::shown(jc::cache_column(*out)) << (o.output.empty() ? "" : "  -> " + cli::shown(o.output)) << "\n";
      if (!t.note.empty()) std::cout << "  target: " << cli::shown(t.note) << "\n";
      for (const auto& [e, l] : out->lowered_names) std::cout << "  " << cli::shown(e) << " = " << cli::shown(l) << "\n";
      if (!out->log.empty()) {  // line by line: the log quotes the source, which may hold anything
        std::cout << "  log:\n";
        std::string_view log = out->log;
        while (!log.empty()) {
          const std::size_t nl = log.find('\n');
          std::cout << cli::shown(log.substr(0, nl)) << "\n";
          log = nl == std::string_view::npos ? std::string_view{} : log.substr(nl + 1);
        }
      }
    }
  }
  if (o.json) std::cout << cli::json_text(json{{"results", results}}) << "\n";
  // Cache failures worked around during the compiles (a full or read-only file system): the
  // output above is complete, this only says the cache did not keep it.
  if (compiler->get()->cache() != nullptr) {
    for (const std::string& w : (*compiler)->cache()->warnings()) std::cerr << "archguard: warning: " << cli::shown(w) << "\n";
  }
  return rc;
}

int run_info(bool as_json) {
  auto nv = archguard::jit::shared_nvrtc();
  json j;
  if (!nv) {
    j["nvrtc"] = {{"error", nv.message()}};
  } else {
    const auto& i = archguard::jit::nvrtc_info(**nv);
    std::vector<unsigned> s = i.supported;
    j["nvrtc"] = {{"library", i.library}, {"version", cli::version_or_dash(i.version)}, {"build_id", i.build_id}, {"supported", s}, {"ptx_isa", cli::version_or_dash(i.ptx_isa)}};
  }
  auto cache = archguard::jit::CacheOptions::from_environment();
  if (cache) {
    j["cache"] = {{"dir", cache->dir}, {"disabled", cache->disabled}, {"max_bytes", cache->max_bytes}, {"readonly_dirs", cache->readonly_dirs}};
  } else {
    j["cache"] = {{"error", cache.message()}};
  }
  if (as_json) {
    std::cout << cli::json_text(std::move(j)) << "\n";
  } else {
    if (!nv) {
      std::cout << "nvrtc:     " << cli::shown(nv.message()) << "\n";
    } else {
      const auto& i = archguard::jit::nvrtc_info(**nv);
      std::string archs;
      for (unsigned a : i.supported) archs += (archs.empty() ? "" : " ") + std::to_string(a);
      std::cout << "nvrtc:     " << cli::version_or_dash(i.version) << " (" << cli::shown(i.library) << ")\n"
                << "build id:  " << (i.build_id.empty() ? "-" : i.build_id) << "\n"
                << "archs:     " << archs << "\n"
                << "ptx isa:   " << cli::version_or_dash(i.ptx_isa) << "\n";
    }
    if (cache) {
      std::cout << "cache:     " << (cache->disabled ? "disabled" : cli::shown(cache->dir)) << "\n";
    } else {
      std::cout << "cache:     " << cli::shown(cache.message()) << "\n";
    }
  }
  return nv ? cli::kExitOk : cli::kExitProblem;
}

void setup(CLI::App& root, cli::Context& ctx) {
  CLI::App* jit = root.add_subcommand("jit", "Compile kernel sources at run time with NVRTC (and its cache)");
  jit->require_subcommand(1);

  auto [compile, o] = cli::add_command<CompileOptions>(
      *jit, ctx, "compile", "Compile SRC with NVRTC and store it in the cache (no GPU needed); NVRTC options go after --", run_compile);
  compile->add_option("source", o->source, "CUDA source file")->required();
  compile->add_option("nvrtc-options", o->nvrtc_options, "options passed to NVRTC (after --)");
  compile->add_option("--arch", o->archs,
                      "target: sm_90 (cubin), compute_90 (PTX), 90 (both), or 'auto' (the clamp rule for GPU 0); repeatable")
      ->required()
      ->allow_extra_args(false);
  compile->add_option("--name", o->name,
                      "program name given to NVRTC (part of the cache key; default: SRC as written). Use the "
                      "name the application passes so that a pre-warmed entry is the one it looks up");
  compile->add_option("--cache-dir", o->cache_dir, "cache directory (default: ARCHGUARD_CACHE_DIR or ~/.cache/archguard)");
  compile->add_flag("--no-cache", o->no_cache, "compile without reading or writing the cache");
  compile->add_option("-o,--output", o->output, "also write the image (cubin or PTX) to FILE");
  compile->add_option("-I,--include-path", o->includes, "include directory (NVRTC -I)")->allow_extra_args(false);
  compile->add_option("--name-expression", o->name_expressions, "template instantiation to lower, e.g. 'scale<float>'")
      ->allow_extra_args(false);
  compile->add_flag("--json", o->json, "machine-readable output");

  auto [info, as_json] = cli::add_command<bool>(*jit, ctx, "info", "Which NVRTC and cache directory the JIT would use", run_info);
  info->add_flag("--json", *as_json, "machine-readable output");
}

}  // namespace

ARCHGUARD_VERB(setup);
