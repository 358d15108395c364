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
};

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

  auto t0 = Clock::now();
  auto mod = ctx->load_module(smoke_fatbin());
  timing.module_load_ms = ms_since(t0);
  if (!mod) return run.fail("loading the smoke-test fatbin (" + std::string(smoke_fatbin_targets()) + ")", mod.error());
  const char* names[] = {"ag_saxpy", "ag_reduce_sum", "ag_matmul", "ag_cluster_sum"};
  std::vector<device::Function> fn;
  for (const char* n : names) {
    auto f = mod->function(n);
    if (!f) return run.fail(std::string("finding kernel ") + n, f.error());
    fn.push_back(*f);
  }

  // saxpy (also the first launch, timed with a host clock because it includes the lazy load
  // and any JIT compilation).
  const std::size_t n = std::size_t{1} << 23;
  std::vector<float> x(n), y(n, 1.0f);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000) * 0.001f;
  auto dx = ctx->allocate(n * sizeof(float));
  auto dy = ctx->allocate(n * sizeof(float));
  if (!dx) return run.fail("allocating memory", dx.error());
  if (!dy) return run.fail("allocating memory", dy.error());
  if (auto st = dx->copy_from_host(as_bytes(x)); !st) return run.fail("copying to the device", st.error());
  if (auto st = dy->copy_from_host(as_bytes(y)); !st) return run.fail("copying to the device", st.error());
  unsigned long long nn = n;
  float a = 2.0f;
  device::DevicePtr px = dx->ptr(), py = dy->ptr();
  void* saxpy_args[] = {&nn, &a, &px, &py};
  const unsigned grid = static_cast<unsigned>(std::max(1, ctx->device().multiprocessors) * 4);
  for (int launch = 0; launch < 2; ++launch) {
    t0 = Clock::now();
    if (auto st = fn[0].launch({grid}, {256}, saxpy_args); !st) return run.fail("launching ag_saxpy", st.error());
    if (auto st = ctx->synchronize(); !st) return run.fail("running ag_saxpy", st.error());
    (launch == 0 ? timing.first_launch_ms : timing.second_launch_ms) = ms_since(t0);
  }
  std::vector<float> got(n);
  if (auto st = dy->copy_to_host(as_writable(got)); !st) return run.fail("copying back", st.error());
  for (std::size_t i = 0; i < n; ++i) {
    const float want = 1.0f + 2.0f * (a * x[i]);
    if (std::fabs(got[i] - want) > 1e-5f * std::fabs(want) + 1e-6f) {
      return run.mismatch("ag_saxpy", "y[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", expected " +
                                          std::to_string(want));
    }
  }

  // reduction over x
  auto dsum = ctx->allocate(sizeof(double));
  if (!dsum) return run.fail("allocating memory", dsum.error());
  if (auto st = dsum->fill(0); !st) return run.fail("clearing memory", st.error());
  device::DevicePtr psum = dsum->ptr();
  void* reduce_args[] = {&nn, &px, &psum};
  if (auto st = fn[1].launch({grid}, {256}, reduce_args); !st) return run.fail("launching ag_reduce_sum", st.error());
  if (auto st = ctx->synchronize(); !st) return run.fail("running ag_reduce_sum", st.error());
  double want_sum = 0.0;
  for (float v : x) want_sum += static_cast<double>(v);
  std::vector<double> sum(1);
  if (auto st = dsum->copy_to_host(as_writable(sum)); !st) return run.fail("copying back", st.error());
  if (std::fabs(sum[0] - want_sum) > 1e-9 * std::fabs(want_sum) + 1e-6)
    return run.mismatch("ag_reduce_sum", "sum " + std::to_string(sum[0]) + ", expected " + std::to_string(want_sum));

  // cluster sum: plain launch (portable), then with 2-block clusters where the gpu has them.
  auto dtag = ctx->allocate(sizeof(unsigned));
  if (!dtag) return run.fail("allocating memory", dtag.error());
  device::DevicePtr ptag = dtag->ptr();
  void* cluster_args[] = {&nn, &px, &psum, &ptag};
  auto check_cluster = [&](const std::string& how) -> bool {
    std::vector<double> got_sum(1);
    if (auto st = dsum->copy_to_host(as_writable(got_sum)); !st) {
      run.fail("copying back", st.error());
      return false;
    }
    if (std::fabs(got_sum[0] - want_sum) > 1e-9 * std::fabs(want_sum) + 1e-6) {
      run.mismatch("ag_cluster_sum (" + how + ")",
                   "sum " + std::to_string(got_sum[0]) + ", expected " + std::to_string(want_sum));
      return false;
    }
    return true;
  };
  if (auto st = dsum->fill(0); !st) return run.fail("clearing memory", st.error());
  if (auto st = fn[3].launch({grid}, {256}, cluster_args); !st) return run.fail("launching ag_cluster_sum", st.error());
  if (auto st = ctx->synchronize(); !st) return run.fail("running ag_cluster_sum", st.error());
  if (!check_cluster("no cluster")) return;
  std::vector<unsigned> tag(1);
  if (auto st = dtag->copy_to_host(as_writable(tag)); !st) return run.fail("copying back", st.error());
  timing.image = tag_text(tag[0]);
  const bool native = tag[0] / 100 == ctx->device().cc.packed();
  if (!native) timing.image = "compute_" + timing.image.substr(3) + " ptx, jit-compiled (or compatible sass)";
  std::string cluster_note;
  if (ctx->device().cc.major >= 9) {
    auto ex = reinterpret_cast<LaunchKernelEx>(s.driver->symbol("cuLaunchKernelEx"));  // NOLINT: dlsym
    if (ex != nullptr) {
      if (auto st = dsum->fill(0); !st) return run.fail("clearing memory", st.error());
      LaunchAttribute attr{};
      attr.id = kLaunchAttributeClusterDimension;
      attr.value.cluster = {2, 1, 1};
      LaunchConfig cfg{grid, 1, 1, 256, 1, 1, 0, nullptr, &attr, 1};
      const int rc = ex(&cfg, fn[3].handle(), cluster_args, nullptr);
      if (rc != 0) return run.fail("launching ag_cluster_sum with 2-block clusters", s.driver->error("cuLaunchKernelEx", rc));
      if (auto st = ctx->synchronize(); !st) return run.fail("running ag_cluster_sum with clusters", st.error());
      if (!check_cluster("2-block clusters")) return;
      cluster_note = ", cluster path checked";
    }
  }

  // matmul 1024^3, plain and (CC >= 8.0) tensor-core path; 24 rows checked against the CPU.
  const int dim = 1024;
  const std::size_t elems = static_cast<std::size_t>(dim) * dim;
  std::vector<float> A(elems), B(elems), C(elems);
  Lcg rng{12345u};
  for (auto& v : A) v = rng.next();
  for (auto& v : B) v = rng.next();
  auto dA = ctx->allocate(elems * sizeof(float));
  auto dB = ctx->allocate(elems * sizeof(float));
  auto dC = ctx->allocate(elems * sizeof(float));
  if (!dA || !dB || !dC) return run.fail("allocating memory", !dA ? dA.error() : !dB ? dB.error()
                                                                                     : dC.error());
  if (auto st = dA->copy_from_host(as_bytes(A)); !st) return run.fail("copying to the device", st.error());
  if (auto st = dB->copy_from_host(as_bytes(B)); !st) return run.fail("copying to the device", st.error());
  auto ev0 = ctx->create_event();
  auto ev1 = ctx->create_event();
  if (!ev0 || !ev1) return run.fail("creating events", !ev0 ? ev0.error() : ev1.error());
  // The CPU reference for 24 rows spread over C, computed once for both paths, row by row so
  // that B is read contiguously (with the values of sum |a*b| for the tolerance).
  std::vector<int> rows;
  for (int r = 0; r < dim; r += dim / 24 + 1) rows.push_back(r);
  std::vector<double> ref(rows.size() * dim, 0.0), mag(rows.size() * dim, 0.0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::size_t r = static_cast<std::size_t>(rows[i]);
    double* out = &ref[i * dim];
    double* m = &mag[i * dim];
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
  const bool tensor = ctx->device().cc.major >= 8;
  for (int use_tc : {0, 1}) {
    if (use_tc == 1 && !tensor) break;
    if (auto st = dC->fill(0); !st) return run.fail("clearing memory", st.error());
    int M = dim, N = dim, K = dim;
    device::DevicePtr pA = dA->ptr(), pB = dB->ptr(), pC = dC->ptr();
    void* mm_args[] = {&M, &N, &K, &pA, &pB, &pC, &use_tc};
    const device::Dim3 mm_grid{static_cast<unsigned>(dim / 32), static_cast<unsigned>(dim / 32)};
    if (auto st = ev0->record(); !st) return run.fail("recording an event", st.error());
    if (auto st = fn[2].launch(mm_grid, {128}, mm_args); !st) return run.fail("launching ag_matmul", st.error());
    if (auto st = ev1->record(); !st) return run.fail("recording an event", st.error());
    if (auto st = ctx->synchronize(); !st) return run.fail("running ag_matmul", st.error());
    if (auto ms = ev1->elapsed_since(*ev0); ms && *ms > 0)
      timing.matmul_gflops = 2.0 * dim * dim * dim / (static_cast<double>(*ms) * 1e6);
    if (auto st = dC->copy_to_host(as_writable(C)); !st) return run.fail("copying back", st.error());
    // Relative to sum |a*b|: TF32 keeps 10 mantissa bits (about 1e-3 per product, errors partly
    // cancel); a wrong fragment layout is off by the size of the result itself.
    const double tol = use_tc ? 1e-3 : 1e-4;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::size_t r = static_cast<std::size_t>(rows[i]);
      for (std::size_t c = 0; c < static_cast<std::size_t>(dim); ++c) {
        const double g = C[r * dim + c];
        const double want = ref[i * dim + c];
        if (std::fabs(g - want) > tol * mag[i * dim + c] + 1e-5)
          return run.mismatch(use_tc ? "ag_matmul (tensor cores)" : "ag_matmul (plain)",
                              "C[" + std::to_string(r) + "][" + std::to_string(c) + "] = " + std::to_string(g) +
                                  ", expected " + std::to_string(want));
      }
    }
  }

  char buf[256];
  std::snprintf(buf, sizeof buf,
                "saxpy, reduction, cluster sum and 1024^3 matmul (%s) match the cpu; image %s%s; module load "
                "%.2f ms, first launch %.2f ms, second %.3f ms, matmul %.0f GFLOP/s",
                tensor ? "plain and tensor cores" : "plain", timing.image.c_str(), cluster_note.c_str(),
                timing.module_load_ms, timing.first_launch_ms, timing.second_launch_ms, timing.matmul_gflops);
  step.findings.push_back({Level::pass, who, buf, ""});
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
