// SPDX-License-Identifier: Apache-2.0
// The compiler front: target choice (clamp rule), cache key, cached compile, loading with one
// evict-and-recompile retry, and the prebuilt-or-JIT fallback.
#include "jit/includes.hpp"
#include "jit/nvrtc.hpp"

#include "common/driver_env.hpp"
#include "common/fs.hpp"
#include "common/text.hpp"
#include "common/version.hpp"

#include <archguard/fatbin.hpp>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace archguard::jit {
namespace {

std::string arch_list(std::span<const unsigned> archs) {
  std::string s;
  for (unsigned a : archs) s += (s.empty() ? "" : " ") + std::to_string(a);
  return s;
}

// Options that change how NVRTC works but not what it produces: kept out of the key.
bool output_neutral(const std::string& o) {
  return o == "-pch" || o == "--pch" || o.rfind("--pch-dir", 0) == 0 || o.rfind("-pch-dir", 0) == 0 ||
         o.rfind("--pch-verbose", 0) == 0 || o.rfind("-pch-verbose", 0) == 0 ||
         o.rfind("--pch-messages", 0) == 0 || o.rfind("-pch-messages", 0) == 0;
}

bool is_arch_option(const std::string& o) {
  return o.rfind("-arch", 0) == 0 || o.rfind("--gpu-architecture", 0) == 0;
}

Status check_options(const CompileRequest& request) {
  for (const std::string& o : request.options) {
    if (is_arch_option(o)) {
      return make_error(ErrorKind::usage, request.name + ": option '" + o +
                                              "': give the architecture as the request's target, not as an nvrtc option");
    }
  }
  return Ok{};
}

std::uint32_t kind_code(CodeKind k) { return static_cast<std::uint32_t>(k); }

// A refusal that a fresh compile may cure (the cached bytes are wrong or stale for this driver).
bool reload_worthy(int cu) {
  return cu == device::kCuErrorInvalidImage || cu == device::kCuErrorNoBinaryForGpu ||
         cu == device::kCuErrorInvalidPtx || cu == device::kCuErrorUnsupportedPtxVersion;
}

}  // namespace

const std::string* Compiled::lowered(const std::string& expression) const {
  for (const auto& [e, l] : lowered_names) {
    if (e == expression) return &l;
  }
  return nullptr;
}

Result<Target> choose_target(const Device& device, std::span<const unsigned> supported, Version2 nvrtc_ptx_isa,
                             Version2 driver_ptx_isa) {
  const unsigned dev_sm = device.cc.major * 10 + device.cc.minor;
  unsigned best = 0;
  for (unsigned a : supported) {
    if (a <= dev_sm) best = std::max(best, a);
  }
  if (best == 0) {
    return make_error(ErrorKind::unsupported, "no target for a device of compute capability " + common::version_text(device.cc) +
                                                  ": this nvrtc supports " + arch_list(supported) + ", none of which is <= sm_" +
                                                  std::to_string(dev_sm) + "; use an nvrtc from an older CUDA release");
  }
  const Arch arch{best, Suffix::none};
  if (best / 10 == device.cc.major && sass_runs_on(arch, device)) return Target{arch, CodeKind::sass};
  if (!driver_ptx_isa.empty() && !nvrtc_ptx_isa.empty() && nvrtc_ptx_isa > driver_ptx_isa) {
    return make_error(ErrorKind::unsupported, "no target for a device of compute capability " + common::version_text(device.cc) + ": sass from this nvrtc (" +
                                                  arch_list(supported) + ") cannot run on it, and its ptx (isa " + common::version_text(nvrtc_ptx_isa) +
                                                  ") is newer than the driver accepts (isa " + common::version_text(driver_ptx_isa) +
                                                  "); update the driver or use an nvrtc whose ptx isa is <= " + common::version_text(driver_ptx_isa));
  }
  return Target{arch, CodeKind::ptx};
}

Result<std::string> read_text_file(const std::string& path) { return common::read_file(path); }

struct Compiler::Impl {
  NvrtcPtr nvrtc;
  std::unique_ptr<Cache> cache;
  std::string cache_problem;  ///< why the cache could not be opened, or ""
  bool pch = false;
  std::uint64_t max_header_bytes = detail::kMaxHeaderBytes;  ///< CacheOptions::max_header_bytes

