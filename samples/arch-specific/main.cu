// SPDX-License-Identifier: Apache-2.0
// arch-specific: one binary with a portable path, an sm_90 path (thread-block clusters adding
// partial sums through distributed shared memory) and arch-/family-specific images (sm_90a,
// one sm_XYf, see CMakeLists.txt). The kernel (kernels/cluster_sum.cuh) reports which image's code ran, so the program
// can say which image the driver picked.
//   --expect-tag N   exit 1 unless the image tag is N (9001 = sm_90a, 9000 = sm_90, ...)
#include "../common/sample_util.cuh"
#include "cluster_sum.cuh"
#include "cluster_sum_host.cuh"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

static std::string describe(unsigned tag) {
  std::string s = "sm_" + std::to_string(tag / 100);
  if (tag % 10 == 1) s += "a (arch-specific)";
  else if (tag % 10 == 2) s += "f (family-specific)";
  return s;
}

int main(int argc, char** argv) {
  long expect = -1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--expect-tag") == 0) expect = std::strtol(argv[i + 1], nullptr, 10);
  const cudaDeviceProp prop = sample::require_gpu(argv[0]);

  const unsigned long long n = 1 << 24;
  const AgClusterSum in = AgClusterSum::prepare(n, [](unsigned long long i) { return static_cast<float>(i % 1024) / 1024.0f; });

  const unsigned blocks = static_cast<unsigned>(prop.multiProcessorCount) * 2;
  const bool clusters = prop.major >= 9;
  cudaError_t e;
  if (clusters) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(256);
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 2;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    e = cudaLaunchKernelEx(&cfg, ag_cluster_sum, n, static_cast<const float*>(in.x), in.sum, in.tag);
  } else {
    ag_cluster_sum<<<blocks, 256>>>(n, in.x, in.sum, in.tag);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    sample::print_error("launching ag_cluster_sum", e);
    return 1;
  }
  double got = 0;
  unsigned tag = 0;
  in.result(got, tag);
  std::printf("the driver picked the %s image; code path: %s\n", describe(tag).c_str(),
              tag >= 9000 ? "thread-block clusters with distributed shared memory" : "portable (one atomic per block)");
  std::printf("launched %s clusters; sum %.3f, cpu %.3f\n", clusters ? "with 2-block" : "without", got, in.want);
  if (std::fabs(got - in.want) > 1e-9 * in.want) {
    std::printf("wrong sum\n");
    return 1;
  }
  if (expect >= 0 && static_cast<long>(tag) != expect) {
    std::printf("expected image tag %ld, got %u\n", expect, tag);
    return 1;
  }
  return 0;
}
