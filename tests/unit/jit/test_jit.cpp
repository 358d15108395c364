// SPDX-License-Identifier: Apache-2.0
// NVRTC compiles (no GPU needed), the cache key, and loading through a fake driver.
#include <archguard/jit.hpp>

#include <catch2/catch.hpp>

#include "skip.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "jit/includes.hpp"
#include "jit_test_util.hpp"

using namespace archguard;
using namespace archguard::jit;
namespace fs = std::filesystem;

namespace {

const char* kSaxpy = R"(extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

const char* kTemplate = R"(template <typename T> __global__ void scale(T* p, T f) { p[threadIdx.x] *= f; }
)";

Target sass(unsigned sm) { return {{sm, Suffix::none}, CodeKind::sass}; }
Target ptx(unsigned sm) { return {{sm, Suffix::none}, CodeKind::ptx}; }

std::unique_ptr<Compiler> compiler_with(const CacheOptions& cache) {
  CompilerOptions o;
  o.cache = cache;
  auto r = Compiler::create(o);
  REQUIRE(r.ok());
  return std::move(*r);
}

std::unique_ptr<Compiler> compiler_in(const std::string& cache_dir) {
  CacheOptions c;
  c.dir = cache_dir;
  return compiler_with(c);
}

CompileRequest request(const char* src, Target t, std::string name = "saxpy.cu") {
  CompileRequest r;
  r.name = std::move(name);
  r.source = src;
  r.target = t;
  return r;
}

bool is_elf(const std::vector<std::byte>& b) {
  return b.size() > 4 && b[0] == std::byte{0x7f} && b[1] == std::byte{'E'} && b[2] == std::byte{'L'} &&
         b[3] == std::byte{'F'};
}

std::string text_of(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

Device dev(unsigned major, unsigned minor) { return device_for_cc({major, minor}); }

}  // namespace

TEST_CASE("the clamp rule picks sass of the device's major, else ptx the driver accepts", "[jit]") {
  const std::vector<unsigned> nv13 = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
  const Version2 isa90{9, 0};
  CHECK(*choose_target(dev(9, 0), nv13, isa90, {}) == sass(90));
  CHECK(*choose_target(dev(8, 6), nv13, isa90, {}) == sass(86));
  CHECK(*choose_target(dev(8, 9), nv13, isa90, {}) == sass(89));
  CHECK(*choose_target(dev(8, 7), nv13, isa90, {}) == sass(87));
  CHECK(*choose_target(dev(10, 3), nv13, isa90, {}) == sass(103));
  CHECK(*choose_target(dev(12, 1), nv13, isa90, {}) == sass(121));
  // An nvrtc that stops at 90 on a Blackwell device: no sass of major 10, so PTX compute_90.
  const std::vector<unsigned> nv12_4 = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90};
  CHECK(*choose_target(dev(10, 0), nv12_4, {8, 4}, {8, 8}) == ptx(90));
  CHECK(*choose_target(dev(12, 0), nv12_4, {8, 4}, {}) == ptx(90));
  // The same with a driver too old for that PTX.
  auto old_driver = choose_target(dev(10, 0), nv12_4, {9, 0}, {8, 8});
  REQUIRE_FALSE(old_driver.ok());
  CHECK(old_driver.message().find("its ptx (isa 9.0) is newer than the driver accepts (isa 8.8)") != std::string::npos);
  // A device below everything NVRTC supports.
  auto too_old = choose_target(dev(7, 0), nv13, isa90, {});
  REQUIRE_FALSE(too_old.ok());
  CHECK(too_old.message().find("none of which is <= sm_70") != std::string::npos);
}

TEST_CASE("nvrtc is found and reports itself", "[jit]") {
  auto missing = load_nvrtc("libarchguard-no-such-nvrtc.so");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message().rfind("no nvrtc: tried libarchguard-no-such-nvrtc.so (", 0) == 0);
  auto nv = shared_nvrtc();
  REQUIRE(nv.ok());
  const NvrtcInfo& info = nvrtc_info(**nv);
  CHECK(info.version.major >= 12);
  CHECK_FALSE(info.supported.empty());
  CHECK(std::is_sorted(info.supported.begin(), info.supported.end()));
  CHECK(info.build_id.size() >= 16);
  CHECK(info.library.find("nvrtc") != std::string::npos);
}