  std::vector<std::string> final_options(const CompileRequest& request) const {
    std::vector<std::string> o = request.options;
    o.push_back("-arch=" + arch_option(request.target));
    if (request.target.kind == CodeKind::ltoir) o.emplace_back("-dlto");
    if (pch && std::none_of(o.begin(), o.end(), [](const std::string& x) { return x == "-pch" || x == "--pch"; })) {
      o.emplace_back("-pch");
    }
    return o;
  }
};

Compiler::~Compiler() = default;

Result<std::unique_ptr<Compiler>> Compiler::create(const CompilerOptions& options) {
  std::unique_ptr<Compiler> c(new Compiler());
  c->impl_ = std::make_unique<Impl>();
  AG_TRY(auto nv, options.nvrtc_library.empty() ? shared_nvrtc() : load_nvrtc(options.nvrtc_library));
  c->impl_->nvrtc = nv;
  c->impl_->pch = options.pch;
  if (options.use_cache) {
    CacheOptions co;
    if (options.cache) {
      co = *options.cache;
    } else if (auto env = CacheOptions::from_environment()) {
      co = *env;
    } else {
      // A bad cache setting (ARCHGUARD_CACHE_MAX_BYTES=-1, no HOME) costs the cache, never the
      // compile: the application's JIT fallback still gets its kernel.
      co.disabled = true;
      c->impl_->cache_problem = env.message() + "; compiling without the cache";
    }
    c->impl_->max_header_bytes = co.max_header_bytes;
    if (!co.disabled) {
      auto cache = Cache::open(co);
      if (cache) c->impl_->cache = std::move(*cache);
      else c->impl_->cache_problem = cache.message() + "; compiling without the cache";
    }
  }
  return c;
}

const NvrtcInfo& Compiler::nvrtc() const { return impl_->nvrtc->info(); }
Cache* Compiler::cache() const { return impl_->cache.get(); }
const std::string& Compiler::cache_problem() const { return impl_->cache_problem; }

Result<KeyInfo> Compiler::key(const CompileRequest& request) const {
  AG_TRY_STATUS(check_options(request));
  const NvrtcInfo& nv = impl_->nvrtc->info();
  const detail::IncludeScan scan = detail::scan_includes(request, impl_->max_header_bytes);
  Hasher h;
  h.add_field("format", "archguard-jit-key-1");
  h.add_field("name", request.name);
  h.add_field("source", request.source);
  nlohmann::json headers = nlohmann::json::array();
  for (const Header& hd : request.headers) {
    h.add_field("header-name", hd.name);
    h.add_field("header", hd.content);
  }
  nlohmann::json opts = nlohmann::json::array();
  for (const std::string& o : request.options) {
    if (output_neutral(o)) continue;
    h.add_field("option", o);
    opts.push_back(o);
  }
  for (const std::string& e : request.name_expressions) h.add_field("name-expression", e);
  const std::string target = nvcc_name(request.target.arch, request.target.kind == CodeKind::sass ? CodeKind::sass
                                                                                                  : CodeKind::ptx) +
                             (request.target.kind == CodeKind::ltoir ? "+lto" : "");
  h.add_field("target", target);
  h.add_field("nvrtc-version", common::version_text(nv.version));
  h.add_field("nvrtc-build", nv.build_id);
  nlohmann::json fields;
  if (request.target.kind != CodeKind::sass && request.driver_cuda) {
    h.add_field("driver", common::version_text(*request.driver_cuda));
    fields["driver_cuda"] = common::version_text(*request.driver_cuda);
  }
  for (const detail::IncludeDep& d : scan.deps) {
    h.add_field("include", d.spelling);
    h.add_field("content", d.digest.empty() ? "unresolved" : d.digest);
    headers.push_back({{"include", d.spelling},
                       {"path", d.location.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.location)},
                       {"sha256", d.digest.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.digest)}});
  }
  KeyInfo k;
  k.digest = h.finish();
  k.hex = to_hex(k.digest);
  k.cacheable = scan.complete;
  k.note = scan.note;
  fields["name"] = request.name;
  fields["source_sha256"] = to_hex(sha256(request.source));
  fields["target"] = target;
  fields["options"] = opts;
  fields["name_expressions"] = request.name_expressions;
  fields["nvrtc_version"] = common::version_text(nv.version);
  fields["nvrtc_build_id"] = nv.build_id;
  fields["nvrtc_library"] = nv.library;
  fields["headers"] = headers;
  k.fields_json = fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // names, options and include spellings are bytes: never throw
  return k;
}

