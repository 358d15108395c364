// SPDX-License-Identifier: Apache-2.0
// GPU benchmark: the same kernels (kernels/*.cuh) as
//   sass   a cubin nvcc built for the device's architecture      (loaded as is)
//   ptx    PTX nvcc built for the same architecture               (JIT-compiled by the driver)
//   nvrtc  a cubin NVRTC built at run time (jit layer, cache off) (loaded as is)
// For each: module load + first launch (run with CUDA_CACHE_DISABLE=1 for cold JITs), saxpy
// bandwidth against the device-to-device copy measured in the same run, and matmul throughput.
// Usage: archguard_bench_gpu [--json FILE]   (exit 77 without a GPU)
#include <archguard/device.hpp>
#include <archguard/jit.hpp>
#include <archguard/kernels/sources.hpp>
#include <archguard/toolkit.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace archguard;
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Variant {
  std::string name;
  std::vector<std::byte> image;
  double build_ms = 0;  // nvcc/NVRTC time (not part of the first launch)
  double load_ms = 0, first_launch_ms = 0;
  double saxpy_gbs = 0, matmul_tc_tflops = 0, matmul_plain_tflops = 0, reduce_gbs = 0;
  std::string error;
};

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::copy(c.begin(), c.end(), reinterpret_cast<char*>(b.data()));  // NOLINT: bytes
  return b;
}

bool nvcc_build(const std::string& nvcc, const std::string& kernels, const std::string& mode, const std::string& arch,
                const std::string& out, double& ms) {
  const std::string cmd = "'" + nvcc + "' " + mode + " -arch=" + arch + " -I'" + kernels + "' -o '" + out + "' '" +
                          kernels + "/all.cu'";
  const auto t = Clock::now();
  const int rc = std::system(cmd.c_str());  // NOLINT(cert-env33-c): a benchmark driving nvcc
  ms = ms_since(t);
  return rc == 0;
}

