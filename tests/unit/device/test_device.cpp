// SPDX-License-Identifier: Apache-2.0
#include <archguard/device.hpp>

#include <catch2/catch.hpp>

#include <stdlib.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

using namespace archguard;
using namespace archguard::device;

namespace {

std::shared_ptr<const Driver> fake_driver() {
  auto d = Driver::open({ARCHGUARD_FAKE_LIBCUDA, true});
  REQUIRE(d.ok());
  return *d;
}

std::span<const std::byte> bytes_of(const char* s) {
  return {reinterpret_cast<const std::byte*>(s), std::strlen(s)};
}

}  // namespace

TEST_CASE("a missing driver library gives the documented error", "[device]") {
  auto d = Driver::open({"libarchguard-no-such-driver.so.1", true});
  REQUIRE_FALSE(d.ok());
  CHECK(d.message().rfind("no cuda driver: dlopen libarchguard-no-such-driver.so.1 failed: ", 0) == 0);
  CHECK(d.message().find("libarchguard-no-such-driver.so.1") != std::string::npos);
  CHECK(d.code() == kNoDriverCode);
}

TEST_CASE("ARCHGUARD_LIBCUDA overrides the library name", "[device]") {
  ::setenv("ARCHGUARD_LIBCUDA", "libarchguard-env-driver.so.1", 1);
  auto d = Driver::open();
  ::unsetenv("ARCHGUARD_LIBCUDA");
  REQUIRE_FALSE(d.ok());
  CHECK(d.message().find("dlopen libarchguard-env-driver.so.1 failed") != std::string::npos);
}

TEST_CASE("a library that is not a driver is refused and names the missing entry points", "[device]") {
  auto d = Driver::open({"libc.so.6", true});
  REQUIRE_FALSE(d.ok());
  CHECK(d.message().rfind("no usable cuda driver: libc.so.6 lacks cuInit, cuDriverGetVersion", 0) == 0);
}

TEST_CASE("the process-wide driver either works or says why not", "[device]") {
  auto d = Driver::shared();
  if (!d.ok()) {
    CHECK(d.message().rfind("no cuda driver: dlopen libcuda.so.1 failed: ", 0) == 0);
    return;
  }
  auto v = (*d)->version();
  REQUIRE(v.ok());
  CHECK(*v >= 10000);
  CHECK((*d)->describe(209).find("CUDA_ERROR_NO_BINARY_FOR_GPU (209)") != std::string::npos);
}

TEST_CASE("device queries through the driver", "[device]") {
  auto d = fake_driver();
  CHECK(d->init_status().ok());
  CHECK(*d->version() == 13000);
  CHECK(*d->cuda_version() == Version2{13, 0});
  REQUIRE(*d->device_count() == 1);
  auto devs = d->devices();
  REQUIRE(devs.ok());
  REQUIRE(devs->size() == 1);
  const DeviceInfo& info = devs->front();
  CHECK(info.name == "Fake GPU");
  CHECK(info.cc == Version2{9, 0});
  CHECK_FALSE(info.integrated);
  CHECK(info.total_memory == (std::size_t{1} << 30));
  CHECK(info.pci_bus_id == "0000:01:00.0");
  CHECK(info.multiprocessors == 132);
  auto bad = d->device(3);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().rfind("device 3: cuDeviceGet: ", 0) == 0);
  CHECK(bad.code() == 101);
  CHECK(d->symbol("cuLaunchKernel") != nullptr);
  CHECK(d->symbol("cuNoSuchEntryPoint") == nullptr);
  CHECK(d->library_path().find("fake") != std::string::npos);
}

TEST_CASE("error texts carry the name, the number and the driver's words", "[device]") {
  auto d = fake_driver();
  CHECK(d->describe(209) ==
        "CUDA_ERROR_NO_BINARY_FOR_GPU (209): no kernel image is available for execution on the device");
  CHECK(d->describe(4242) == "CUDA_ERROR_UNKNOWN_CODE (4242): unrecognised error code");
  Error e = d->error("cuLaunchKernel(k)", 209);
  CHECK(e.code == 209);
  CHECK(e.message.rfind("cuLaunchKernel(k): CUDA_ERROR_NO_BINARY_FOR_GPU (209)", 0) == 0);
  CHECK(d->check("x", 0).ok());
}