TEST_CASE("nvrtc's identity is read without keeping the library loaded", "[jit][memory]") {
  auto loaded = [] {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);)
      if (line.find("libnvrtc") != std::string::npos) return true;
    return false;
  };
  // Run as its own process (CTest) nothing has loaded NVRTC yet; run by hand after the other
  // cases, the shared one has, and must stay.
  const bool before = loaded();
  auto info = read_nvrtc_info();
  REQUIRE(info.ok());
#if defined(__SANITIZE_ADDRESS__)
  CHECK(loaded());  // sanitizer builds keep it (what NVRTC leaves when unloaded is reported as a leak)
  (void)before;
#else
  CHECK(loaded() == before);
#endif
  auto nv = shared_nvrtc();
  REQUIRE(nv.ok());
  const NvrtcInfo& shared = nvrtc_info(**nv);
  CHECK(info->library == shared.library);
  CHECK(info->version == shared.version);
  CHECK(info->supported == shared.supported);
  CHECK(info->build_id == shared.build_id);
  CHECK(info->ptx_isa == shared.ptx_isa);
  auto again = read_nvrtc_info();
  REQUIRE(again.ok());
  CHECK(loaded());  // the shared library keeps its own reference
  CHECK(again->build_id == shared.build_id);
  auto missing = read_nvrtc_info("libarchguard-no-such-nvrtc.so");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message().rfind("no nvrtc: tried libarchguard-no-such-nvrtc.so (", 0) == 0);
}

TEST_CASE("compiles to cubin and ptx for several architectures", "[jit]") {
  TempDir t;
  auto c = compiler_in(t.path + "/cache");
  for (unsigned sm : {75u, 90u, 120u}) {
    if (std::find(c->nvrtc().supported.begin(), c->nvrtc().supported.end(), sm) == c->nvrtc().supported.end()) continue;
    auto r = c->compile(request(kSaxpy, sass(sm)));
    REQUIRE(r.ok());
    CHECK(is_elf(r->image));
    CHECK_FALSE(r->from_cache);
  }
  auto p = c->compile(request(kSaxpy, ptx(80)));
  REQUIRE(p.ok());
  const std::string text = text_of(p->image);
  CHECK(text.find(".target sm_80") != std::string::npos);
  CHECK(text.find(".visible .entry saxpy") != std::string::npos);
  CHECK(text.find(".version " + std::to_string(c->nvrtc().ptx_isa.major)) != std::string::npos);
  auto lto = c->compile(request(kSaxpy, Target{{90, Suffix::none}, CodeKind::ltoir}));
  REQUIRE(lto.ok());
  CHECK_FALSE(lto->image.empty());
  CHECK_FALSE(is_elf(lto->image));
  CHECK(lto->key != p->key);
}

TEST_CASE("a second compile hits the cache; a changed option or target misses", "[jit]") {
  TempDir t;
  auto c = compiler_in(t.path + "/cache");
  auto first = c->compile(request(kSaxpy, sass(90)));
  REQUIRE(first.ok());
  CHECK_FALSE(first->from_cache);
  CHECK(first->compile_ms > 0);
  auto second = c->compile(request(kSaxpy, sass(90)));
  REQUIRE(second.ok());
  CHECK(second->from_cache);
  CHECK(second->image == first->image);
  CHECK(second->key == first->key);
  auto opt = request(kSaxpy, sass(90));
  opt.options = {"-lineinfo"};
  auto third = c->compile(opt);
  REQUIRE(third.ok());
  CHECK_FALSE(third->from_cache);
  CHECK(third->key != first->key);
  auto other = c->compile(request(kSaxpy, sass(80)));
  REQUIRE(other.ok());
  CHECK_FALSE(other->from_cache);
  // -pch does not change the output, so it does not change the key
  auto pch = request(kSaxpy, sass(90));
  pch.options = {"-pch"};
  CHECK(c->key(pch)->hex == first->key);
  // metadata beside the entry
  auto listed = c->cache()->list();
  REQUIRE(listed.ok());
  bool found = false;
  for (const auto& e : *listed) {
    if (e.key != first->key) continue;
    found = true;
    CHECK(e.metadata.find("\"target\": \"sm_90\"") != std::string::npos);
    CHECK(e.metadata.find("\"nvrtc_build_id\"") != std::string::npos);
    CHECK(e.metadata.find("\"compile_ms\"") != std::string::npos);
  }
  CHECK(found);
}