/// Times `reps` runs of `fn` between two events; returns milliseconds per run.
template <class F>
double time_ms(const device::Context& ctx, int reps, F fn) {
  auto a = ctx.create_event();
  auto b = ctx.create_event();
  if (!a || !b) return -1;
  fn();  // warm-up
  (void)ctx.synchronize();
  (void)a->record();
  for (int i = 0; i < reps; ++i) fn();
  (void)b->record();
  (void)b->synchronize();
  auto ms = b->elapsed_since(*a);
  return ms ? static_cast<double>(*ms) / reps : -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_out;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--json") json_out = argv[i + 1];
  auto driver = device::Driver::shared();
  if (!driver || !(*driver)->init_status().ok() || !(*driver)->device_count().ok() || *(*driver)->device_count() == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  auto ctx = device::Context::primary(*driver, 0);
  if (!ctx) {
    std::printf("context: %s\n", ctx.message().c_str());
    return 1;
  }
  const auto& dev = ctx->device();
  const std::string sm = std::to_string(dev.cc.packed());
  std::printf("device: %s (cc %u.%u, %d SMs)\n", dev.name.c_str(), dev.cc.major, dev.cc.minor, dev.multiprocessors);

  auto nvcc = find_nvcc();
  const std::string kernels = ARCHGUARD_KERNELS_DIR;
  const std::string tmp = "/tmp/archguard_bench_" + std::to_string(::getpid());
  std::vector<Variant> variants(3);
  variants[0].name = "sass (nvcc sm_" + sm + ")";
  variants[1].name = "ptx (nvcc compute_" + sm + ", driver jit)";
  variants[2].name = "nvrtc (cubin, cache off)";
  if (!nvcc) {
    variants[0].error = variants[1].error = nvcc.message();
  } else {
    if (nvcc_build(*nvcc, kernels, "-cubin", "sm_" + sm, tmp + ".cubin", variants[0].build_ms))
      variants[0].image = read_file(tmp + ".cubin");
    else
      variants[0].error = "nvcc -cubin failed";
    if (nvcc_build(*nvcc, kernels, "-ptx", "compute_" + sm, tmp + ".ptx", variants[1].build_ms))
      variants[1].image = read_file(tmp + ".ptx");
    else
      variants[1].error = "nvcc -ptx failed";
    std::remove((tmp + ".cubin").c_str());
    std::remove((tmp + ".ptx").c_str());
  }
  {
    jit::CompilerOptions co;
    co.use_cache = false;
    auto compiler = jit::Compiler::create(co);
    if (!compiler) {
      variants[2].error = compiler.message();
    } else {
      jit::CompileRequest req;
      req.name = "all.cu";
      std::string src;
      for (const auto& s : kernels::kSources) src += std::string(s.text) + "\n";
      req.source = src;
      auto target = (*compiler)->target_for(device_for_cc(dev.cc), (*driver)->cuda_version().ok()
                                                                       ? std::optional<Version2>((*driver)->cuda_version().value())
                                                                       : std::nullopt);
      if (!target) {
        variants[2].error = target.message();
      } else {
        req.target = *target;
        const auto t = Clock::now();
        auto c = (*compiler)->compile(req);
        variants[2].build_ms = ms_since(t);
        if (c) variants[2].image = c->image;
        else variants[2].error = c.message();
      }
    }
  }

  // Data: saxpy and reduction over 2^28 floats (1 GiB per array), matmul 4096^3.
  const std::size_t n = std::size_t{1} << 28;
  const int dim = 4096;
  const std::size_t mm = static_cast<std::size_t>(dim) * dim;
  auto dx = ctx->allocate(n * 4), dy = ctx->allocate(n * 4), dA = ctx->allocate(mm * 4), dB = ctx->allocate(mm * 4),
       dC = ctx->allocate(mm * 4), dsum = ctx->allocate(8);
  if (!dx || !dy || !dA || !dB || !dC || !dsum) {
    std::printf("allocation failed\n");
    return 1;
  }
  (void)dx->fill(0x3c);  // 0x3c3c3c3c: about 0.0115 as a float; values do not matter for speed
  (void)dy->fill(0x3c);
  (void)dA->fill(0x3c);
  (void)dB->fill(0x3c);

  // The anchor: device-to-device copy of 1 GiB (read + write).
  using MemcpyDtoD = int (*)(device::DevicePtr, device::DevicePtr, std::size_t);
  auto dtod = reinterpret_cast<MemcpyDtoD>((*driver)->symbol("cuMemcpyDtoD_v2"));  // NOLINT: dlsym
  double copy_gbs = 0;
  if (dtod != nullptr) {
    const double ms = time_ms(*ctx, 20, [&] { dtod(dy->ptr(), dx->ptr(), n * 4); });
    copy_gbs = 2.0 * n * 4 / (ms * 1e6);
  }
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n", copy_gbs);

  const unsigned grid = static_cast<unsigned>(dev.multiprocessors) * 32;
  for (auto& v : variants) {
    if (!v.error.empty() || v.image.empty()) {
      std::printf("%-36s %s\n", v.name.c_str(), v.error.empty() ? "no image" : v.error.c_str());
      continue;
    }
    auto t = Clock::now();
    auto mod = ctx->load_module(v.image);
    v.load_ms = ms_since(t);
    if (!mod) {
      v.error = mod.message();
      std::printf("%-36s %s\n", v.name.c_str(), v.error.c_str());
      continue;
    }
    auto saxpy = mod->function("ag_saxpy");
    auto reduce = mod->function("ag_reduce_sum");
    auto matmul = mod->function("ag_matmul");
    if (!saxpy || !reduce || !matmul) {
      v.error = "kernel missing";
      continue;
    }
    unsigned long long nn = n;
    float a = 1.5f;
    device::DevicePtr px = dx->ptr(), py = dy->ptr(), ps = dsum->ptr();
    void* sargs[] = {&nn, &a, &px, &py};
    t = Clock::now();
    (void)saxpy->launch({grid}, {256}, sargs);
    (void)ctx->synchronize();
    v.first_launch_ms = ms_since(t);
    double ms = time_ms(*ctx, 20, [&] { (void)saxpy->launch({grid}, {256}, sargs); });
    v.saxpy_gbs = 3.0 * n * 4 / (ms * 1e6);
    void* rargs[] = {&nn, &px, &ps};
    ms = time_ms(*ctx, 20, [&] { (void)reduce->launch({grid}, {256}, rargs); });
    v.reduce_gbs = 1.0 * n * 4 / (ms * 1e6);
    int M = dim, N = dim, K = dim;
    device::DevicePtr pA = dA->ptr(), pB = dB->ptr(), pC = dC->ptr();
    for (int tc : {1, 0}) {
      int use = tc;
      void* margs[] = {&M, &N, &K, &pA, &pB, &pC, &use};
      ms = time_ms(*ctx, 5, [&] { (void)matmul->launch({dim / 32u, dim / 32u}, {128}, margs); });
      (tc ? v.matmul_tc_tflops : v.matmul_plain_tflops) = 2.0 * dim * dim * dim / (ms * 1e9);
    }
    if (auto st = ctx->synchronize(); !st) v.error = st.message();
    std::printf(
        "%-36s build %8.1f ms  load %7.2f ms  first launch %7.2f ms  saxpy %6.0f GB/s (%.1f%% of copy)  "
        "reduce %6.0f GB/s  matmul tc %6.2f TFLOP/s plain %6.2f TFLOP/s%s%s\n",
        v.name.c_str(), v.build_ms, v.load_ms, v.first_launch_ms, v.saxpy_gbs,
        copy_gbs > 0 ? 100.0 * v.saxpy_gbs / copy_gbs : 0.0, v.reduce_gbs, v.matmul_tc_tflops,
        v.matmul_plain_tflops, v.error.empty() ? "" : "  ERROR ", v.error.c_str());
  }
  // Ratios against the native SASS build.
  const Variant& base = variants[0];
  if (base.saxpy_gbs > 0)
    for (std::size_t i = 1; i < variants.size(); ++i)
      if (variants[i].saxpy_gbs > 0)
        std::printf("%s vs sass: saxpy %+.2f%%, reduce %+.2f%%, matmul tc %+.2f%%, plain %+.2f%%\n",
                    variants[i].name.c_str(), 100.0 * (variants[i].saxpy_gbs / base.saxpy_gbs - 1),
                    100.0 * (variants[i].reduce_gbs / base.reduce_gbs - 1),
                    100.0 * (variants[i].matmul_tc_tflops / base.matmul_tc_tflops - 1),
                    100.0 * (variants[i].matmul_plain_tflops / base.matmul_plain_tflops - 1));

  if (!json_out.empty()) {
    nlohmann::json j{{"device", dev.name}, {"cc", std::to_string(dev.cc.major) + "." + std::to_string(dev.cc.minor)}, {"copy_gbs", copy_gbs}, {"variants", nlohmann::json::array()}};
    for (const auto& v : variants)
      j["variants"].push_back({{"name", v.name}, {"build_ms", v.build_ms}, {"load_ms", v.load_ms}, {"first_launch_ms", v.first_launch_ms}, {"saxpy_gbs", v.saxpy_gbs}, {"reduce_gbs", v.reduce_gbs}, {"matmul_tc_tflops", v.matmul_tc_tflops}, {"matmul_plain_tflops", v.matmul_plain_tflops}, {"error", v.error}});
    std::ofstream(json_out) << j.dump(2) << "\n";
  }
  for (const auto& v : variants)
    if (!v.error.empty()) return 1;
  return 0;
}
