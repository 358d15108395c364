// SPDX-License-Identifier: Apache-2.0
// The program `archguard run` watches in the tests without a GPU. It plays both sides: the
// CUDA driver (it loads CUDA_INJECTION64_PATH and calls InitializeInjection as cuInit does, and
// hands results to the fake CUPTI, which calls the recorder back) and a program (it loads
// nvcc-built plugins and launches their kernels). What the driver answers is set by the steps,
// so each test knows the truth. The device code handed over is real: files built by nvcc.
//
//   fake_run_app STEP [ARGS] [, STEP [ARGS]]...
//     init                          cuInit: load the injection library (CUDA_INJECTION64_PATH)
//     launch LIB RESULT [N]         dlopen LIB, launch the kernel archguard_test_kernel() returns
//                                   through cudaLaunchKernel N times (default 1), answered RESULT
//     launch-driver NAME RESULT     cuLaunchKernel of a function called NAME, from the last load
//     loaddata FILE RESULT          cuModuleLoadData of FILE's bytes copied to the heap
//     loadmapped FILE RESULT        cuModuleLoadData of FILE mapped from disk
//     loadfile FILE RESULT          cuModuleLoad(FILE)
//     getfunction NAME RESULT       cuModuleGetFunction(<last module>, NAME)
//     libload FILE [N]              cuLibraryLoadData of fatbin N (from 0) in FILE (mapped), answered 0:
//                                   what the runtime does for each fatbin it registered (lazily)
//     getkernel NAME RESULT         cuLibraryGetKernel(<last library>, NAME): where a lazy load fails
//     module FILE                   the driver reports FILE's bytes as a loaded module
//     spawn ARGS...                 run this program again with ARGS (a "+" stands for ","), wait
//     sleep SECONDS                 sleep
//     exit N                        exit with status N now
// Environment: FAKE_LIBCUDA (the fake libcuda.so.1 to load first), ARCHGUARD_CUPTI (the fake
// CUPTI, whose hooks it calls).
#include <cupti.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using ApiHook = int (*)(int, unsigned, int, const char*, const void*, void*, void*);
using ModuleHook = int (*)(void*, unsigned, const void*, size_t);
ApiHook g_api = nullptr;
ModuleHook g_module = nullptr;
int g_ctx = 0;
void* g_last_module = nullptr;
int g_module_handles[64];
unsigned g_modules = 0;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "fake_run_app: %s\n", why.c_str());
  std::exit(99);
}

