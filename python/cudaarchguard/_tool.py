# SPDX-License-Identifier: Apache-2.0
"""Where the wheel's install tree is, and the console scripts that run its tools."""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class ArchGuardError(RuntimeError):
    """archguard refused its input or failed; ``returncode`` and ``stderr`` say how."""

    def __init__(self, message: str, returncode: int, stderr: str):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


def prefix() -> str:
    """The install prefix inside the package (bin/, lib/cmake/, share/)."""
    return _HERE


def cmake_dir() -> str:
    """The directory of CudaArchGuardConfig.cmake: CudaArchGuard_DIR for find_package()."""
    return os.path.join(_HERE, "lib", "cmake", "CudaArchGuard")


def executable(name: str = "archguard") -> str:
    path = os.path.join(_HERE, "bin", name)
    if not os.access(path, os.X_OK):
        raise ArchGuardError(f"{path} is missing: this cudaarchguard install has no {name}", 2, "")
    return path


def _exec(name: str) -> None:
    path = executable(name)
    # The tool's exit status and signals are the command's: replace this process.
    os.execv(path, [name, *sys.argv[1:]])


def archguard_main() -> None:
    _exec("archguard")


def verify_main() -> None:
    _exec("archguard-verify")
