// SPDX-License-Identifier: Apache-2.0
// Step 5: kernels that really compute. The embedded fatbin (every supported arch + PTX, built
// from kernels/*.cuh) is loaded through the driver API, its kernels run and synchronise, and the
// results are compared with a CPU reference. Errors keep the driver's exact name and number.
#include "doctor/steps.hpp"

#include "common/driver_env.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace archguard::doctor::detail {

/// The fix for a failed load or launch of the smoke fatbin (every SASS the toolkit builds, the
/// oldest and the newest PTX), attributed to what caused it.
Fix smoke_remedy(int code, const JitEnv& env) {
  switch (code) {
    case device::kCuErrorNoBinaryForGpu:
      if (env.force && env.disable)
        return {FixKind::environment,
                "unset CUDA_FORCE_PTX_JIT or CUDA_DISABLE_PTX_JIT: together they leave the driver no image to load",
                {}};
      if (env.force)
        return {FixKind::environment, "unset CUDA_FORCE_PTX_JIT (it makes the driver ignore the sass and jit the ptx)", {}};
      return {FixKind::other,
              "this gpu is newer than every architecture of the toolkit that built archguard, and none of its ptx "
              "targets it: rebuild archguard with a newer cuda toolkit",
              {}};
    case device::kCuErrorUnsupportedPtxVersion:
    case device::kCuErrorInvalidPtx:
      if (env.force)
        return {FixKind::environment,
                "unset CUDA_FORCE_PTX_JIT (the sass runs without a jit); the ptx of the toolkit that built "
                "archguard is newer than this driver accepts (see step 2)",
                {}};
      return {FixKind::driver, "install a driver that accepts the ptx isa of this toolkit (see step 2)", {}};
    case device::kCuErrorJitCompilationDisabled:
      return {FixKind::environment, "unset CUDA_DISABLE_PTX_JIT", {}};
    default:
      return {FixKind::other, "run with CUDA_LAUNCH_BLOCKING=1 and check dmesg for Xid errors", {}};
  }
}

std::string smoke_fix(int code, const JitEnv& env) { return smoke_remedy(code, env).text; }

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

template <class T>
std::span<const std::byte> as_bytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}
template <class T>
std::span<std::byte> as_writable(std::vector<T>& v) {
  return std::as_writable_bytes(std::span<T>(v));
}

/// Deterministic values in [-1, 1).
struct Lcg {
  std::uint32_t s;
  float next() {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 8388608.0f - 1.0f;
  }
};

// cuLaunchKernelEx with a cluster dimension (cuda.h ABI; see CUlaunchConfig).
struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } cluster;
  } value;
};
struct LaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void* stream;
  LaunchAttribute* attrs;
  unsigned num_attrs;
};
constexpr int kLaunchAttributeClusterDimension = 4;
using LaunchKernelEx = int (*)(const LaunchConfig*, void*, void**, void**);

std::string tag_text(unsigned tag) {
  const unsigned arch = tag / 100;  // __CUDA_ARCH__ / 10
  std::string s = "sm_" + std::to_string(arch);
  if (tag % 10 == 1) s += "a";
  if (tag % 10 == 2) s += "f";
  return s;
}

struct DeviceRun {
  Step& step;
  std::string who;
  JitEnv env;
  bool ok = true;
  void fail(const std::string& what, const Error& e) {
    ok = false;
    // The CUresult says what went wrong only when the driver gave one.
    Fix fix = smoke_remedy(e.kind == ErrorKind::driver ? e.code : 0, env);
    step.findings.push_back({Level::fail, who, what + ": " + e.message, std::move(fix.text), fix.kind});
  }
  void mismatch(const std::string& what, const std::string& detail) {
    ok = false;
    step.findings.push_back({Level::fail, who, what + " computed wrong results: " + detail,
                             "the gpu or driver is faulty: check nvidia-smi -q for ecc errors and dmesg for Xid", FixKind::driver});
  }
  /// True when `r` holds a value; else fails with `what` and returns false.
  template <class T>
  bool check(const Result<T>& r, const std::string& what) {
    if (r) return true;
    fail(what, r.error());
    return false;
  }
};

/// Launches `f` and waits for it to finish.
bool launch_and_wait(const device::Context& ctx, const device::Function& f, device::Dim3 grid, device::Dim3 block,
                     void** args, const std::string& name, DeviceRun& run) {
  return run.check(f.launch(grid, block, args), "launching " + name) && run.check(ctx.synchronize(), "running " + name);
}

/// The smoke fatbin's kernels, in the order the checks use them.
bool find_kernels(const device::Module& mod, DeviceRun& run, std::vector<device::Function>& fn) {
  const char* names[] = {"ag_saxpy", "ag_reduce_sum", "ag_matmul", "ag_cluster_sum"};
  for (const char* n : names) {
    auto f = mod.function(n);
    if (!run.check(f, std::string("finding kernel ") + n)) return false;
    fn.push_back(*f);
  }
  return true;
}

