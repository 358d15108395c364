// SPDX-License-Identifier: Apache-2.0
// Host of the `plugin`, `children` and `stop` cases: a program built for the right GPU that
// dlopen()s a plugin library (libplugin_sm80.so) and calls its plugin_run(), which launches a
// kernel the plugin holds for another architecture only. The failing launch is in a file that
// is not the executable, loaded after start-up.
// Usage: plugin_host [--sleep-after SECONDS] LIBRARY
// Prints code=<n> of the call that failed and exits 1; exits 0 when the plugin's launch ran.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  int sleep_after = 0;
  const char* lib = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sleep-after") == 0 && i + 1 < argc)
      sleep_after = std::atoi(argv[++i]);
    else
      lib = argv[i];
  }
  if (lib == nullptr) {
    std::fprintf(stderr, "usage: plugin_host [--sleep-after SECONDS] LIBRARY\n");
    return 2;
  }
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess) {
    std::printf("cudaGetDeviceCount failed: code=%d (%s)\n", static_cast<int>(e), cudaGetErrorName(e));
    return 1;
  }
  void* handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::printf("dlopen(%s) failed: %s\n", lib, dlerror());
    return 2;
  }
  using run_fn = int (*)(void);
  auto run = reinterpret_cast<run_fn>(dlsym(handle, "plugin_run"));
  if (run == nullptr) {
    std::printf("dlsym(plugin_run) failed: %s\n", dlerror());
    return 2;
  }
  const int code = run();
  if (code != 0) std::printf("plugin_run failed: code=%d (%s)\n", code, cudaGetErrorName(static_cast<cudaError_t>(code)));
  else std::printf("plugin_run: ok\n");
  std::fflush(stdout);
  if (sleep_after > 0) sleep(static_cast<unsigned>(sleep_after));
  return code != 0 ? 1 : 0;
}
