#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The rules corpus: what the configure summary promises against what the build does.

For every case of tests/data/rules/corpus.txt the module resolves the policy in script mode
(the same cuda_arch_guard_resolve_policy a configure runs; its summary's "runs:" line is what a
user reads), the real nvcc compiles a kernel with the gencode flags the module gives, and
`archguard check --cc X.Y --json` judges the object on every compute capability the summary
names. Any capability where the summary says natively / by JIT / not at all and check says
otherwise is a disagreement; so is a runs: line without the case's expected fragment.

usage: rules_corpus.py <cmake> <module dir> <nvcc> <archguard> <corpus> <work dir>
Exit 0 all agree, 1 a disagreement, 77 no nvcc (skipped).
"""
import json
import os
import re
import subprocess
import sys


def resolve(cmake, modules, nvcc, archguard, policy, ptx, arch_min, base):
    args = [cmake, f"-DARCH_POLICY={policy}", f"-DNVCC={nvcc}", f"-DARCHGUARD={archguard}", "-DFORMAT=gencode"]
    if ptx:
        args.append(f"-DARCH_PTX={ptx}")
    if arch_min:
        args.append(f"-DARCH_MIN={arch_min}")
    args += ["-P", os.path.join(modules, "CudaArchGuardPolicy.cmake")]
    p = subprocess.run(args, cwd=base, capture_output=True, text=True)
    if p.returncode != 0:
        return None, None, p.stderr
    runs = ""
    for line in p.stderr.splitlines():
        m = re.match(r"CudaArchGuard: runs: (.*)$", line)
        if m:
            runs = m.group(1)
    return p.stdout.strip(), runs, p.stderr


def promised(runs):
    """'natively on CC 8.0 8.6; by JIT on CC 9.0; not at all on CC 7.0; ...' -> {cc: outcome}."""
    out = {}
    for part in runs.split("; "):
        m = re.match(r"(natively|by JIT|not at all) on CC ([0-9. ]+)$", part)
        if not m:
            continue
        how = {"natively": "native", "by JIT": "jit", "not at all": "fail"}[m.group(1)]
        for cc in m.group(2).split():
            out[cc] = how
    return out


def main():
    if len(sys.argv) != 7:
        print(__doc__)
        return 2
    cmake, modules, nvcc, archguard, corpus, work = sys.argv[1:]
    if not os.access(nvcc, os.X_OK):
        print("no nvcc: skipped")
        return 77
    os.makedirs(work, exist_ok=True)
    kernel = os.path.join(work, "k.cu")
    with open(kernel, "w") as f:
        f.write("__global__ void k(float* p) { p[threadIdx.x] += 1.0f; }\n")
    base = os.path.dirname(os.path.abspath(corpus))
    bad = []
    cases = 0
    for n, line in enumerate(open(corpus), 1):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        fields = line.split("|")
        if len(fields) != 4:
            bad.append(f"{corpus}:{n}: not <policy>|<ptx>|<min>|<fragment>")
            continue
        policy, ptx, arch_min, fragment = (x.replace("@", ";") for x in fields)
        cases += 1
        name = f"{policy} (ARCH_PTX={ptx or 'highest'}{' ARCH_MIN=' + arch_min if arch_min else ''})"
        flags, runs, err = resolve(cmake, modules, nvcc, archguard, policy, ptx, arch_min, base)
        if flags is None:
            bad.append(f"{name}: the module failed:\n{err}")
            continue
        if fragment and fragment not in runs:
            bad.append(f"{name}: the runs: line lacks '{fragment}': {runs}")
        obj = os.path.join(work, f"case{n}.o")
        c = subprocess.run([nvcc, "-c", *flags.split(), kernel, "-o", obj], capture_output=True, text=True)
        if c.returncode != 0:
            bad.append(f"{name}: nvcc refused the flags {flags}:\n{c.stderr}")
            continue
        want = promised(runs)
        if not want:
            bad.append(f"{name}: no runs: line in the summary")
            continue
        for cc, how in sorted(want.items(), key=lambda kv: tuple(int(x) for x in kv[0].split("."))):
            p = subprocess.run([archguard, "check", obj, "--cc", cc, "--json"], capture_output=True, text=True)
            try:
                got = json.loads(p.stdout)["devices"][0]["objects"][0]["outcome"]
            except (ValueError, KeyError, IndexError):
                bad.append(f"{name}: archguard check --cc {cc} gave no verdict: {p.stdout}{p.stderr}")
                continue
            if got != how:
                bad.append(f"{name}: CC {cc}: the summary says {how}, archguard check of the build says {got} (flags: {flags})")
        print(f"case {name}: runs: {runs}")
    if bad:
        print(f"rules corpus: {cases} cases, disagreements:\n  " + "\n  ".join(bad))
        return 1
    print(f"rules corpus: {cases} cases agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