/// x[i] of saxpy and the reduction, computed where it is needed rather than kept.
float smoke_x(std::size_t i) { return static_cast<float>(i % 1000) * 0.001f; }

/// saxpy twice (the first launch timed with a host clock because it includes the lazy load and
/// any JIT compilation), then y checked against the cpu; `got` (of y's size) receives y.
bool run_saxpy(const device::Context& ctx, const device::Function& f, unsigned grid, void** args,
               const device::Buffer& dy, std::vector<float>& got, float a, DeviceRun& run, SmokeTiming& timing) {
  for (int launch = 0; launch < 2; ++launch) {
    const auto t0 = Clock::now();
    if (!launch_and_wait(ctx, f, {grid}, {256}, args, "ag_saxpy", run)) return false;
    (launch == 0 ? timing.first_launch_ms : timing.second_launch_ms) = ms_since(t0);
  }
  if (!run.check(dy.copy_to_host(as_writable(got)), "copying back")) return false;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float want = 1.0f + 2.0f * (a * smoke_x(i));
    if (std::fabs(got[i] - want) > 1e-5f * std::fabs(want) + 1e-6f) {
      run.mismatch("ag_saxpy",
                   "y[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", expected " + std::to_string(want));
      return false;
    }
  }
  return true;
}

/// The sum a kernel left in `dsum`, checked against `want_sum`.
bool check_sum(const device::Buffer& dsum, double want_sum, const std::string& what, DeviceRun& run) {
  std::vector<double> got_sum(1);
  if (!run.check(dsum.copy_to_host(as_writable(got_sum)), "copying back")) return false;
  if (std::fabs(got_sum[0] - want_sum) > 1e-9 * std::fabs(want_sum) + 1e-6) {
    run.mismatch(what, "sum " + std::to_string(got_sum[0]) + ", expected " + std::to_string(want_sum));
    return false;
  }
  return true;
}

/// ag_cluster_sum again with 2-block clusters (cuLaunchKernelEx); `note` says so when it ran.
bool run_with_clusters(const Session& s, const device::Context& ctx, const device::Function& f, unsigned grid,
                       void** args, const device::Buffer& dsum, double want_sum, DeviceRun& run, std::string& note) {
  auto ex = reinterpret_cast<LaunchKernelEx>(s.driver->symbol("cuLaunchKernelEx"));  // NOLINT: dlsym
  if (ex == nullptr) return true;
  if (!run.check(dsum.fill(0), "clearing memory")) return false;
  LaunchAttribute attr{};
  attr.id = kLaunchAttributeClusterDimension;
  attr.value.cluster = {2, 1, 1};
  LaunchConfig cfg{grid, 1, 1, 256, 1, 1, 0, nullptr, &attr, 1};
  const int rc = ex(&cfg, f.handle(), args, nullptr);
  if (rc != 0) {
    run.fail("launching ag_cluster_sum with 2-block clusters", s.driver->error("cuLaunchKernelEx", rc));
    return false;
  }
  if (!run.check(ctx.synchronize(), "running ag_cluster_sum with clusters")) return false;
  if (!check_sum(dsum, want_sum, "ag_cluster_sum (2-block clusters)", run)) return false;
  note = ", cluster path checked";
  return true;
}

/// The CPU reference for 24 rows spread over C = A * B, computed once for both paths, row by
/// row so that B is read contiguously (with the values of sum |a*b| for the tolerance).
struct MatmulReference {
  std::vector<int> rows;
  std::vector<double> ref, mag;
};

MatmulReference matmul_reference(const std::vector<float>& A, const std::vector<float>& B, int dim) {
  MatmulReference want;
  for (int r = 0; r < dim; r += dim / 24 + 1) want.rows.push_back(r);
  want.ref.assign(want.rows.size() * dim, 0.0);
  want.mag.assign(want.rows.size() * dim, 0.0);
  for (std::size_t i = 0; i < want.rows.size(); ++i) {
    const std::size_t r = static_cast<std::size_t>(want.rows[i]);
    double* out = &want.ref[i * dim];
    double* m = &want.mag[i * dim];
    for (std::size_t k = 0; k < static_cast<std::size_t>(dim); ++k) {
      const double aik = A[r * dim + k];
      const float* brow = &B[k * dim];
      for (std::size_t c = 0; c < static_cast<std::size_t>(dim); ++c) {
        const double p = aik * static_cast<double>(brow[c]);
        out[c] += p;
        m[c] += std::fabs(p);
      }
    }
  }
  return want;
}

