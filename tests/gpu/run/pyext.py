# SPDX-License-Identifier: Apache-2.0
# The `pyext` case: Python loads a CUDA library with ctypes (as an extension module would be)
# and calls its pyext_run(), which launches a kernel built for another GPU only.
# Usage: python3 pyext.py LIBRARY. Prints code=<n> and exits 1 when the launch failed.
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.pyext_run.restype = ctypes.c_int
code = lib.pyext_run()
if code != 0:
    print("pyext_run failed: code=%d" % code)
    sys.exit(1)
print("pyext_run: ok")