TEST_CASE("the key follows included headers' content, not their mtime", "[jit]") {
  TempDir t;
  fs::create_directories(t.path + "/inc/sub");
  write_file(t.path + "/inc/params.h", "#pragma once\n#include \"sub/more.h\"\n#define FACTOR 2\n");
  write_file(t.path + "/inc/sub/more.h", "#define OFFSET 1\n");
  auto c = compiler_in(t.path + "/cache");
  CompileRequest r = request("#include <params.h>\n__global__ void k(int* p) { *p = FACTOR + OFFSET; }\n", sass(90), "k.cu");
  r.options = {"-I" + t.path + "/inc"};
  auto k1 = c->key(r);
  REQUIRE(k1.ok());
  CHECK(k1->cacheable);
  CHECK(k1->fields_json.find("sub/more.h") != std::string::npos);
  auto first = c->compile(r);
  REQUIRE(first.ok());

  // Touch only the mtime of the nested header: same key, a hit.
  const std::string nested = t.path + "/inc/sub/more.h";
  struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
  REQUIRE(::utimes(nested.c_str(), tv) == 0);
  auto k2 = c->key(r);
  REQUIRE(k2.ok());
  CHECK(k2->hex == k1->hex);
  auto again = c->compile(r);
  REQUIRE(again.ok());
  CHECK(again->from_cache);

  // Change the nested header's content: a new key and a new compile.
  write_file(nested, "#define OFFSET 5\n");
  auto k3 = c->key(r);
  REQUIRE(k3.ok());
  CHECK(k3->hex != k1->hex);
  auto changed = c->compile(r);
  REQUIRE(changed.ok());
  CHECK_FALSE(changed->from_cache);

  // A header that appears where the scan looks first changes the key too.
  write_file(t.path + "/params.h", "#define FACTOR 3\n");
  CompileRequest rel = r;
  rel.name = t.path + "/k.cu";
  rel.source = "#include \"params.h\"\n__global__ void k(int* p) { *p = FACTOR; }\n";
  auto before = c->key(rel);
  fs::remove(t.path + "/params.h");
  auto after = c->key(rel);
  REQUIRE(before.ok());
  REQUIRE(after.ok());
  CHECK(before->hex != after->hex);
}

TEST_CASE("provided header strings and computed includes", "[jit]") {
  TempDir t;
  auto c = compiler_in(t.path + "/cache");
  CompileRequest r = request("#include \"cfg.h\"\n__global__ void k(int* p) { *p = V; }\n", sass(90), "k.cu");
  r.headers = {{"cfg.h", "#define V 1\n"}};
  auto a = c->key(r);
  r.headers[0].content = "#define V 2\n";
  auto b = c->key(r);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->hex != b->hex);
  auto built = c->compile(r);
  REQUIRE(built.ok());

  CompileRequest m = request("#define HDR \"cfg.h\"\n#include HDR\n__global__ void k(int* p) { *p = V; }\n", sass(90), "m.cu");
  m.headers = {{"cfg.h", "#define V 3\n"}};
  auto km = c->key(m);
  REQUIRE(km.ok());
  CHECK(km->cacheable);
  CompileRequest u = request("#include SOMEWHERE\n__global__ void k(int* p) { *p = 1; }\n", sass(90), "u.cu");
  u.options = {"-DSOMEWHERE=\"cfg.h\""};
  u.headers = {{"cfg.h", "\n"}};
  auto ku = c->key(u);
  REQUIRE(ku.ok());
  CHECK_FALSE(ku->cacheable);
  CHECK(ku->note.find("computed #include SOMEWHERE at u.cu:1") != std::string::npos);
  auto cu = c->compile(u);
  REQUIRE(cu.ok());
  CHECK_FALSE(cu->from_cache);
  CHECK(cu->key.empty());
  CHECK(cu->cache_note == ku->note);
}

