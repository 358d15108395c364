// SPDX-License-Identifier: Apache-2.0
// Every kernel of kernels/, device code only. Compiled two ways:
//   - into the embedded smoke-test fatbin of `archguard doctor` (nvcc -fatbin, every
//     architecture the installed nvcc supports plus PTX of the newest), see KernelEmbed.cmake;
//   - as part of archguard_kernels (launch.cu), under the project's architecture policy.
#include "saxpy.cuh"
#include "reduce.cuh"
#include "matmul.cuh"
#include "cluster_sum.cuh"
