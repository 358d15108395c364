#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the commands shown in the documentation, so that the docs cannot drift from the code.

The convention (docs/docs-test.md says it for writers):

* A fenced block with the info string ``console`` holds commands: each line that starts with
  ``$ `` is one command (a line ending in ``\\`` continues it); every other line is output and is
  not compared. A ``console`` block with no ``$ `` line is an error, and so is a ``sh``, ``bash``
  or ``shell`` block: commands are written as ``console`` blocks, output as plain blocks.
* The line before a block may be an HTML comment that changes how it runs:
  ``<!-- gpu -->``             needs a GPU: skipped here, run by scripts/gpu-validate.sh (--gpu);
  ``<!-- exit: N -->``         every command of the block must exit with N (default 0);
  ``<!-- norun: REASON -->``   not run at all (a command that installs into the system, runs
                               for many minutes, or needs what no test machine has); REASON is
                               required and should say which.
* The blocks of one file run in order, in one scratch directory per file, with the build's
  ``bin/`` (``archguard``) and nvcc on PATH. The scratch directory holds links to the source
  tree's top-level entries and ``build/default`` links to the build directory under test, so
  commands are written as a user of a source checkout types them (``samples/quickstart``,
  ``build/default/bin/archguard``). ``HOME`` and ``XDG_CACHE_HOME`` point into the scratch area,
  so that ``--prefix $HOME/.local`` and the JIT cache never touch the real ones.

Usage: run_doc_commands.py --source DIR --build DIR --work DIR [--gpu] [--list] [FILE...]
Exit 0 when every command behaved, 1 when one did not (each failure names file:line), 2 on a
malformed document or bad usage.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

MARK = re.compile(r"^<!--\s*(gpu|norun:\s*(?P<why>.+?)|exit:\s*(?P<code>\d+))\s*-->\s*$")


class Block:
    def __init__(self, path, line, info, mark, body):
        self.path, self.line, self.info, self.mark, self.body = path, line, info, mark, body
        self.commands = []  # (line number, command text)
        self.expect = 0
        self.gpu = False
        self.norun = None


def parse(path, rel):
    blocks, problems = [], []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+)\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info, start = len(m.group(1)), m.group(2), m.group(3).lower(), i + 1
        # the nearest non-empty line above the fence
        j = i - 1
        while j >= 0 and lines[j].strip() == "":
            j -= 1
        mark = lines[j].strip() if j >= 0 else ""
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            text = lines[i]
            body.append((i + 1, text[indent:] if text[:indent].strip() == "" else text.lstrip()))
            i += 1
        i += 1
        if info in ("sh", "bash", "shell", "zsh"):
            problems.append(f"{rel}:{start}: a ```{info} block: write commands as a ```console block "
                            f"with '$ ' before each command (and mark it <!-- gpu --> or <!-- norun: why --> "
                            f"if it cannot run in the docs test)")
            continue
        if info != "console":
            continue
        b = Block(rel, start, info, mark, body)
        mm = MARK.match(mark)
        if mm:
            if mark.startswith("<!-- gpu") or mm.group(1) == "gpu":
                b.gpu = True
            elif mm.group("why"):
                b.norun = mm.group("why")
            elif mm.group("code"):
                b.expect = int(mm.group("code"))
        elif mark.startswith("<!--") and re.search(r"norun|gpu|exit", mark):
            problems.append(f"{rel}:{start - 1}: '{mark}' is not a docs-test mark "
                            f"(<!-- gpu -->, <!-- exit: N -->, <!-- norun: reason -->)")
        cur, cur_line = None, 0
        for n, text in body:
            if cur is not None:
                cur += "\n" + text
                if not text.endswith("\\"):
                    b.commands.append((cur_line, cur))
                    cur = None
                continue
            if text.startswith("$ "):
                cur, cur_line = text[2:], n
                if not text.endswith("\\"):
                    b.commands.append((cur_line, cur))
                    cur = None
        if cur is not None:
            b.commands.append((cur_line, cur))
        if not b.commands:
            problems.append(f"{rel}:{start}: a ```console block without a '$ ' line: put '$ ' before each "
                            f"command, or use a plain ``` block for output")
            continue
        blocks.append(b)
    return blocks, problems


def scratch_dir(work, source, build, rel):
    d = os.path.join(work, re.sub(r"[^\w.-]", "_", rel))
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(os.path.join(d, "build"))
    for entry in os.listdir(source):
        if entry in ("build", ".git") or entry.startswith(".venv"):
            continue
        os.symlink(os.path.join(source, entry), os.path.join(d, entry))
    os.symlink(build, os.path.join(d, "build", "default"))
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--gpu", action="store_true", help="run the <!-- gpu --> blocks too")
    ap.add_argument("--list", action="store_true", help="only list the commands and how each runs")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    source, build = os.path.abspath(a.source), os.path.abspath(a.build)
    files = a.files
    if not files:
        files = ["README.md"]
        files += sorted("docs/" + f for f in os.listdir(os.path.join(source, "docs")) if f.endswith(".md"))
        files += sorted(f"samples/{d}/README.md" for d in os.listdir(os.path.join(source, "samples"))
                        if os.path.isfile(os.path.join(source, "samples", d, "README.md")))
    all_blocks, problems = [], []
    for rel in files:
        b, p = parse(os.path.join(source, rel), rel)
        all_blocks.append((rel, b))
        problems += p
    if problems:
        for p in problems:
            print(f"docs-test: {p}")
        return 2
    if a.list:
        for rel, blocks in all_blocks:
            for b in blocks:
                how = "gpu" if b.gpu else (f"norun ({b.norun})" if b.norun else f"run, exit {b.expect}")
                for n, c in b.commands:
                    print(f"{rel}:{n}: [{how}] {c}")
        return 0

    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.join(build, "bin"), env.get("PATH", ""), "/usr/local/cuda/bin"])
    env.pop("NO_COLOR", None)
    # The JIT cache of the commands goes to the scratch area, never the user's own cache.
    env["XDG_CACHE_HOME"] = os.path.join(os.path.abspath(a.work), "cache")
    # ... and $HOME (cmake --install --prefix $HOME/.local) is a scratch directory too.
    env["HOME"] = os.path.join(os.path.abspath(a.work), "home")
    os.makedirs(env["HOME"], exist_ok=True)
    env.pop("ARCHGUARD_CACHE_DIR", None)
    failures, ran, skipped = [], 0, 0
    for rel, blocks in all_blocks:
        runnable = [b for b in blocks if not b.norun and (a.gpu or not b.gpu)]
        skipped += sum(len(b.commands) for b in blocks if b not in runnable)
        if not runnable:
            continue
        cwd = scratch_dir(os.path.abspath(a.work), source, build, rel)
        for b in runnable:
            for n, cmd in b.commands:
                ran += 1
                try:
                    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                       timeout=a.timeout)
                    rc, out = p.returncode, p.stdout
                except subprocess.TimeoutExpired as e:
                    rc, out = "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
                status = "ok" if rc == b.expect else "FAILED"
                print(f"docs-test: {rel}:{n}: $ {cmd}  -> exit {rc} ({status})")
                if rc != b.expect:
                    tail = "\n".join(out.rstrip().split("\n")[-25:])
                    failures.append(f"{rel}:{n}: `{cmd}` exited {rc}, the doc expects {b.expect}\n{tail}")
    print(f"docs-test: {ran} command(s) run, {skipped} not run here (gpu or norun), {len(failures)} failed")
    for f in failures:
        print(f"docs-test: FAILED {f}\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
