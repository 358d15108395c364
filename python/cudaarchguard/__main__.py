# SPDX-License-Identifier: Apache-2.0
"""`cudaarchguard` / `python -m cudaarchguard`: where the CMake package and the tools are.

  --cmakedir  the directory of CudaArchGuardConfig.cmake (for -DCudaArchGuard_DIR=)
  --prefix    the install prefix (for -DCMAKE_PREFIX_PATH=)
  --version   the package version
"""
from __future__ import annotations

import argparse
import sys

from . import __version__
from ._tool import cmake_dir, prefix


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cudaarchguard",
                                     description="where the CudaArchGuard CMake package and tools are installed "
                                                 "(the tool itself is 'archguard')")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--cmakedir", action="store_true", help="print the directory of CudaArchGuardConfig.cmake")
    group.add_argument("--prefix", action="store_true", help="print the install prefix (CMAKE_PREFIX_PATH)")
    group.add_argument("--version", action="store_true", help="print the version")
    args = parser.parse_args(argv)
    if args.cmakedir:
        print(cmake_dir())
    elif args.prefix:
        print(prefix())
    else:
        print(__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