TEST_CASE("name expressions give lowered names, also from the cache", "[jit]") {
  TempDir t;
  auto c = compiler_in(t.path + "/cache");
  CompileRequest r = request(kTemplate, sass(90), "scale.cu");
  r.name_expressions = {"scale<float>", "scale<int>"};
  auto first = c->compile(r);
  REQUIRE(first.ok());
  REQUIRE(first->lowered("scale<float>") != nullptr);
  CHECK(*first->lowered("scale<float>") == "_Z5scaleIfEvPT_S0_");
  CHECK(first->lowered("scale<double>") == nullptr);
  auto second = c->compile(r);
  REQUIRE(second.ok());
  CHECK(second->from_cache);
  CHECK(second->lowered_names == first->lowered_names);
}

TEST_CASE("a failed compile carries the log, the options and the numbered source lines", "[jit]") {
  TempDir t;
  auto c = compiler_in(t.path + "/cache");
  CompileRequest r = request("__global__ void k(int* p) {\n  int x = 1;\n  *p = undefined_name + x;\n}\n", sass(90), "broken.cu");
  r.options = {"-std=c++17"};
  auto e = c->compile(r);
  REQUIRE_FALSE(e.ok());
  CHECK(e.kind() == ErrorKind::nvrtc);
  CHECK(e.code() == 6);  // NVRTC_ERROR_COMPILATION
  CHECK(e.message().rfind("nvrtc: broken.cu: compiling for sm_90 failed: NVRTC_ERROR_COMPILATION (6)", 0) == 0);
  CHECK(e.message().find("options: -std=c++17 -arch=sm_90") != std::string::npos);
  CHECK(e.message().find("identifier \"undefined_name\" is undefined") != std::string::npos);
  CHECK(e.message().find("source lines:\n  broken.cu:3:   *p = undefined_name + x;") != std::string::npos);
  auto s = c->cache()->stats();
  REQUIRE(s.ok());
  CHECK(s->entries == 0);

  CompileRequest arch = request(kSaxpy, sass(90));
  arch.options = {"-arch=sm_80"};
  auto a = c->compile(arch);
  REQUIRE_FALSE(a.ok());
  CHECK(a.message().find("give the architecture as the request's target") != std::string::npos);
}

TEST_CASE("the cache can be disabled", "[jit]") {
  CacheOptions co;
  co.disabled = true;
  auto c = compiler_with(co);
  CHECK(c->cache() == nullptr);
  auto r = c->compile(request(kSaxpy, sass(90)));
  REQUIRE(r.ok());
  CHECK_FALSE(r->from_cache);
  CHECK(r->cache_note == "cache disabled");
}

