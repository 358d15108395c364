// SPDX-License-Identifier: Apache-2.0
// Benchmarks of the jit layer against raw NVRTC measured in the same run (docs/benchmarks-jit.md):
//   cold   a cache miss through archguard::jit vs nvrtcCreateProgram/Compile/GetCUBIN directly
//   heavy  the same with five <cuda/std/...> headers (a large include tree to scan and hash)
//   warm   a cache hit to a cubin in memory (and the key computation alone)
//   pch    a group of kernels sharing heavy headers, without and with NVRTC's -pch, in-process
//   gpu    (--gpu) a cache hit to a loaded module vs cuModuleLoadData of the same bytes;
//          exits 77 without a driver or GPU
// Usage: bench_jit [--reps N] [--gpu] [--json FILE] [--cccl DIR]
#include <archguard/device.hpp>
#include <archguard/jit.hpp>

#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace archguard;
using Clock = std::chrono::steady_clock;

// CPU time of the calling thread: NVRTC compiles on the calling thread, and CPU time is far less
// sensitive than wall time to other work on a shared host (it leaves out fsync waits, which the
// store row measures on its own).
double cpu_ms() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct Stats {
  double median = 0, p95 = 0, min = 0;
};

Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  s.p95 = v[std::min(v.size() - 1, static_cast<std::size_t>(static_cast<double>(v.size()) * 0.95))];
  s.min = v.front();
  return s;
}

// A ~50-line templated kernel: the "typical small kernel" of the NVRTC reference timings.
std::string templated_kernel(int variant) {
  return R"(template <typename T, int TILE>
struct Tile {
  T v[TILE];
  __device__ void load(const T* p, int n, int base) {
#pragma unroll
    for (int i = 0; i < TILE; ++i) v[i] = base + i < n ? p[base + i] : T(0);
  }
  __device__ T sum() const {
    T s = T(0);
#pragma unroll
    for (int i = 0; i < TILE; ++i) s += v[i];
    return s;
  }
};

template <typename T>
__device__ T warp_sum(T x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
  return x;
}

template <typename T, int TILE>
__global__ void reduce(const T* in, T* out, int n) {
  __shared__ T partial[32];
  Tile<T, TILE> t;
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * TILE;
  t.load(in, n, base);
  T s = warp_sum(t.sum());
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    T w = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : T(0);
    w = warp_sum(w);
    if (threadIdx.x == 0) atomicAdd(out, w);
  }
}

template <typename T>
__global__ void axpby(T a, const T* x, T b, T* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    y[i] = a * x[i] + b * y[i];
  }
}

template __global__ void reduce<float, 4>(const float*, float*, int);
template __global__ void reduce<int, 8>(const int*, int*, int);
template __global__ void axpby<float>(float, const float*, float, float*, int);
template __global__ void axpby<double>(double, const double*, double, double*, int);
// variant )" +
         std::to_string(variant) + "\n";
}

std::string heavy_kernel(int variant) {
  return "#include <cuda/std/cstdint>\n#include <cuda/std/type_traits>\n#include <cuda/std/limits>\n"
         "#include <cuda/std/array>\n#include <cuda/std/tuple>\n" +
         std::string("extern \"C\" __global__ void heavy") + std::to_string(variant) +
         "(cuda::std::int32_t* p) {\n  cuda::std::array<cuda::std::int32_t, 4> a{1, 2, 3, 4};\n"
         "  auto t = cuda::std::make_tuple(a[threadIdx.x % 4], cuda::std::numeric_limits<cuda::std::int16_t>::max());\n"
         "  p[threadIdx.x] = cuda::std::get<0>(t) + cuda::std::get<1>(t) + " +
         std::to_string(variant) + ";\n}\n";
}

