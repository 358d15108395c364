// SPDX-License-Identifier: Apache-2.0
// jit-fallback: a program whose prebuilt kernel cannot run on the GPU asks the self-check API
// before its first launch, and instead of dying with error 209 compiles the same kernel source
// (kernels/saxpy.cuh, embedded as a string) with NVRTC for the exact device, loads it through
// the driver API and checks every result.
//
//   jit_fallback                   self-check, then the prebuilt path or the JIT path
//   jit_fallback --force-jit       take the JIT path even when the prebuilt image would run
//   jit_fallback --prebuilt-only   launch the prebuilt image regardless (shows the 209)
//   jit_fallback --selfcheck-cc X.Y  no GPU needed: print the self-check's prediction for a
//                                  device of that capability; exit 0 when it predicts that
//                                  ag_saxpy cannot run there and 1 otherwise
#include <archguard/device.hpp>
#include <archguard/jit.hpp>
#include <archguard/kernels/sources.hpp>
#include <archguard/selfcheck.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern "C" int jf_prebuilt_saxpy(unsigned long long n, float a, const float* x, float* y, char* error,
                                 unsigned error_size);

namespace {

constexpr int kSkip = 77;

void print_selfcheck(const archguard::selfcheck::Report& r) {
  std::printf("self-check for compute capability %u.%u: %s\n", r.target.cc.major, r.target.cc.minor,
              r.can_run() ? (r.needs_jit() ? "runs, through the driver's ptx jit" : "runs natively")
                          : "some kernels have no usable image");
  for (const auto& o : r.objects) {
    const char* what = o.outcome == archguard::Outcome::native ? "native"
                       : o.outcome == archguard::Outcome::jit  ? "ptx jit"
                                                               : "FAILS";
    std::printf("  %s: %s%s%s\n", o.path.c_str(), what, o.reason.empty() ? "" : ": ", o.reason.c_str());
    for (const auto& k : o.kernels_without_image) std::printf("    no image for kernel %s\n", k.c_str());
  }
  for (const auto& e : r.errors) std::printf("  (not read: %s)\n", e.c_str());
}

bool check(const std::vector<float>& x, const std::vector<float>& y, float a) {
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::fabs(y[i] - (a * x[i] + 1.0f)) > 1e-5f * std::fabs(a * x[i] + 1.0f) + 1e-6f) {
      std::printf("wrong result at %zu: %f, expected %f\n", i, static_cast<double>(y[i]),
                  static_cast<double>(a * x[i] + 1.0f));
      return false;
    }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool force_jit = false, prebuilt_only = false;
  std::string selfcheck_cc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--force-jit") == 0) force_jit = true;
    else if (std::strcmp(argv[i], "--prebuilt-only") == 0) prebuilt_only = true;
    else if (std::strcmp(argv[i], "--selfcheck-cc") == 0 && i + 1 < argc) selfcheck_cc = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--force-jit | --prebuilt-only | --selfcheck-cc X.Y]\n", argv[0]);
      return 2;
    }
  }

  if (!selfcheck_cc.empty()) {
    unsigned major = 0, minor = 0;
    if (std::sscanf(selfcheck_cc.c_str(), "%u.%u", &major, &minor) != 2) {
      std::fprintf(stderr, "--selfcheck-cc: '%s' is not X.Y\n", selfcheck_cc.c_str());
      return 2;
    }
    auto r = archguard::selfcheck::check_current_process(archguard::device_for_cc({major, minor}), {});
    if (!r) {
      std::printf("self-check failed: %s\n", r.message().c_str());
      return 1;
    }
    print_selfcheck(*r);
    for (const auto& k : r->kernels_without_image())
      if (k.find("ag_saxpy") != std::string::npos) return 0;
    return 1;
  }

  auto driver = archguard::device::Driver::shared();
  if (!driver || !(*driver)->init_status().ok() || !(*driver)->device_count().ok() || *(*driver)->device_count() == 0) {
    std::printf("%s: no CUDA device (%s): skipped\n", argv[0],
                !driver                          ? driver.message().c_str()
                : !(*driver)->init_status().ok() ? (*driver)->init_status().message().c_str()
                                                 : "0 devices");
    return kSkip;
  }

  const unsigned long long n = 1 << 22;
  const float a = 3.0f;
  std::vector<float> x(n), y(n, 1.0f);
  for (unsigned long long i = 0; i < n; ++i) x[i] = static_cast<float>(i % 977) * 0.01f;

  auto sc = archguard::selfcheck::check_current_process(0);
  if (sc) print_selfcheck(*sc);
  else std::printf("self-check unavailable: %s\n", sc.message().c_str());
  const bool prebuilt = prebuilt_only || (!force_jit && sc && sc->can_run());

  if (prebuilt) {
    std::printf("path: prebuilt image\n");
    char error[256] = {};
    const int rc = jf_prebuilt_saxpy(n, a, x.data(), y.data(), error, sizeof error);
    if (rc != 0) {
      std::printf("prebuilt launch failed: %s\n", error);
      return 1;
    }
    if (!check(x, y, a)) return 1;
    std::printf("prebuilt saxpy: all %llu results correct\n", n);
    return 0;
  }

  std::printf("path: jit (nvrtc compiles kernels/saxpy.cuh for this device)\n");
  auto ctx = archguard::device::Context::primary(*driver, 0);
  if (!ctx) {
    std::printf("context: %s\n", ctx.message().c_str());
    return 1;
  }
  auto compiler = archguard::jit::Compiler::create();
  if (!compiler) {
    std::printf("jit: %s\n", compiler.message().c_str());
    return 1;
  }
  archguard::jit::CompileRequest request;
  request.name = "saxpy.cuh";
  request.source = archguard::kernels::kSaxpySource;
  const auto t0 = std::chrono::steady_clock::now();
  auto kernel = (*compiler)->load(*ctx, request, "ag_saxpy");
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!kernel) {
    std::printf("jit: %s\n", kernel.message().c_str());
    return 1;
  }
  std::printf("compiled for %s%s in %.1f ms (%s)\n", archguard::nvcc_name(kernel->compiled.target.arch, kernel->compiled.target.kind).c_str(),
              kernel->compiled.from_cache ? " from the cache" : "", load_ms, kernel->reason.c_str());

  auto dx = ctx->allocate(n * sizeof(float));
  auto dy = ctx->allocate(n * sizeof(float));
  if (!dx || !dy) {
    std::printf("allocate: %s\n", (!dx ? dx : dy).message().c_str());
    return 1;
  }
  if (auto st = dx->copy_from_host(std::as_bytes(std::span<const float>(x))); !st) return std::printf("%s\n", st.message().c_str()), 1;
  if (auto st = dy->copy_from_host(std::as_bytes(std::span<const float>(y))); !st) return std::printf("%s\n", st.message().c_str()), 1;
  unsigned long long nn = n;
  float aa = a;
  archguard::device::DevicePtr px = dx->ptr(), py = dy->ptr();
  void* args[] = {&nn, &aa, &px, &py};
  if (auto st = kernel->function.launch({256}, {256}, args); !st) {
    std::printf("launch: %s\n", st.message().c_str());
    return 1;
  }
  if (auto st = ctx->synchronize(); !st) {
    std::printf("synchronize: %s\n", st.message().c_str());
    return 1;
  }
  if (auto st = dy->copy_to_host(std::as_writable_bytes(std::span<float>(y))); !st) return std::printf("%s\n", st.message().c_str()), 1;
  if (!check(x, y, a)) return 1;
  std::printf("jit saxpy: all %llu results correct\n", n);
  return 0;
}