TEST_CASE("a cache that fails degrades to an uncached compile", "[jit][hostile]") {
  // The cache is an optimisation: a directory it may not use, or one that breaks under it
  // (full or read-only file system, removed), never fails a compile that NVRTC finished.
  TempDir t;
  SECTION("a cache directory that cannot be used at all") {
    const std::string dir = t.path + "/shared";
    fs::create_directories(dir);
    ::chmod(dir.c_str(), 0777);  // refused as insecure, even for root
    auto c = compiler_in(dir);
    CHECK(c->cache() == nullptr);
    CHECK(c->cache_problem().find("writable by group or others") != std::string::npos);
    auto r = c->compile(request(kSaxpy, sass(90)));
    REQUIRE(r.ok());
    CHECK(is_elf(r->image));
    CHECK(r->cache_note.find("compiling without the cache") != std::string::npos);
  }
  SECTION("a cache that breaks while compiling") {
    auto c = compiler_in(t.path + "/cache");
    fs::remove_all(t.path + "/cache/v1/tmp");  // publishing now fails (ENOENT, as EROFS or ENOSPC would)
    auto r = c->compile(request(kSaxpy, sass(90)));
    REQUIRE(r.ok());
    CHECK(is_elf(r->image));
    CHECK_FALSE(r->from_cache);
    CHECK(r->cache_note.rfind("not cached: ", 0) == 0);
    REQUIRE_FALSE(c->cache()->warnings().empty());
    CHECK(c->cache()->warnings().back().rfind("not cached: ", 0) == 0);
    // A compile error is still an error, not a cache problem.
    auto bad = c->compile(request("__global__ void b(int* p) { *p = missing; }", sass(90), "bad.cu"));
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.message().find("missing") != std::string::npos);
  }
}

// ---- loading through a fake driver (tests/unit/device/fake_libcuda.cpp) ------------------

namespace {

device::DriverPtr fake_driver() {
  auto d = device::Driver::open({ARCHGUARD_FAKE_LIBCUDA, true});
  REQUIRE(d.ok());
  return *d;
}

void reset_fake(const device::DriverPtr& d) {
  void* p = d->symbol("fake_cuda_reset");
  REQUIRE(p != nullptr);
  void (*fn)() = nullptr;
  std::memcpy(&fn, &p, sizeof fn);
  fn();
}

Result<device::Context> primary_context(const device::DriverPtr& drv) {
  reset_fake(drv);
  auto ctx = device::Context::primary(drv, 0);
  REQUIRE(ctx.ok());
  return ctx;
}

// A compiler whose cache is in a temporary directory, and device 0 of the fake driver (its
// refusal counter reset).
struct FakeDevice {
  TempDir t;
  std::unique_ptr<Compiler> c = compiler_in(t.path + "/cache");
  device::DriverPtr drv = fake_driver();
  Result<device::Context> ctx = primary_context(drv);
};

}  // namespace

TEST_CASE("load compiles for the device, and a refused cached image is evicted and rebuilt once", "[jit]") {
  FakeDevice d;
  auto k = d.c->load(*d.ctx, request(kSaxpy, sass(75)), "saxpy");
  REQUIRE(k.ok());
  CHECK(k->compiled.target == sass(90));  // the fake device is CC 9.0
  CHECK(k->path == LaunchPath::jit);
  CHECK(k->reloads == 0);
  CHECK(k->function.name() == "saxpy");

  {
    ScopedEnv reject("FAKE_CUDA_REJECT_LOADS", "1");
    reset_fake(d.drv);
    auto again = d.c->load(*d.ctx, request(kSaxpy, sass(75)), "saxpy");
    REQUIRE(again.ok());
    CHECK(again->reloads == 1);
    CHECK_FALSE(again->compiled.from_cache);
    CHECK(again->reason.find("after evicting a refused cached image") != std::string::npos);
  }
  {
    ScopedEnv reject("FAKE_CUDA_REJECT_LOADS", "2");
    reset_fake(d.drv);
    auto fails = d.c->load(*d.ctx, request(kSaxpy, sass(75)), "saxpy");
    REQUIRE_FALSE(fails.ok());
    CHECK(fails.code() == device::kCuErrorNoBinaryForGpu);
    CHECK(fails.message().find("even after evicting the cached one") != std::string::npos);
    CHECK(fails.message().find("fake jit: load refused on purpose") != std::string::npos);
  }
  reset_fake(d.drv);
}