/// The first element of C off the reference by more than `tol` (relative to sum |a*b|), as
/// "C[r][c] = got, expected want"; empty when all match.
std::string matmul_difference(const std::vector<float>& C, const MatmulReference& want, int dim, double tol) {
  for (std::size_t i = 0; i < want.rows.size(); ++i) {
    const std::size_t r = static_cast<std::size_t>(want.rows[i]);
    for (std::size_t c = 0; c < static_cast<std::size_t>(dim); ++c) {
      const double g = C[r * dim + c];
      const double w = want.ref[i * dim + c];
      if (std::fabs(g - w) > tol * want.mag[i * dim + c] + 1e-5)
        return "C[" + std::to_string(r) + "][" + std::to_string(c) + "] = " + std::to_string(g) + ", expected " +
               std::to_string(w);
    }
  }
  return "";
}

/// matmul 1024^3, plain and (`tensor`: CC >= 8.0) tensor-core path; 24 rows checked against the CPU.
bool run_matmul(const device::Context& ctx, const device::Function& f, bool tensor, DeviceRun& run,
                SmokeTiming& timing) {
  const int dim = 1024;
  const std::size_t elems = static_cast<std::size_t>(dim) * dim;
  std::vector<float> A(elems), B(elems), C(elems);
  Lcg rng{12345u};
  for (auto& v : A) v = rng.next();
  for (auto& v : B) v = rng.next();
  auto dA = ctx.allocate(elems * sizeof(float));
  auto dB = ctx.allocate(elems * sizeof(float));
  auto dC = ctx.allocate(elems * sizeof(float));
  if (!run.check(!dA ? dA : !dB ? dB
                                : dC,
                 "allocating memory")) return false;
  if (!run.check(dA->copy_from_host(as_bytes(A)), "copying to the device")) return false;
  if (!run.check(dB->copy_from_host(as_bytes(B)), "copying to the device")) return false;
  auto ev0 = ctx.create_event();
  auto ev1 = ctx.create_event();
  if (!run.check(!ev0 ? ev0 : ev1, "creating events")) return false;
  const MatmulReference want = matmul_reference(A, B, dim);
  for (int use_tc : {0, 1}) {
    if (use_tc == 1 && !tensor) break;
    if (!run.check(dC->fill(0), "clearing memory")) return false;
    int M = dim, N = dim, K = dim;
    device::DevicePtr pA = dA->ptr(), pB = dB->ptr(), pC = dC->ptr();
    void* mm_args[] = {&M, &N, &K, &pA, &pB, &pC, &use_tc};
    const device::Dim3 mm_grid{static_cast<unsigned>(dim / 32), static_cast<unsigned>(dim / 32)};
    if (!run.check(ev0->record(), "recording an event")) return false;
    if (!run.check(f.launch(mm_grid, {128}, mm_args), "launching ag_matmul")) return false;
    if (!run.check(ev1->record(), "recording an event")) return false;
    if (!run.check(ctx.synchronize(), "running ag_matmul")) return false;
    if (auto ms = ev1->elapsed_since(*ev0); ms && *ms > 0)
      timing.matmul_gflops = 2.0 * dim * dim * dim / (static_cast<double>(*ms) * 1e6);
    if (!run.check(dC->copy_to_host(as_writable(C)), "copying back")) return false;
    // Relative to sum |a*b|: TF32 keeps 10 mantissa bits (about 1e-3 per product, errors partly
    // cancel); a wrong fragment layout is off by the size of the result itself.
    const std::string difference = matmul_difference(C, want, dim, use_tc ? 1e-3 : 1e-4);
    if (!difference.empty()) {
      run.mismatch(use_tc ? "ag_matmul (tensor cores)" : "ag_matmul (plain)", difference);
      return false;
    }
  }
  return true;
}

std::string passed_text(const SmokeTiming& timing, bool tensor, const std::string& cluster_note) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "saxpy, reduction, cluster sum and 1024^3 matmul (%s) match the cpu; image %s%s; module load "
                "%.2f ms, first launch %.2f ms, second %.3f ms, matmul %.0f GFLOP/s",
                tensor ? "plain and tensor cores" : "plain", timing.image.c_str(), cluster_note.c_str(),
                timing.module_load_ms, timing.first_launch_ms, timing.second_launch_ms, timing.matmul_gflops);
  return buf;
}

