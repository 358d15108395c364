// SPDX-License-Identifier: Apache-2.0
// The host side of ag_cluster_sum (cluster_sum.cuh) for the programs that launch it through the
// CUDA runtime: samples/arch-specific and the GPU matrix probe (tests/gpu/matrix/probe.cu). Host
// code: not among the sources NVRTC is given.
#ifndef ARCHGUARD_KERNELS_CLUSTER_SUM_HOST_CUH
#define ARCHGUARD_KERNELS_CLUSTER_SUM_HOST_CUH

#include <cuda_runtime.h>

#include <vector>

/// The device buffers of one ag_cluster_sum launch and the sum it must give.
struct AgClusterSum {
  float* x = nullptr;       ///< n floats
  double* sum = nullptr;    ///< zeroed: the kernel adds into it
  unsigned* tag = nullptr;  ///< zeroed: the kernel writes the tag of the image that ran
  double want = 0;          ///< the exact sum of x, computed on the host

  /// n floats x[i] = value(i) copied to the device, the sum and the tag zeroed.
  template <class Value>
  static AgClusterSum prepare(unsigned long long n, Value value) {
    AgClusterSum in;
    std::vector<float> host(n);
    for (unsigned long long i = 0; i < n; ++i) {
      host[i] = value(i);
      in.want += host[i];
    }
    cudaMalloc(&in.x, n * sizeof(float));
    cudaMalloc(&in.sum, sizeof(double));
    cudaMalloc(&in.tag, sizeof(unsigned));
    cudaMemcpy(in.x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(in.sum, 0, sizeof(double));
    cudaMemset(in.tag, 0, sizeof(unsigned));
    return in;
  }

  /// The sum and the image tag the kernel wrote (after the launch has completed).
  void result(double& got, unsigned& image_tag) const {
    cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost);
    cudaMemcpy(&image_tag, tag, sizeof image_tag, cudaMemcpyDeviceToHost);
  }
};

#endif
