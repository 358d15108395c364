// SPDX-License-Identifier: Apache-2.0
// archguard cache ls | stat | verify | clear | prewarm: inspect and maintain the JIT cache.
#include "cli.hpp"
#include "jit_common.hpp"

#include <archguard/cache.hpp>
#include <archguard/results_cache.hpp>
#include <archguard/jit.hpp>

#include <nlohmann/json.hpp>

#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>

namespace {

namespace cli = archguard::cli;
namespace jc = archguard::cli::jit_common;
using nlohmann::json;

struct Common {
  std::string cache_dir;
  bool json = false;
  bool results = false;  ///< the results cache (<dir>/results) instead of the JIT cache
};

archguard::Result<std::unique_ptr<archguard::jit::Cache>> open_cache(const Common& c) {
  if (c.results) {  // as archguard::ResultsCache opens it
    AG_TRY(auto o, archguard::ResultsCache::options(c.cache_dir));
    if (!c.cache_dir.empty()) o.disabled = false;
    if (o.disabled)
      return archguard::make_error(archguard::ErrorKind::usage,
                                   "the results cache is off (ARCHGUARD_CACHE_DISABLE, or a bound of 0); pass --cache-dir");
    return archguard::jit::Cache::open(o);
  }
  AG_TRY(auto o, archguard::jit::CacheOptions::from_environment());
  if (!c.cache_dir.empty()) {
    o.dir = c.cache_dir;
    o.disabled = false;
  }
  if (o.disabled) return archguard::make_error(archguard::ErrorKind::usage, "the cache is disabled (ARCHGUARD_CACHE_DISABLE); pass --cache-dir");
  return archguard::jit::Cache::open(o);
}

void print_warnings(const archguard::jit::Cache& cache) {
  for (const std::string& w : cache.warnings()) std::cerr << "archguard: warning: " << cli::shown(w) << "\n";
}

std::string when(std::int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

json parsed_metadata(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

int run_ls(const Common& c, archguard::jit::Cache& cache) {
  auto entries = cache.list();
  if (!entries) return jc::fail(cli::kExitUsage, entries.message());
  if (c.json) {
    json arr = json::array();
    for (const auto& e : *entries) {
      arr.push_back({{"key", e.key}, {"layer", e.layer}, {"readonly", e.readonly}, {"bytes", e.bytes}, {"last_used", e.last_used}, {"metadata", parsed_metadata(e.metadata)}});
    }
    std::cout << cli::json_text(json{{"dir", cache.dir()}, {"entries", arr}}) << "\n";
  } else {
    std::cout << std::left << std::setw(18) << "key" << std::setw(12) << "target" << std::setw(10) << "bytes"
              << std::setw(18) << "last used (utc)"
              << "source\n";
    for (const auto& e : *entries) {
      const json m = parsed_metadata(e.metadata);
      std::cout << std::setw(18) << e.key.substr(0, 16) << std::setw(12) << cli::shown(m.value("target", "?")) << std::setw(10)
                << e.bytes << std::setw(18) << when(e.last_used) << cli::shown(m.value("name", "?"))
                << (e.readonly ? "  (read-only layer)" : "") << "\n";
    }
  }
  print_warnings(cache);
  return cli::kExitOk;
}

int run_stat(const Common& c, archguard::jit::Cache& cache) {
  auto s = cache.stats();
  if (!s) return jc::fail(cli::kExitUsage, s.message());
  if (c.json) {
    std::cout << cli::json_text(json{{"dir", s->dir}, {"entries", s->entries}, {"bytes", s->bytes}, {"max_bytes", s->max_bytes}, {"temp_files", s->temp_files}, {"lock_files", s->lock_files}, {"readonly_dirs", s->readonly_dirs}})
              << "\n";
  } else {
    std::cout << "dir:         " << cli::shown(s->dir) << "\n"
              << "entries:     " << s->entries << "\n"
              << "bytes:       " << s->bytes << " of " << s->max_bytes << "\n"
              << "temp files:  " << s->temp_files << "\n"
              << "lock files:  " << s->lock_files << "\n";
    for (const std::string& r : s->readonly_dirs) std::cout << "read-only:   " << cli::shown(r) << "\n";
  }
  print_warnings(cache);
  return cli::kExitOk;
}

int run_verify(const Common& c, archguard::jit::Cache& cache, bool evict) {
  auto v = cache.verify(evict);
  if (!v) return jc::fail(cli::kExitUsage, v.message());
  std::size_t bad = 0;
  json arr = json::array();
  for (const auto& e : *v) {
    if (e.problem.empty()) continue;
    ++bad;
    arr.push_back({{"key", e.key}, {"layer", e.layer}, {"problem", e.problem}, {"evicted", evict && !e.readonly}});
    if (!c.json) std::cout << "bad: " << cli::shown(e.problem) << (evict && !e.readonly ? " (evicted)" : "") << "\n";
  }
  if (c.json) {
    std::cout << cli::json_text(json{{"checked", v->size()}, {"bad", arr}}) << "\n";
  } else {
    std::cout << v->size() << " entries checked, " << bad << " bad\n";
  }
  print_warnings(cache);
  return bad == 0 ? cli::kExitOk : cli::kExitProblem;
}

int run_clear(const Common& c, archguard::jit::Cache& cache) {
  auto before = cache.stats();
  if (auto s = cache.clear(); !s) return jc::fail(cli::kExitUsage, s.message());
  const std::uint64_t n = before ? before->entries : 0;
  if (c.json) {
    std::cout << cli::json_text(json{{"dir", cache.dir()}, {"removed", n}}) << "\n";
  } else {
    std::cout << "removed " << n << " entries from " << cli::shown(cache.dir()) << "\n";
  }
  return cli::kExitOk;
}

struct Prewarm {
  std::vector<std::string> sources;
  std::vector<std::string> archs;
  std::vector<std::string> includes;
  std::vector<std::string> nvrtc_options;
};

int run_prewarm(const Common& c, const Prewarm& p) {
  auto compiler = jc::make_compiler(c.cache_dir, false);
  if (!compiler) return jc::fail(cli::kExitUsage, compiler.message());
  if ((*compiler)->cache() == nullptr) return jc::fail(cli::kExitUsage, "the cache is disabled; pass --cache-dir");
  auto targets = jc::parse_targets(p.archs, **compiler);
  if (!targets) return jc::fail(cli::kExitUsage, targets.message());
  int rc = cli::kExitOk;
  json arr = json::array();
  std::size_t built = 0, hits = 0;
  for (const std::string& src : p.sources) {
    auto text = archguard::jit::read_text_file(src);
    if (!text) return jc::fail(cli::kExitUsage, text.message());
    for (const jc::TargetChoice& t : *targets) {
      archguard::jit::CompileRequest r;
      r.name = src;
      r.source = *text;
      r.target = t.target;
      r.driver_cuda = t.driver_cuda;
      for (const std::string& i : p.includes) r.options.push_back("-I" + i);
      r.options.insert(r.options.end(), p.nvrtc_options.begin(), p.nvrtc_options.end());
      auto out = (*compiler)->compile(r);
      if (!out) {
        std::cerr << "archguard cache prewarm: " << cli::shown(out.message()) << "\n";
        arr.push_back({{"source", src}, {"target", jc::target_name(t.target)}, {"error", out.message()}});
        rc = cli::kExitProblem;
        continue;
      }
      (out->from_cache ? hits : built) += 1;
      json j = jc::compiled_json(*out);
      j["source"] = src;
      arr.push_back(j);
      if (!c.json) std::cout << cli::shown(src) << ": " << jc::target_name(t.target) << "  " << jc::cache_column(*out) << "\n";
    }
  }
  if (c.json) {
    std::cout << cli::json_text(json{{"built", built}, {"hits", hits}, {"results", arr}}) << "\n";
  } else {
    std::cout << built << " compiled, " << hits << " already cached\n";
  }
  print_warnings(*(*compiler)->cache());
  return rc;
}

void setup(CLI::App& root, cli::Context& ctx) {
  CLI::App* cache = root.add_subcommand("cache", "Inspect and maintain the JIT kernel cache");
  cache->require_subcommand(1);
  // Every subcommand takes the options of Common first.
  auto add = [cache, &ctx](const char* name, const char* description, auto run) {
    auto [sub, c] = cli::add_command<Common>(*cache, ctx, name, description, run);
    sub->add_option("--cache-dir", c->cache_dir, "cache directory (default: ARCHGUARD_CACHE_DIR or ~/.cache/archguard)");
    sub->add_flag("--json", c->json, "machine-readable output");
    sub->add_flag("--results", c->results,
                  "the results cache (kernel lists check, doctor and verify decoded) instead of the JIT cache");
    return sub;
  };
  // ... and all but prewarm work on the cache it names: opened here, a usage error when it cannot be.
  auto on_cache = [](auto run) {
    return [run](const Common& c) {
      auto opened = open_cache(c);
      return opened ? run(c, **opened) : jc::fail(cli::kExitUsage, opened.message());
    };
  };
  add("ls", "List the entries (key, target, size, last use, source)", on_cache(run_ls));
  add("stat", "Size, entry count and bound of the cache", on_cache(run_stat));
  auto evict = std::make_shared<bool>(false);
  add("verify", "Check every entry's checksum and format (exit 1 when one is bad)",
      on_cache([evict](const Common& c, archguard::jit::Cache& opened) { return run_verify(c, opened, *evict); }))
      ->add_flag("--evict", *evict, "remove bad entries from the writable layer");
  add("clear", "Remove every entry of the writable layer", on_cache(run_clear));
  auto pwo = std::make_shared<Prewarm>();
  CLI::App* pw_cmd = add("prewarm", "Compile sources for the given targets into the cache (no GPU needed); NVRTC options go after --",
                         [pwo](const Common& c) { return run_prewarm(c, *pwo); });
  pw_cmd->add_option("--arch", pwo->archs, "target: sm_90, compute_90, 90, or 'auto'; repeatable")
      ->required()
      ->allow_extra_args(false);
  pw_cmd->add_option("-I,--include-path", pwo->includes, "include directory (NVRTC -I)")->allow_extra_args(false);
  pw_cmd->add_option("sources", pwo->sources, "CUDA source files")->required();
  pw_cmd->add_option("--nvrtc-option", pwo->nvrtc_options, "option passed to NVRTC (repeatable)")
      ->allow_extra_args(false);
}

}  // namespace

ARCHGUARD_VERB(setup);
