# SPDX-License-Identifier: Apache-2.0
"""CudaArchGuard: prevent and diagnose "no kernel image is available for execution on the device".

The wheel carries the ``archguard`` tool, ``archguard-verify`` and the CMake package; this module
asks the bundled tool and returns its JSON documents as dicts::

    import cudaarchguard
    cudaarchguard.check("libfoo.so", cc="9.0")   # archguard check --json --cc 9.0 libfoo.so
    cudaarchguard.doctor()                        # archguard doctor --json

``cmake_dir()`` is the directory of ``CudaArchGuardConfig.cmake`` (``find_package``'s
``CudaArchGuard_DIR``), also printed by ``cudaarchguard --cmakedir``.
"""
from __future__ import annotations

import json
import os
import subprocess
import types
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from ._tool import ArchGuardError, cmake_dir, executable, prefix

__all__ = ["ArchGuardError", "check", "cmake_dir", "doctor", "executable", "prefix", "__version__"]

try:
    from importlib.metadata import version as _version

    __version__ = _version("cudaarchguard")
except Exception:  # running from a source tree without the metadata
    __version__ = "unknown"

PathLike = Union[str, "os.PathLike[str]", types.ModuleType]


def _path_of(item: PathLike) -> str:
    """A path as the tool reads it; a module means its file, a package its directory."""
    if isinstance(item, types.ModuleType):
        file = getattr(item, "__file__", None)
        if not file:
            raise ArchGuardError(f"module {item.__name__} has no file (a built-in or namespace module)", 2, "")
        if hasattr(item, "__path__"):  # a package: its __init__.py holds no device code, its directory may
            return os.path.dirname(file)
        return file
    return os.fspath(item)


def _ccs(cc: Union[None, str, float, Iterable[Union[str, float]]]) -> List[str]:
    if cc is None:
        return []
    if isinstance(cc, (str, float, int)):
        cc = [cc]
    out = []
    for c in cc:
        text = str(c)
        if not text.strip():
            raise ArchGuardError("an empty compute capability (give one like '9.0', or cc=None)", 2, "")
        out.append(text)
    return out


def _run_json(args: Sequence[str], ok_codes: Sequence[int]) -> Dict[str, Any]:
    proc = subprocess.run([executable("archguard"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, check=False)
    document: Any = None
    try:
        document = json.loads(proc.stdout) if proc.stdout.strip() else None
    except ValueError:
        document = None
    if proc.returncode not in ok_codes or not isinstance(document, dict):
        errors = document.get("errors") if isinstance(document, dict) else None
        detail = "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors or [])
        message = detail or proc.stderr.strip() or f"archguard {' '.join(args)} exited {proc.returncode}"
        raise ArchGuardError(message, proc.returncode, proc.stderr)
    document.setdefault("exit_code", proc.returncode)
    return document


def check(path_or_module: Union[PathLike, Sequence[PathLike]],
          cc: Union[None, str, float, Iterable[Union[str, float]]] = None, *, deps: bool = True) -> Dict[str, Any]:
    """What the CUDA driver does with the device code of a file, directory, wheel or module on a GPU.

    ``cc`` is the compute capability ("8.6"; several for several GPUs); without it the GPUs of this
    machine are judged. Returns the document of ``archguard check --json`` (docs/json-schema.md)
    with ``exit_code``: 0 every kernel can run, 1 some cannot. Raises ArchGuardError on bad input
    (an unreadable file, an unknown compute capability).
    """
    items = path_or_module if isinstance(path_or_module, (list, tuple)) else [path_or_module]
    args = ["check", "--json"]
    for c in _ccs(cc):
        args += ["--cc", c]
    if not deps:
        args.append("--no-deps")
    args += ["--", *(_path_of(i) for i in items)]
    return _run_json(args, ok_codes=(0, 1))


def doctor(*files: PathLike, cc: Union[None, str, float, Iterable[Union[str, float]]] = None,
           smoke: bool = True) -> Dict[str, Any]:
    """The report of ``archguard doctor --json``: devices, versions, binaries, environment, smoke test.

    ``files`` are also judged against this machine's GPUs (and each ``cc``). ``exit_code`` is 0
    when nothing failed, 1 when a step failed, 3 when this machine has no CUDA driver.
    """
    args = ["doctor", "--json"]
    if not smoke:
        args.append("--no-smoke")
    for c in _ccs(cc):
        args += ["--cc", c]
    if files:
        args += ["--", *(_path_of(f) for f in files)]
    return _run_json(args, ok_codes=(0, 1, 3))