TEST_CASE("fallback: prebuilt when it runs on the device, jit otherwise", "[jit]") {
  FakeDevice d;
  const std::string fake_image = "a prebuilt fatbin";
  Prebuilt pb;
  pb.image = std::span(reinterpret_cast<const std::byte*>(fake_image.data()), fake_image.size());

  pb.images = {Image{CodeKind::sass, {80, Suffix::none}, {}, false, false}};
  auto jit = d.c->load_with_fallback(*d.ctx, pb, request(kSaxpy, sass(75)), "saxpy");
  REQUIRE(jit.ok());
  CHECK(jit->path == LaunchPath::jit);
  CHECK(jit->compiled.target == sass(90));
  CHECK(jit->reason.find("no prebuilt image runs on Fake GPU (cc 9.0)") != std::string::npos);

  pb.images = {Image{CodeKind::sass, {80, Suffix::none}, {}, false, false},
               Image{CodeKind::sass, {90, Suffix::none}, {}, false, false}};
  auto native = d.c->load_with_fallback(*d.ctx, pb, request(kSaxpy, sass(75)), "saxpy");
  REQUIRE(native.ok());
  CHECK(native->path == LaunchPath::prebuilt);
  CHECK(native->compiled.image.empty());

  // The engine says yes but the driver refuses: JIT, and the reason says so.
  ScopedEnv reject("FAKE_CUDA_REJECT_LOADS", "1");
  reset_fake(d.drv);
  auto refused = d.c->load_with_fallback(*d.ctx, pb, request(kSaxpy, sass(75)), "saxpy");
  REQUIRE(refused.ok());
  CHECK(refused->path == LaunchPath::jit);
  CHECK(refused->reason.find("the driver refused the prebuilt image") != std::string::npos);
  reset_fake(d.drv);
}

TEST_CASE("the per-process scan memo notices a same-size rewrite with the mtime put back", "[jit]") {
  TempDir t;
  archguard::jit::detail::set_memo_racy_window(std::chrono::nanoseconds(0));
  write_file(t.path + "/h.h", "#define A 1\n");
  struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
  REQUIRE(::utimes((t.path + "/h.h").c_str(), tv) == 0);
  auto c = compiler_in(t.path + "/cache");
  CompileRequest r = request("#include \"h.h\"\n__global__ void k(int* p) { *p = A; }\n", sass(90), t.path + "/k.cu");
  auto k1 = c->key(r);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto k1_memo = c->key(r);                               // served from the memo
  write_file(t.path + "/h.h", "#define A 2\n");           // same size
  REQUIRE(::utimes((t.path + "/h.h").c_str(), tv) == 0);  // same mtime; ctime moves on
  auto k2 = c->key(r);
  archguard::jit::detail::set_memo_racy_window(std::chrono::seconds(2));
  REQUIRE(k1.ok());
  REQUIRE(k1_memo.ok());
  REQUIRE(k2.ok());
  CHECK(k1->hex == k1_memo->hex);
  CHECK(k1->hex != k2->hex);
}

TEST_CASE("prebuilt images come from the fatbin reader", "[jit]") {
  const std::string dir = ARCHGUARD_BINARY_DIR "/tests/gpu/jit/";
  if (!fs::exists(dir + "kernels_sm80.fatbin")) ARCHGUARD_SKIP("no nvcc-built fatbins in " << dir);
  auto sm80 = read_text_file(dir + "kernels_sm80.fatbin");
  REQUIRE(sm80.ok());
  auto pb = Prebuilt::from_fatbin(std::as_bytes(std::span(sm80->data(), sm80->size())), "kernels_sm80.fatbin");
  REQUIRE(pb.ok());
  REQUIRE(pb->images.size() == 1);
  CHECK(pb->images[0].kind == CodeKind::sass);
  CHECK(pb->images[0].arch == Arch{80, Suffix::none});
  CHECK(select_image(pb->images, dev(9, 0)).outcome == Outcome::fail);
  auto all = read_text_file(dir + "kernels_all.fatbin");
  REQUIRE(all.ok());
  auto pa = Prebuilt::from_fatbin(std::as_bytes(std::span(all->data(), all->size())), "kernels_all.fatbin");
  REQUIRE(pa.ok());
  CHECK(pa->images.size() == 3);
  CHECK(select_image(pa->images, dev(9, 0)).outcome == Outcome::native);
  const std::string junk = "not a fatbin at all";
  CHECK_FALSE(Prebuilt::from_fatbin(std::as_bytes(std::span(junk.data(), junk.size())), "junk").ok());
}