Result<Compiled> Compiler::compile(const CompileRequest& request) {
  Compiled out;
  out.target = request.target;
  const std::vector<std::string> options = impl_->final_options(request);
  auto uncached = [&](std::string note) -> Result<Compiled> {
    AG_TRY_STATUS(check_options(request));
    AG_TRY(auto r, impl_->nvrtc->compile(request, options));
    out.image = std::move(r.image);
    out.lowered_names = std::move(r.lowered);
    out.log = std::move(r.log);
    out.compile_ms = r.ms;
    out.cache_note = std::move(note);
    return out;
  };
  if (!impl_->cache) return uncached(impl_->cache_problem.empty() ? "cache disabled" : impl_->cache_problem);
  auto key = this->key(request);
  if (!key) return key.error();
  if (!key->cacheable) {
    AG_TRY(auto r, impl_->nvrtc->compile(request, options));
    out.image = std::move(r.image);
    out.lowered_names = std::move(r.lowered);
    out.log = std::move(r.log);
    out.compile_ms = r.ms;
    out.cache_note = key->note;
    return out;
  }
  Nvrtc::Output fresh;
  bool compiled_fresh = false;
  std::optional<Error> compile_error;
  auto builder = [&](std::string& metadata) -> Result<CacheRecord> {
    auto r = impl_->nvrtc->compile(request, options);
    if (!r) {
      compile_error = r.error();
      return r.error();
    }
    compiled_fresh = true;
    nlohmann::json meta = nlohmann::json::parse(key->fields_json);
    meta["key"] = key->hex;
    meta["compile_options"] = options;
    meta["compile_ms"] = r->ms;
    meta["created"] = common::utc_now();
    meta["log"] = r->log;
    meta["image_bytes"] = r->image.size();
    meta["kind"] = request.target.kind == CodeKind::sass ? "cubin" : request.target.kind == CodeKind::ptx ? "ptx"
                                                                                                          : "ltoir";
    metadata = meta.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";  // the log quotes the source
    CacheRecord rec;
    rec.kind = kind_code(request.target.kind);
    rec.names = r->lowered;
    rec.image = r->image;
    fresh = std::move(*r);
    return rec;
  };
  bool built = false;
  auto hit = impl_->cache->get_or_build(key->digest, builder, &built);
  if (!hit) {
    // The compile's own failure is the answer; any other failure is the cache's (a full or
    // read-only file system, permissions, a clean-up that raced us): it degrades to an
    // uncached compile with a note, never a failed one.
    if (compile_error) return *compile_error;
    const std::string note = "not cached: " + hit.message();
    impl_->cache->note_problem(note);
    if (compiled_fresh) {
      out.image = std::move(fresh.image);
      out.lowered_names = std::move(fresh.lowered);
      out.log = std::move(fresh.log);
      out.compile_ms = fresh.ms;
      out.cache_note = note;
      return out;
    }
    return uncached(note);
  }
  if (hit->record.kind != kind_code(request.target.kind)) {
    return make_error(ErrorKind::corrupt, "cache entry " + key->hex + " holds a different kind of image than its key says");
  }
  out.key = key->hex;
  out.from_cache = !built;
  out.image = std::move(hit->record.image);
  out.lowered_names = std::move(hit->record.names);
  if (built) {
    out.log = std::move(fresh.log);
    out.compile_ms = fresh.ms;
  }
  return out;
}

Result<Target> Compiler::target_for(const Device& device, std::optional<Version2> driver_cuda) const {
  Version2 driver_isa;
  if (driver_cuda) {
    if (const ReleaseRow* rel = find_release(*driver_cuda)) driver_isa = rel->ptx_isa;
  }
  const NvrtcInfo& nv = impl_->nvrtc->info();
  return choose_target(device, nv.supported, nv.ptx_isa, driver_isa);
}