void run_device(Session& s, int ordinal, Step& step, Report& report) {
  auto ctx = device::Context::primary(s.driver, ordinal);
  const std::string who = "device " + std::to_string(ordinal);
  if (!ctx) {
    step.findings.push_back({Level::fail, who, "creating the context failed: " + ctx.message(),
                             "check nvidia-smi for the gpu's state (compute mode, xid errors)", FixKind::other});
    return;
  }
  const common::DriverEnv driver_env = common::read_driver_env(s.env);
  DeviceRun run{step, who, JitEnv{driver_env.force_ptx_jit_on(), driver_env.disable_ptx_jit_on()}};
  SmokeTiming timing;
  timing.ordinal = ordinal;

  const auto t0 = Clock::now();
  auto mod = ctx->load_module(smoke_fatbin());
  timing.module_load_ms = ms_since(t0);
  if (!run.check(mod, "loading the smoke-test fatbin (" + std::string(smoke_fatbin_targets()) + ")")) return;
  std::vector<device::Function> fn;
  if (!find_kernels(*mod, run, fn)) return;

  // saxpy (also the first launch). One host buffer serves x, then y, then y read back: three
  // of 32 MiB each stood beside the CUDA context, at doctor's peak (issue 25).
  const std::size_t n = std::size_t{1} << 23;
  std::vector<float> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = smoke_x(i);
  auto dx = ctx->allocate(n * sizeof(float));
  auto dy = ctx->allocate(n * sizeof(float));
  if (!run.check(dx, "allocating memory") || !run.check(dy, "allocating memory")) return;
  if (!run.check(dx->copy_from_host(as_bytes(host)), "copying to the device")) return;
  std::fill(host.begin(), host.end(), 1.0f);
  if (!run.check(dy->copy_from_host(as_bytes(host)), "copying to the device")) return;
  unsigned long long nn = n;
  float a = 2.0f;
  device::DevicePtr px = dx->ptr(), py = dy->ptr();
  void* saxpy_args[] = {&nn, &a, &px, &py};
  const unsigned grid = static_cast<unsigned>(std::max(1, ctx->device().multiprocessors) * 4);
  if (!run_saxpy(*ctx, fn[0], grid, saxpy_args, *dy, host, a, run, timing)) return;
  host = {};

  // reduction over x
  auto dsum = ctx->allocate(sizeof(double));
  if (!run.check(dsum, "allocating memory") || !run.check(dsum->fill(0), "clearing memory")) return;
  device::DevicePtr psum = dsum->ptr();
  void* reduce_args[] = {&nn, &px, &psum};
  if (!launch_and_wait(*ctx, fn[1], {grid}, {256}, reduce_args, "ag_reduce_sum", run)) return;
  double want_sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) want_sum += static_cast<double>(smoke_x(i));
  if (!check_sum(*dsum, want_sum, "ag_reduce_sum", run)) return;

  // cluster sum: plain launch (portable), then with 2-block clusters where the gpu has them.
  auto dtag = ctx->allocate(sizeof(unsigned));
  if (!run.check(dtag, "allocating memory")) return;
  device::DevicePtr ptag = dtag->ptr();
  void* cluster_args[] = {&nn, &px, &psum, &ptag};
  if (!run.check(dsum->fill(0), "clearing memory")) return;
  if (!launch_and_wait(*ctx, fn[3], {grid}, {256}, cluster_args, "ag_cluster_sum", run)) return;
  if (!check_sum(*dsum, want_sum, "ag_cluster_sum (no cluster)", run)) return;
  std::vector<unsigned> tag(1);
  if (!run.check(dtag->copy_to_host(as_writable(tag)), "copying back")) return;
  timing.image = tag_text(tag[0]);
  const bool native = tag[0] / 100 == ctx->device().cc.packed();
  if (!native) timing.image = "compute_" + timing.image.substr(3) + " ptx, jit-compiled (or compatible sass)";
  std::string cluster_note;
  if (ctx->device().cc.major >= 9 && !run_with_clusters(s, *ctx, fn[3], grid, cluster_args, *dsum, want_sum, run, cluster_note))
    return;

  const bool tensor = ctx->device().cc.major >= 8;
  if (!run_matmul(*ctx, fn[2], tensor, run, timing)) return;
  step.findings.push_back({Level::pass, who, passed_text(timing, tensor, cluster_note), ""});
  report.timings.push_back(timing);
}

}  // namespace

Step step_smoke(Session& s, Report& report) {
  Step step;
  step.number = 5;
  step.name = "smoke test";
  if (!s.options->smoke) {
    step.findings.push_back({Level::skip, "smoke test", "not asked (--no-smoke)", ""});
    return step;
  }
  if (!s.driver || report.devices.empty()) {
    step.findings.push_back({Level::skip, "smoke test", "no usable cuda device (see step 1)", ""});
    return step;
  }
  if (smoke_fatbin().empty()) {
    step.findings.push_back({Level::skip, "smoke test", "this archguard was built without nvcc: no smoke-test fatbin",
                             "rebuild archguard on a machine with the cuda toolkit", FixKind::rebuild});
    return step;
  }
  for (const auto& d : report.devices) run_device(s, d.ordinal, step, report);
  return step;
}

}  // namespace archguard::doctor::detail