// Raw NVRTC, for the anchor: exactly what a caller without archguard would do.
struct RawNvrtc {
  void* h = nullptr;
  int (*create)(void**, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(void*, int, const char* const*) = nullptr;
  int (*cubin_size)(void*, std::size_t*) = nullptr;
  int (*cubin)(void*, char*) = nullptr;
  int (*destroy)(void**) = nullptr;

  template <class F>
  void sym(F& f, const char* n) {
    void* p = ::dlsym(h, n);
    std::memcpy(&f, &p, sizeof f);
  }
  bool open(const std::string& lib) {
    h = ::dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (h == nullptr) return false;
    sym(create, "nvrtcCreateProgram");
    sym(compile, "nvrtcCompileProgram");
    sym(cubin_size, "nvrtcGetCUBINSize");
    sym(cubin, "nvrtcGetCUBIN");
    sym(destroy, "nvrtcDestroyProgram");
    return create && compile && cubin_size && cubin && destroy;
  }
  // Returns the cubin size, 0 on failure.
  std::size_t run(const std::string& src, const std::vector<std::string>& options) const {
    void* p = nullptr;
    if (create(&p, src.c_str(), "bench.cu", 0, nullptr, nullptr) != 0) return 0;
    std::vector<const char*> o;
    for (const auto& s : options) o.push_back(s.c_str());
    std::size_t n = 0;
    if (compile(p, static_cast<int>(o.size()), o.data()) == 0) {
      cubin_size(p, &n);
      std::vector<char> b(n);
      cubin(p, b.data());
    }
    destroy(&p);
    return n;
  }
};

struct TempDir {
  std::string path;
  TempDir() {
    std::string t = std::filesystem::temp_directory_path().string() + "/archguard-bench-XXXXXX";
    if (::mkdtemp(t.data()) != nullptr) path = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::unique_ptr<jit::Compiler> make_compiler(const std::string& cache_dir, bool pch = false, bool fsync = true) {
  jit::CompilerOptions o;
  jit::CacheOptions c;
  c.dir = cache_dir;
  c.disabled = cache_dir.empty();
  c.fsync = fsync;
  o.cache = c;
  o.pch = pch;
  auto r = jit::Compiler::create(o);
  if (!r) {
    std::fprintf(stderr, "bench_jit: %s\n", r.message().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

jit::CompileRequest request(std::string src, std::vector<std::string> options) {
  jit::CompileRequest r;
  r.name = "bench.cu";
  r.source = std::move(src);
  r.options = std::move(options);
  r.target = Target{{90, Suffix::none}, CodeKind::sass};
  return r;
}

void print_row(const char* what, const Stats& s, const char* unit = "ms") {
  std::printf("  %-44s median %9.3f %s   p95 %9.3f   min %9.3f\n", what, s.median, unit, s.p95, s.min);
}

nlohmann::json js(const Stats& s) { return {{"median", s.median}, {"p95", s.p95}, {"min", s.min}}; }

// Cold compiles, interleaved: raw NVRTC, archguard (fresh cache dir each rep: a miss that also
// stores), and archguard with ARCHGUARD_CACHE_FSYNC=0.
nlohmann::json bench_cold(const char* label, const std::function<std::string(int)>& source,
                          const std::vector<std::string>& options, int reps, const RawNvrtc& raw) {
  std::vector<double> ours, nosync, anchor, cpu_ours, cpu_anchor;
  std::vector<std::string> raw_opts = options;
  raw_opts.emplace_back("-arch=sm_90");
  double cpu = 0;
  auto ours_once = [&](const std::string& src, bool fsync) {
    TempDir d;
    auto c = make_compiler(d.path + "/cache", false, fsync);
    const double c0 = cpu_ms();
    const auto t0 = Clock::now();
    auto r = c->compile(request(src, options));
    const double ms = ms_since(t0);
    cpu = cpu_ms() - c0;
    if (!r || r->from_cache) {
      std::fprintf(stderr, "bench_jit: %s: %s\n", label, r ? "unexpected hit" : r.message().c_str());
      std::exit(1);
    }
    return ms;
  };
  for (int i = 0; i < reps + 1; ++i) {
    const std::string src = source(i);
    const double c0 = cpu_ms();
    auto t0 = Clock::now();
    if (raw.run(src, raw_opts) == 0) {
      std::fprintf(stderr, "bench_jit: raw nvrtc failed on %s\n", label);
      std::exit(1);
    }
    const double a = ms_since(t0);
    const double ca = cpu_ms() - c0;
    const double b = ours_once(src, true);
    const double cb = cpu;
    const double c = ours_once(src, false);
    if (i == 0) continue;  // warm-up: loads libraries, fills NVRTC's builtin caches
    cpu_anchor.push_back(ca);
    cpu_ours.push_back(cb);
    anchor.push_back(a);
    ours.push_back(b);
    nosync.push_back(c);
  }
  const Stats sa = stats_of(anchor), so = stats_of(ours), sn = stats_of(nosync);
  std::printf("%s (n=%d, interleaved)\n", label, reps);
  print_row("raw nvrtc (anchor)", sa);
  print_row("archguard::jit cold (miss + store)", so);
  print_row("  the same, ARCHGUARD_CACHE_FSYNC=0", sn);
  const double ratio = so.median / sa.median, ratio_ns = sn.median / sa.median;
  const Stats ca = stats_of(cpu_anchor), co = stats_of(cpu_ours);
  print_row("raw nvrtc, thread cpu time", ca);
  print_row("archguard::jit cold, thread cpu time", co);
  const double ratio_cpu = co.median / ca.median;
  std::printf("  overhead: wall %+.1f%% of the median (%+.1f%% without fsync), cpu %+.1f%%\n", (ratio - 1.0) * 100.0,
              (ratio_ns - 1.0) * 100.0, (ratio_cpu - 1.0) * 100.0);
  return {{"raw", js(sa)}, {"archguard", js(so)}, {"archguard_nofsync", js(sn)}, {"ratio", ratio}, {"ratio_nofsync", ratio_ns}, {"raw_cpu", js(ca)}, {"archguard_cpu", js(co)}, {"ratio_cpu", ratio_cpu}};
}

// What a store costs by itself (the part of a cold compile that is not NVRTC).
nlohmann::json bench_store(int reps, std::size_t bytes) {
  nlohmann::json out;
  for (bool fsync : {true, false}) {
    TempDir d;
    jit::CacheOptions o;
    o.dir = d.path + "/cache";
    o.fsync = fsync;
    auto c = jit::Cache::open(o);
    if (!c) std::exit(1);
    jit::CacheRecord r;
    r.image.assign(bytes, std::byte{0x5a});
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = Clock::now();
      if (!(*c)->store(jit::sha256("store " + std::to_string(i)), r, "{}")) std::exit(1);
      t.push_back(ms_since(t0));
    }
    const Stats s = stats_of(t);
    print_row(fsync ? "store of that cubin (tmp, fsync, rename)" : "store without fsync", s);
    out[fsync ? "fsync" : "nofsync"] = js(s);
  }
  return out;
}

nlohmann::json bench_warm(int reps) {
  TempDir d;
  auto c = make_compiler(d.path + "/cache");
  const auto req = request(templated_kernel(0), {"-no-cache"});
  auto first = c->compile(req);
  if (!first) {
    std::fprintf(stderr, "bench_jit: %s\n", first.message().c_str());
    std::exit(1);
  }
  std::vector<double> hit, key;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    auto r = c->compile(req);
    hit.push_back(ms_since(t0));
    if (!r || !r->from_cache) std::exit(1);
    t0 = Clock::now();
    auto k = c->key(req);
    key.push_back(ms_since(t0));
  }
  const Stats sh = stats_of(hit), sk = stats_of(key);
  std::printf("warm cache, %zu-byte cubin (n=%d)\n", first->image.size(), reps);
  print_row("cache hit to a cubin in memory", sh);
  print_row("  of which the key (scan + sha-256)", sk);
  nlohmann::json store = bench_store(std::max(reps / 10, 20), first->image.size());
  return {{"hit", js(sh)}, {"key", js(sk)}, {"store", store}, {"cubin_bytes", first->image.size()}};
}

nlohmann::json bench_warm_heavy(int reps, const std::vector<std::string>& options) {
  TempDir d;
  auto c = make_compiler(d.path + "/cache");
  const auto req = request(heavy_kernel(0), options);
  auto first = c->compile(req);
  if (!first) std::exit(1);
  auto k = c->key(req);
  std::size_t headers = 0;
  if (k) headers = static_cast<std::size_t>(nlohmann::json::parse(k->fields_json)["headers"].size());
  std::vector<double> hit;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    auto r = c->compile(req);
    hit.push_back(ms_since(t0));
    if (!r || !r->from_cache) std::exit(1);
  }
  const Stats sh = stats_of(hit);
  std::printf("warm cache, five <cuda/std> headers (%zu include-tree entries scanned, n=%d)\n", headers, reps);
  print_row("cache hit to a cubin in memory", sh);
  return {{"hit", js(sh)}, {"headers", headers}};
}

nlohmann::json bench_pch(const std::vector<std::string>& options, int kernels) {
  auto run_group = [&](bool pch, int offset) {
    auto c = make_compiler("", pch);
    std::vector<double> t;
    for (int k = 0; k < kernels; ++k) {
      auto t0 = Clock::now();
      auto r = c->compile(request(heavy_kernel(offset + k), options));
      t.push_back(ms_since(t0));
      if (!r) {
        std::fprintf(stderr, "bench_jit: pch group: %s\n", r.message().c_str());
        std::exit(1);
      }
    }
    return t;
  };
  const auto without = run_group(false, 100);
  const auto with = run_group(true, 200);
  double tw = 0, tp = 0;
  std::printf("group of %d kernels sharing five <cuda/std> headers, one process, cache off\n", kernels);
  for (int k = 0; k < kernels; ++k) {
    std::printf("  kernel %d: %8.1f ms without -pch, %8.1f ms with -pch\n", k, without[k], with[k]);
    tw += without[k];
    tp += with[k];
  }
  std::printf("  total:    %8.1f ms without, %8.1f ms with (%.2fx)\n", tw, tp, tw / tp);
  return {{"without", without}, {"with", with}, {"speedup_total", tw / tp}};
}

int bench_gpu(int reps, nlohmann::json& out) {
  auto drv = device::Driver::shared();
  if (!drv) {
    std::printf("gpu: skipped: %s\n", drv.message().c_str());
    return 77;
  }
  auto n = (*drv)->device_count();
  if (!n || *n == 0) {
    std::printf("gpu: skipped: %s\n", n ? "no device" : n.message().c_str());
    return 77;
  }
  if (auto nv = jit::shared_nvrtc(); !nv) {
    std::printf("gpu: skipped: %s\n", nv.message().c_str());
    return 77;
  }
  auto ctx = device::Context::primary(*drv, 0);
  if (!ctx) {
    std::printf("gpu: %s\n", ctx.message().c_str());
    return 1;
  }
  TempDir d;
  auto c = make_compiler(d.path + "/cache");
  auto req = request(templated_kernel(0), {});
  req.name_expressions = {"axpby<float>"};
  auto first = c->load(*ctx, req, "axpby<float>");
  if (!first) {
    std::printf("gpu: %s\n", first.message().c_str());
    return 1;
  }
  std::vector<double> ours, anchor;
  const std::vector<std::byte> image = first->compiled.image;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    auto m = ctx->load_module(image);
    if (!m) return 1;
    auto f = m->function(*first->compiled.lowered("axpby<float>"));
    anchor.push_back(ms_since(t0));
    t0 = Clock::now();
    auto k = c->load(*ctx, req, "axpby<float>");
    ours.push_back(ms_since(t0));
    if (!k || !k->compiled.from_cache) return 1;
  }
  const Stats sa = stats_of(anchor), so = stats_of(ours);
  std::printf("gpu: %s, cc %u.%u, %s (n=%d)\n", ctx->device().name.c_str(), ctx->device().cc.major,
              ctx->device().cc.minor, nvcc_name(first->compiled.target.arch, first->compiled.target.kind).c_str(), reps);
  print_row("cuModuleLoadData + GetFunction (anchor)", sa);
  print_row("archguard load: cache hit + load + function", so);
  out["gpu"] = {{"device", ctx->device().name}, {"anchor", js(sa)}, {"archguard", js(so)}};
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7;
  bool gpu = false;
  std::string json_path;
  std::string cccl = "/usr/local/cuda/include/cccl";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--gpu") {
      gpu = true;
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--cccl" && i + 1 < argc) {
      cccl = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_jit [--reps N] [--gpu] [--json FILE] [--cccl DIR]\n");
      return 2;
    }
  }
  nlohmann::json out;
  if (gpu) {
    const int rc = bench_gpu(std::max(reps, 20), out);
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return rc;
  }
  auto nv = jit::shared_nvrtc();
  if (!nv) {
    std::printf("skipped: %s\n", nv.message().c_str());
    return 77;
  }
  const auto& info = jit::nvrtc_info(**nv);
  RawNvrtc raw;
  if (!raw.open(info.library)) {
    std::fprintf(stderr, "bench_jit: cannot open %s\n", info.library.c_str());
    return 1;
  }
  std::printf("nvrtc %u.%u (%s), target sm_90, %ld cpus online\n", info.version.major, info.version.minor,
              info.library.c_str(), ::sysconf(_SC_NPROCESSORS_ONLN));
  out["nvrtc"] = std::to_string(info.version.major) + "." + std::to_string(info.version.minor);
  // -no-cache: NVRTC >= 12.9 would otherwise serve repeats from its own ComputeCache, and the
  // cold case is about compiling.
  out["cold"] = bench_cold("cold compile, 50-line templated kernel", templated_kernel, {"-no-cache"}, reps, raw);
  const std::vector<std::string> heavy_opts = {"-no-cache", "-std=c++17", "-I" + cccl};
  const bool have_cccl = std::filesystem::exists(cccl + "/cuda/std/array");
  if (have_cccl) {
    out["cold_heavy"] = bench_cold("cold compile, five <cuda/std> headers", heavy_kernel, heavy_opts,
                                   std::max(3, reps / 2), raw);
  }
  out["warm"] = bench_warm(std::max(reps * 40, 100));
  if (have_cccl) {
    out["warm_heavy"] = bench_warm_heavy(std::max(reps * 10, 30), heavy_opts);
    out["pch"] = bench_pch(heavy_opts, 4);
  } else {
    std::printf("note: %s/cuda/std not found: heavy-header and -pch cases skipped (--cccl DIR)\n", cccl.c_str());
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
