#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The fatbin-composition matrix: for each case of cases.txt, build the probe with nvcc, ask
`archguard check --cc <GPU's capability> --json` what will happen, launch it for real, and
compare. Writes a markdown table (--out) and exits 0 when every prediction held, 1 otherwise,
77 when there is no GPU.

  matrix.py --nvcc NVCC --archguard AG --kernels DIR --work DIR [--out FILE] [--jobs N]
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def read_cases(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, flags, env, what = (line.split("|") + ["", "", ""])[:4]
            env_vars = dict(kv.split("=", 1) for kv in env.split())
            cases.append({"name": name, "flags": flags, "env": env_vars, "what": what})
    return cases


def gpu_info():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap,name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    cc, name, driver = [s.strip() for s in out.stdout.strip().splitlines()[0].split(",")]
    return {"cc": cc, "name": name, "driver": driver}


def build(case, args):
    exe = os.path.join(args.work, "probe_" + case["name"])
    cmd = [args.nvcc, "-O2", "-I", args.kernels] + shlex.split(case["flags"]) + [
        os.path.join(HERE, "probe.cu"), "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return exe, r.returncode, r.stderr.strip()


def image_names(summary):
    # "runs natively (sm_90a)" / "runs after a JIT of compute_80 (first-launch delay)"
    m = re.search(r"natively \(([^)]*)\)", summary) or re.search(r"JIT of (.*?) \(first-launch", summary)
    return [s.strip() for s in m.group(1).split(",")] if m else []


def predict(case, exe, gpu, args):
    cmd = [args.archguard, "check", "--cc", gpu["cc"], "--driver", gpu["driver"], "--json", exe]
    if case["env"].get("CUDA_FORCE_PTX_JIT", "0") not in ("", "0"):
        cmd.append("--force-ptx-jit")
    if case["env"].get("CUDA_DISABLE_PTX_JIT", "0") not in ("", "0"):
        cmd.append("--disable-ptx-jit")
    r = subprocess.run(cmd, capture_output=True, text=True)
    try:
        doc = json.loads(r.stdout)
        objs = [o for o in doc["devices"][0]["objects"] if o.get("device_code")]
        o = objs[0]
        return {"outcome": o["outcome"], "error": o["cuda_error"], "summary": o["summary"],
                "images": image_names(o["summary"]), "exit": r.returncode}
    except (ValueError, KeyError, IndexError) as e:
        return {"outcome": "?", "error": -1, "summary": "archguard check gave no verdict: %s %s" % (e, r.stderr.strip()),
                "images": [], "exit": r.returncode}


def launch(case, exe):
    env = dict(os.environ)
    env.update(case["env"])
    try:
        r = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "line": "timed out"}
    line = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr.strip()
    m = re.match(r"ok tag=(\d+) first_launch_ms=([\d.]+)", line)
    if m:
        return {"status": "ok", "tag": int(m.group(1)), "ms": float(m.group(2)), "line": line}
    m = re.match(r"error code=(\d+) name=(\S+)", line)
    if m:
        return {"status": "error", "code": int(m.group(1)), "name": m.group(2), "line": line}
    if r.returncode == 77:
        return {"status": "skip", "line": line}
    return {"status": "bad", "line": line + " (exit %d)" % r.returncode}


def tag_name(tag, prefix):
    suffix = {0: "", 1: "a", 2: "f"}.get(tag % 10, "?")
    return "%s_%d%s" % (prefix, tag // 100, suffix)


def agrees(p, o):
    if p["outcome"] == "fail":
        return o["status"] == "error" and o["code"] == p["error"]
    if o["status"] != "ok":
        return False
    prefix = "sm" if p["outcome"] == "native" else "compute"
    return tag_name(o["tag"], prefix) in p["images"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvcc", required=True)
    ap.add_argument("--archguard", required=True)
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cases", default=os.path.join(HERE, "cases.txt"))
    ap.add_argument("--out")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    gpu = gpu_info()
    if gpu is None:
        print("no GPU (nvidia-smi did not answer): skipped")
        return 77
    os.makedirs(args.work, exist_ok=True)
    cases = read_cases(args.cases)
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        built = list(pool.map(lambda c: build(c, args), cases))

    rows, mismatches = [], 0
    for case, (exe, rc, err) in zip(cases, built):
        if rc != 0:
            rows.append((case, None, {"status": "bad", "line": "nvcc failed: " + err.splitlines()[-1] if err else "nvcc failed"}, False))
            mismatches += 1
            continue
        p = predict(case, exe, gpu, args)
        o = launch(case, exe)
        if o["status"] == "skip":
            print("probe says no GPU: skipped")
            return 77
        ok = agrees(p, o)
        mismatches += 0 if ok else 1
        rows.append((case, p, o, ok))

    lines = ["GPU: %s, compute capability %s, driver %s; %d cases, %d predicted correctly" % (
        gpu["name"], gpu["cc"], gpu["driver"], len(rows), len(rows) - mismatches), "",
        "| case | built with | environment | `archguard check` predicts | real launch | first launch | agree |",
        "|---|---|---|---|---|---|---|"]
    for case, p, o, ok in rows:
        env = " ".join("%s=%s" % kv for kv in case["env"].items()) or "-"
        pred = "-" if p is None else ("fail %d" % p["error"] if p["outcome"] == "fail" else
                                      "%s (%s)" % (p["outcome"], ", ".join(p["images"])))
        if o["status"] == "ok":
            real = "runs, code for %s (tag %d)" % (tag_name(o["tag"], "sm")[3:], o["tag"])
            ms = "%.2f ms" % o["ms"]
        elif o["status"] == "error":
            real = "%s (%d)" % (o["name"], o["code"])
            ms = "-"
        else:
            real, ms = o["line"], "-"
        lines.append("| %s | `%s` | %s | %s | %s | %s | %s |" % (
            case["name"], case["flags"] or "(none)", env, pred, real, ms, "yes" if ok else "**NO**"))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