void hooks() {
  if (g_api != nullptr) return;
  const char* cupti = std::getenv("ARCHGUARD_CUPTI");
  if (cupti == nullptr) return;
  void* lib = ::dlopen(cupti, RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return;  // the recorder did not load it: nothing to call back
  g_api = reinterpret_cast<ApiHook>(::dlsym(lib, "fake_cupti_api"));
  g_module = reinterpret_cast<ModuleHook>(::dlsym(lib, "fake_cupti_module"));
}

void api(CUpti_CallbackDomain d, unsigned cbid, const char* name, const void* params, void* ret) {
  hooks();
  if (g_api == nullptr) return;
  g_api(d, cbid, 0, name, params, ret, &g_ctx);
  g_api(d, cbid, 1, name, params, ret, &g_ctx);
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A driver API call `name` (callback `cbid`) with `params` that returned `result` (a number).
template <typename Params>
void driver_call(unsigned cbid, const char* name, Params params, const std::string& result) {
  CUresult r = static_cast<CUresult>(std::atoi(result.c_str()));
  api(CUPTI_CB_DOMAIN_DRIVER_API, cbid, name, &params, &r);
}

// The file `path` mapped read-only for the rest of the run; its size in `size`.
const void* map_file(const std::string& path, size_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  struct stat sb {};
  if (fd < 0 || ::fstat(fd, &sb) != 0) die("cannot open " + path);
  size = static_cast<size_t>(sb.st_size);
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) die("cannot map " + path);
  return m;
}

void init() {
  if (const char* cuda = std::getenv("FAKE_LIBCUDA"))
    if (::dlopen(cuda, RTLD_NOW | RTLD_GLOBAL) == nullptr) die(std::string("cannot load ") + cuda);
  const char* inject = std::getenv("CUDA_INJECTION64_PATH");
  if (inject == nullptr) return;
  void* lib = ::dlopen(inject, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return;  // the driver goes on without it
  using Init = int (*)();
  if (auto f = reinterpret_cast<Init>(::dlsym(lib, "InitializeInjection"))) f();
}

void load(const void* image, const char* fname, int result) {
  CUmodule mod = nullptr;
  CUresult r = static_cast<CUresult>(result);
  if (fname != nullptr) {
    cuModuleLoad_params p{&mod, fname};
    if (result == 0) mod = reinterpret_cast<CUmodule>(&g_module_handles[g_modules++ % 64]);
    api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleLoad, "cuModuleLoad", &p, &r);
  } else {
    cuModuleLoadData_params p{&mod, image};
    if (result == 0) mod = reinterpret_cast<CUmodule>(&g_module_handles[g_modules++ % 64]);
    api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData, "cuModuleLoadData", &p, &r);
  }
  g_last_module = mod;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::vector<std::string>> steps(1);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], ",") == 0) steps.emplace_back();
    else steps.back().emplace_back(argv[i]);
  }
  std::vector<std::vector<char>> keep;  // images stay alive, as a program's would
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const auto& st = steps[s];
    if (st.empty()) continue;
    const std::string& w = st[0];
    auto arg = [&](std::size_t i) -> const std::string& {
      if (i >= st.size()) die("step '" + w + "' needs more arguments");
      return st[i];
    };
    if (w == "init") {
      init();
    } else if (w == "launch") {
      void* lib = ::dlopen(arg(1).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) die(std::string("dlopen: ") + ::dlerror());
      using Get = const void* (*)();
      auto get = reinterpret_cast<Get>(::dlsym(lib, "archguard_test_kernel"));
      if (get == nullptr) die("no archguard_test_kernel in " + arg(1));
      const int n = st.size() > 3 ? std::atoi(st[3].c_str()) : 1;
      cudaError_t r = static_cast<cudaError_t>(std::atoi(arg(2).c_str()));
      for (int i = 0; i < n; ++i) {
        cudaLaunchKernel_v7000_params p{};
        p.func = get();
        api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel", &p, &r);
      }
    } else if (w == "launch-driver") {
      static std::vector<std::string> names;
      names.push_back(arg(1));
      cuLaunchKernel_params p{};
      p.f = reinterpret_cast<CUfunction>(const_cast<char*>(names.back().c_str()));
      CUresult r = static_cast<CUresult>(std::atoi(arg(2).c_str()));
      api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", &p, &r);
    } else if (w == "loaddata") {
      keep.push_back(read_file(arg(1)));
      load(keep.back().data(), nullptr, std::atoi(arg(2).c_str()));
    } else if (w == "loadmapped") {
      size_t size = 0;
      load(map_file(arg(1), size), nullptr, std::atoi(arg(2).c_str()));
    } else if (w == "loadfile") {
      load(nullptr, arg(1).c_str(), std::atoi(arg(2).c_str()));
    } else if (w == "getfunction") {
      CUfunction f = nullptr;
      driver_call(CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction, "cuModuleGetFunction",
                  cuModuleGetFunction_params{&f, static_cast<CUmodule>(g_last_module), arg(1).c_str()}, arg(2));
    } else if (w == "libload") {
      size_t size = 0;
      const auto* bytes = static_cast<const unsigned char*>(map_file(arg(1), size));
      const void* fatbin = nullptr;
      int skip = st.size() > 2 ? std::atoi(st[2].c_str()) : 0;
      for (size_t o = 0; o + 16 <= size && fatbin == nullptr; o += 8) {
        unsigned magic = 0;
        std::memcpy(&magic, bytes + o, 4);
        if (magic == 0xBA55ED50u && skip-- == 0) fatbin = bytes + o;
      }
      if (fatbin == nullptr) die("no fatbin in " + arg(1));
      static CUlibrary lib = nullptr;
      lib = reinterpret_cast<CUlibrary>(&g_module_handles[g_modules++ % 64]);
      cuLibraryLoadData_params p{};
      p.library = &lib;
      p.code = fatbin;
      CUresult r = CUDA_SUCCESS;
      api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData, "cuLibraryLoadData", &p, &r);
      g_last_module = lib;
    } else if (w == "getkernel") {
      CUkernel k = nullptr;
      driver_call(CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel, "cuLibraryGetKernel",
                  cuLibraryGetKernel_params{&k, static_cast<CUlibrary>(g_last_module), arg(1).c_str()}, arg(2));
    } else if (w == "module") {
      keep.push_back(read_file(arg(1)));
      hooks();
      if (g_module != nullptr) g_module(&g_ctx, 1, keep.back().data(), keep.back().size());
    } else if (w == "spawn") {
      const pid_t pid = ::fork();
      if (pid == 0) {
        std::vector<char*> a{argv[0]};
        static std::vector<std::string> child;
        for (std::size_t i = 1; i < st.size(); ++i) child.push_back(st[i] == "+" ? std::string(",") : st[i]);
        for (auto& c : child) a.push_back(c.data());
        a.push_back(nullptr);
        ::execv("/proc/self/exe", a.data());
        std::_Exit(98);
      }
      int status = 0;
      ::waitpid(pid, &status, 0);
    } else if (w == "sleep") {
      ::sleep(static_cast<unsigned>(std::atoi(arg(1).c_str())));
    } else if (w == "exit") {
      std::exit(std::atoi(arg(1).c_str()));
    } else {
      die("unknown step '" + w + "'");
    }
  }
  return 0;
}