Result<LoadedKernel> Compiler::load(const device::Context& ctx, CompileRequest request, const std::string& kernel) {
  const Device dev = device_for_cc(ctx.device().cc);
  std::optional<Version2> driver_cuda;
  if (auto v = ctx.driver()->cuda_version(); v) driver_cuda = *v;
  auto target = target_for(dev, driver_cuda);
  if (!target) return rewrap(target.error(), ctx.device().name + ": " + target.message());
  request.target = *target;
  request.driver_cuda = driver_cuda;
  auto compiled = compile(request);
  if (!compiled) return compiled.error();
  const std::string tname = nvcc_name(target->arch, target->kind);
  auto mod = ctx.load_module(compiled->image);
  int reloads = 0;
  if (!mod && compiled->from_cache && reload_worthy(mod.code()) && impl_->cache) {
    // The cached image is refused: evict it and compile once more before giving up.
    const std::string first = mod.message();
    if (auto d = digest_from_hex(compiled->key)) (void)impl_->cache->evict(*d);
    compiled = compile(request);
    if (!compiled) return compiled.error();
    mod = ctx.load_module(compiled->image);
    reloads = 1;
    if (!mod) {
      return rewrap(mod.error(), request.name + ": the driver refuses the " + tname + " image even after evicting the cached one (" +
                                     first + ") and compiling again: " + mod.message());
    }
  }
  if (!mod) return rewrap(mod.error(), request.name + ": loading the " + tname + " image: " + mod.message());
  const std::string* lowered = compiled->lowered(kernel);
  auto fn = mod->function(lowered != nullptr ? *lowered : kernel);
  if (!fn) return rewrap(fn.error(), request.name + ": " + fn.message());
  LoadedKernel lk{std::move(*mod), std::move(*fn), std::move(*compiled), LaunchPath::jit, {}, reloads};
  lk.reason = "jit-compiled " + tname + " for " + ctx.device().name + " (cc " + common::version_text(ctx.device().cc) + ")" +
              (lk.compiled.from_cache ? " from the cache" : "") + (reloads ? " after evicting a refused cached image" : "");
  return lk;
}

Result<Prebuilt> Prebuilt::from_fatbin(std::span<const std::byte> bytes, const std::string& name) {
  AG_TRY(auto fatbins, Fatbin::parse_all(bytes, name));
  Prebuilt p;
  p.image = bytes;
  for (const Fatbin& f : fatbins) {
    if (f.device_link) continue;
    const std::vector<Image> im = f.images();
    p.images.insert(p.images.end(), im.begin(), im.end());
  }
  if (p.images.empty()) return make_error(ErrorKind::not_found, name + ": no images in its fatbins");
  return p;
}

Result<LoadedKernel> Compiler::load_with_fallback(const device::Context& ctx, const Prebuilt& prebuilt,
                                                  CompileRequest source, const std::string& kernel) {
  const Device dev = device_for_cc(ctx.device().cc);
  DriverSettings settings;
  if (auto v = ctx.driver()->cuda_version(); v) {
    if (const ReleaseRow* rel = find_release(*v); rel != nullptr && rel->min_driver != nullptr && *rel->min_driver) {
      if (auto d = parse_driver_version(rel->min_driver); d) settings.driver = *d;
    }
  }
  const common::DriverEnv driver_env = common::read_driver_env();
  settings.force_ptx_jit = driver_env.force_ptx_jit_on();
  settings.disable_ptx_jit = driver_env.disable_ptx_jit_on();
  const Verdict verdict = select_image(prebuilt.images, dev, settings);
  std::string why;
  if (verdict.outcome != Outcome::fail && !prebuilt.image.empty()) {
    auto mod = ctx.load_module(prebuilt.image);
    if (mod) {
      auto fn = mod->function(kernel);
      if (fn) {
        LoadedKernel lk{std::move(*mod), std::move(*fn), Compiled{}, LaunchPath::prebuilt, {}, 0};
        lk.reason = "prebuilt image: " + verdict.reason;
        return lk;
      }
      why = "the prebuilt image has no kernel " + kernel + " (" + fn.message() + ")";
    } else {
      why = "the driver refused the prebuilt image (" + mod.message() + ")";
    }
  } else {
    why = "no prebuilt image runs on " + ctx.device().name + " (cc " + common::version_text(ctx.device().cc) + "): " +
          (verdict.reason.empty() ? "no images" : verdict.reason);
  }
  auto lk = load(ctx, std::move(source), kernel);
  if (!lk) return rewrap(lk.error(), why + "; jit fallback failed: " + lk.message());
  lk->path = LaunchPath::jit;
  lk->reason = why + "; " + lk->reason;
  return lk;
}

}  // namespace archguard::jit