// ---- hostile input, round three (issue 22) ------------------------------------------------

TEST_CASE("names, options and include spellings that are not utf-8 never throw", "[jit][hostile][issue22]") {
  // The key is written as JSON; nlohmann-json throws on bytes that are not UTF-8, and that
  // exception went through the Result API (an application's JIT fallback terminated).
  TempDir t;
  auto c = compiler_in(t.path + "/cache");
  const std::string src = std::string("#if 0\n#include \"caf\xe9.h\"\n#endif\n") + kSaxpy;
  CompileRequest r = request(src.c_str(), sass(90), "caf\xe9.cu");
  r.options.push_back("-DLATIN=\"\xe9\"");
  auto key = c->key(r);
  REQUIRE(key.ok());
  auto out = c->compile(r);
  REQUIRE(out.ok());
  CHECK(is_elf(out->image));
  auto again = c->compile(r);  // and the cache entry it wrote reads back
  REQUIRE(again.ok());
  CHECK(again->from_cache);
}

TEST_CASE("a bad cache setting costs the cache, never the compile", "[jit][hostile][issue22]") {
  TempDir t;
  SECTION("ARCHGUARD_CACHE_MAX_BYTES=-1") {
    ScopedEnv dir("ARCHGUARD_CACHE_DIR", (t.path + "/cache").c_str());
    ScopedEnv max("ARCHGUARD_CACHE_MAX_BYTES", "-1");
    auto c = Compiler::create({});
    REQUIRE(c.ok());
    CHECK((*c)->cache() == nullptr);
    CHECK((*c)->cache_problem().find("ARCHGUARD_CACHE_MAX_BYTES: '-1'") != std::string::npos);
    auto r = (*c)->compile(request(kSaxpy, sass(90)));
    REQUIRE(r.ok());
    CHECK(r->cache_note.find("compiling without the cache") != std::string::npos);
  }
  SECTION("none of HOME, XDG_CACHE_HOME, ARCHGUARD_CACHE_DIR") {
    ScopedEnv dir("ARCHGUARD_CACHE_DIR", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", nullptr);
    auto c = Compiler::create({});
    REQUIRE(c.ok());
    CHECK((*c)->cache() == nullptr);
    auto r = (*c)->compile(request(kSaxpy, sass(90)));
    REQUIRE(r.ok());
    CHECK(is_elf(r->image));
  }
}

TEST_CASE("a huge header named by an include is not read for the key, and under #if 0 not at all", "[jit][hostile][issue22]") {
  // The include scan read every header it found whole: a 3 GB sparse file aborted the compile.
  // Above 64 MiB it is not read; the source compiles, uncached. Under #if 0 it is not looked at.
  TempDir t;
  const std::string big = t.path + "/huge.h";
  { std::ofstream f(big); }
  fs::resize_file(big, std::uint64_t{100} << 20);  // sparse: nothing written
  auto c = compiler_in(t.path + "/cache");
  const std::string src = "#ifdef HUGE\n#include \"" + big + "\"\n#endif\n" + kSaxpy;
  auto key = c->key(request(src.c_str(), sass(90)));
  REQUIRE(key.ok());
  CHECK_FALSE(key->cacheable);
  CHECK(key->note.find("is larger than 64 MiB and not read for the key") != std::string::npos);
  auto out = c->compile(request(src.c_str(), sass(90)));
  REQUIRE(out.ok());
  CHECK_FALSE(out->from_cache);
  const std::string off = "#if 0\n#include \"" + big + "\"\n#endif\n" + kSaxpy;
  auto off_key = c->key(request(off.c_str(), sass(90)));
  REQUIRE(off_key.ok());
  CHECK(off_key->cacheable);
  CHECK(off_key->note.empty());
}
