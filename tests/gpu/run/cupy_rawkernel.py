# SPDX-License-Identifier: Apache-2.0
# Working case `cupy_rawkernel`: a cupy.RawKernel compiled at run time (NVRTC, for this GPU),
# loaded from memory and launched; the result is checked. `archguard run` must report no
# architecture failure. Exits 77 when cupy cannot be imported, 1 when the launch or result fails.
import sys

try:
    import cupy as cp
except Exception as e:  # noqa: BLE001
    print("skip: import cupy failed: %s" % e)
    sys.exit(77)

src = r'''
extern "C" __global__ void axpy(const float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''
try:
    kernel = cp.RawKernel(src, "axpy")
    n = 4096
    x = cp.arange(n, dtype=cp.float32)
    y = cp.ones(n, dtype=cp.float32)
    kernel(((n + 255) // 256,), (256,), (cp.float32(2.0), x, y, cp.int32(n)))
    cp.cuda.Device().synchronize()
    expect = 2.0 * cp.arange(n, dtype=cp.float32) + 1.0
    ok = bool(cp.allclose(y, expect))
except cp.cuda.driver.CUDADriverError as e:
    print("cupy driver error: %s" % e)
    sys.exit(1)
except cp.cuda.runtime.CUDARuntimeError as e:
    print("cupy runtime error: code=%d %s" % (e.status, e))
    sys.exit(1)
if not ok:
    print("axpy gave a wrong result")
    sys.exit(1)
print("cupy_rawkernel: ok")