TEST_CASE("a failing cuInit keeps the driver usable for its version", "[device]") {
  ::setenv("FAKE_CUDA_INIT_ERROR", "100", 1);
  auto d = Driver::open({ARCHGUARD_FAKE_LIBCUDA, true});
  ::unsetenv("FAKE_CUDA_INIT_ERROR");
  REQUIRE(d.ok());
  CHECK((*d)->version().ok());
  REQUIRE_FALSE((*d)->init_status().ok());
  CHECK((*d)->init_status().code() == kCuErrorNoDevice);
  auto n = (*d)->device_count();
  REQUIRE_FALSE(n.ok());
  CHECK(n.message() == "cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected");
  CHECK_FALSE(Context::primary(*d, 0).ok());
}

TEST_CASE("modules, launches, memory and events through a primary context", "[device]") {
  auto ctx = Context::primary(fake_driver(), 0);
  REQUIRE(ctx.ok());
  CHECK(ctx->device().name == "Fake GPU");
  CHECK(ctx->synchronize().ok());

  auto mod = ctx->load_module(bytes_of("a cubin"));
  REQUIRE(mod.ok());
  auto fn = mod->function("saxpy");
  REQUIRE(fn.ok());
  CHECK(fn->name() == "saxpy");
  CHECK(fn->launch({1, 1, 1}, {32, 1, 1}, nullptr).ok());
  auto bad_launch = fn->launch({0, 1, 1}, {32, 1, 1}, nullptr);
  REQUIRE_FALSE(bad_launch.ok());
  CHECK(bad_launch.code() == kCuErrorInvalidValue);
  CHECK(bad_launch.message().find("cuLaunchKernel(saxpy)") != std::string::npos);
  auto missing = mod->function("missing");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.code() == kCuErrorNotFound);
  CHECK(missing.message().find("cuModuleGetFunction(missing): CUDA_ERROR_NOT_FOUND (500)") != std::string::npos);

  auto buf = ctx->allocate(16);
  REQUIRE(buf.ok());
  std::array<std::byte, 16> in{}, out{};
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::byte>(i * 3);
  REQUIRE(buf->copy_from_host(in).ok());
  REQUIRE(buf->copy_to_host(out).ok());
  CHECK(in == out);
  std::array<std::byte, 17> too_big{};
  CHECK_FALSE(buf->copy_from_host(too_big).ok());
  REQUIRE(buf->fill(0xab).ok());
  REQUIRE(buf->copy_to_host(out).ok());
  CHECK(out[5] == std::byte{0xab});

  auto a = ctx->create_event();
  auto b = ctx->create_event();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->record().ok());
  CHECK(b->record().ok());
  CHECK(b->synchronize().ok());
  auto ms = b->elapsed_since(*a);
  REQUIRE(ms.ok());
  CHECK(*ms == Approx(1.5f));
}

TEST_CASE("a refused module carries the driver's JIT log and code", "[device]") {
  auto ctx = Context::primary(fake_driver(), 0);
  REQUIRE(ctx.ok());
  auto m = ctx->load_module(bytes_of("REJECT this image"));
  REQUIRE_FALSE(m.ok());
  CHECK(m.code() == kCuErrorNoBinaryForGpu);
  CHECK(m.message() ==
        "cuModuleLoadDataEx: CUDA_ERROR_NO_BINARY_FOR_GPU (209): no kernel image is available for execution on "
        "the device; jit log: fake jit: no image for sm_90 in this module");
  auto p = ctx->load_module(bytes_of("BADPTX .version 9.9"));
  REQUIRE_FALSE(p.ok());
  CHECK(p.code() == kCuErrorUnsupportedPtxVersion);
  CHECK(p.message().find("Unsupported .version 9.9") != std::string::npos);
  CHECK_FALSE(ctx->load_module(std::span<const std::byte>{}).ok());
}

TEST_CASE("moved-from handles release nothing twice", "[device]") {
  auto ctx = Context::primary(fake_driver(), 0);
  REQUIRE(ctx.ok());
  Context c2 = std::move(*ctx);
  auto buf = c2.allocate(8);
  REQUIRE(buf.ok());
  Buffer b2 = std::move(*buf);
  CHECK(b2.size() == 8);
  auto buf3 = c2.allocate(4);
  REQUIRE(buf3.ok());
  b2 = std::move(*buf3);
  CHECK(b2.size() == 4);
}
