# SPDX-License-Identifier: Apache-2.0
# Working case `jax_prog`: jax.numpy matmul and a jitted function on the GPU (XLA compiles its
# kernels at run time and loads them from memory). `archguard run` must report no architecture
# failure. Exits 77 when jax cannot be imported, 1 when it does not run on the GPU or is wrong.
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
try:
    import jax
    import jax.numpy as jnp
except Exception as e:  # noqa: BLE001
    print("skip: import jax failed: %s" % e)
    sys.exit(77)

platform = jax.devices()[0].platform
if platform != "gpu":
    print("jax.devices()[0].platform is %r, not 'gpu'" % platform)
    sys.exit(1)


@jax.jit
def step(a, b):
    return jnp.tanh(a @ b) * 0.5 + 1.0


a = jnp.ones((512, 512), dtype=jnp.float32) / 512.0
b = jnp.eye(512, dtype=jnp.float32)
c = (a @ b).block_until_ready()
d = step(a, b).block_until_ready()
want = float(jnp.tanh(jnp.float32(1.0 / 512.0)) * 0.5 + 1.0)
if abs(float(c[0, 0]) - 1.0 / 512.0) > 1e-5 or abs(float(d[3, 7]) - want) > 1e-5:
    print("wrong result: c[0,0]=%s d[3,7]=%s want %s" % (c[0, 0], d[3, 7], want))
    sys.exit(1)
print("jax_prog: ok on %s" % jax.devices()[0])
