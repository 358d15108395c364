// SPDX-License-Identifier: Apache-2.0
// Loads device code with the driver API and launches fixture_fill, printing the CUresult of the
// first call that fails ("result 0" when the kernel ran and wrote its value). Without an
// argument the code is the fatbin compiled in as plain data (blob.inc, in .rodata, as cuFFT
// keeps its fatbins); with one, the file it names (a cubin, a PTX file, a fatbin).
#include <cuda.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

alignas(8) static const unsigned char kBlob[] = {
#include "blob.inc"
};

static int report(const char* step, CUresult r) {
  std::printf("result %d at %s\n", static_cast<int>(r), step);
  return 0;
}

int main(int argc, char** argv) {
  std::vector<char> file;
  const void* image = kBlob;
  if (argc > 1) {
    std::ifstream in(argv[1], std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    file.push_back('\0');  // PTX must be NUL-terminated
    image = file.data();
  }
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return std::printf("no driver: %d\n", static_cast<int>(r)), 77;
  CUdevice dev;
  CUcontext ctx;
  if ((r = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) return std::printf("no device: %d\n", static_cast<int>(r)), 77;
  if ((r = cuCtxCreate(&ctx, nullptr, 0, dev)) != CUDA_SUCCESS) return report("cuCtxCreate", r);
  CUmodule mod;
  if ((r = cuModuleLoadData(&mod, image)) != CUDA_SUCCESS) return report("cuModuleLoadData", r);
  CUfunction fn;
  if ((r = cuModuleGetFunction(&fn, mod, "fixture_fill")) != CUDA_SUCCESS) return report("cuModuleGetFunction", r);
  CUdeviceptr p;
  if ((r = cuMemAlloc(&p, sizeof(int))) != CUDA_SUCCESS) return report("cuMemAlloc", r);
  int v = 42;
  void* params[] = {&p, &v};
  if ((r = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr)) != CUDA_SUCCESS) return report("cuLaunchKernel", r);
  if ((r = cuCtxSynchronize()) != CUDA_SUCCESS) return report("cuCtxSynchronize", r);
  int got = 0;
  if ((r = cuMemcpyDtoH(&got, p, sizeof got)) != CUDA_SUCCESS) return report("cuMemcpyDtoH", r);
  if (got != 42) return std::printf("result -1: the kernel wrote %d\n", got), 0;
  return report("launch", CUDA_SUCCESS);
}
