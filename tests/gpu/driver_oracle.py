#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The real driver as the oracle for archguard check, fatbin by fatbin, on software nobody here
wrote: every fatbin archguard finds in the given files and directories (a Python environment's
site-packages, the toolkit's lib64) is handed to cuModuleLoadDataEx on this machine's GPU, and what
the driver answers is compared with what `archguard check --json --no-deps` predicted for it.

  driver_oracle.py ARCHGUARD PATH... [--native N] [--fail N] [--jit N] [--budget SECONDS]
                   [--report FILE]

A prediction of "runs" (native or JIT, cuda_error 0) the driver refuses with 209 or 222 is a
missed failure; a prediction of 209/222 the driver loads is a false alarm. Both fail the run
(exit 1). Other answers (an image the driver calls invalid, out of memory) are counted and
listed, not judged. Per object at most N fatbins of each predicted outcome are loaded (evenly
spread over the object; JIT loads compile PTX and are slow); `--budget` stops loading when the
time is spent, saying so. Exit 77 without a driver or a GPU, 2 on bad usage.
"""
import argparse
import ctypes
import json
import subprocess
import sys
import time

CUDA_SUCCESS = 0


def load_driver():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        print(f"driver_oracle: no driver ({e})")
        sys.exit(77)
    if cuda.cuInit(0) != CUDA_SUCCESS:
        print("driver_oracle: cuInit failed: no usable GPU")
        sys.exit(77)
    dev = ctypes.c_int()
    if cuda.cuDeviceGet(ctypes.byref(dev), 0) != CUDA_SUCCESS:
        print("driver_oracle: no device 0")
        sys.exit(77)
    major, minor = ctypes.c_int(), ctypes.c_int()
    cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # COMPUTE_CAPABILITY_MAJOR
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)  # COMPUTE_CAPABILITY_MINOR
    ctx = ctypes.c_void_p()
    if cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) != CUDA_SUCCESS or cuda.cuCtxSetCurrent(ctx) != CUDA_SUCCESS:
        print("driver_oracle: no context on device 0")
        sys.exit(77)
    version = ctypes.c_int()
    cuda.cuDriverGetVersion(ctypes.byref(version))
    return cuda, f"{major.value}.{minor.value}", version.value


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):  # check exits 1 when something fails: that is a prediction
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[:400]}")
    return json.loads(p.stdout)


def spread(items, n):
    """At most n of items, evenly spaced, first and last included."""
    if n <= 0:
        return []
    if len(items) <= n:
        return items
    step = (len(items) - 1) / (n - 1) if n > 1 else 0
    return [items[round(i * step)] for i in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archguard")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--native", type=int, default=300)
    ap.add_argument("--fail", type=int, default=300)
    ap.add_argument("--jit", type=int, default=3)
    ap.add_argument("--budget", type=float, default=600)
    ap.add_argument("--report")
    args = ap.parse_args()

    cuda, cc, driver_cuda = load_driver()
    t0 = time.monotonic()
    lines = [f"# driver oracle: device 0, cc {cc}, driver CUDA {driver_cuda // 1000}.{driver_cuda % 1000 // 10}", ""]
    totals = {"loaded": 0, "agree": 0, "missed": 0, "false_alarm": 0, "other": 0, "objects": 0, "skipped_relocatable": 0,
              "unmatched": 0}
    problems, others = [], []
    out_of_time = False

    objects = []
    for path in args.paths:
        inv = run_json([args.archguard, "inspect", "--json", path])
        for inp in inv.get("inputs", []):
            for obj in inp.get("objects", []):
                if obj.get("archive") or not obj.get("fatbins"):
                    continue  # members of static libraries and wheels are not loaded as they stand
                objects.append(obj)

    for obj in objects:
        path = obj["path"]
        if out_of_time:
            break
        fatbins = {f["index"]: f for f in obj["fatbins"]}
        chk = run_json([args.archguard, "check", "--json", "--no-deps", "--no-kernels", "--cc", cc, path])
        units = []
        for dev in chk.get("devices", []):
            for o in dev.get("objects", []):
                units.extend(o.get("units", []))
        by_outcome = {}
        for u in units:
            if u["images"] and all(i.get("relocatable") for i in u["images"]):
                totals["skipped_relocatable"] += 1  # linked by nvlink, never loaded as it stands
                continue
            by_outcome.setdefault(u["verdict"]["outcome"], []).append(u)
        chosen = spread(by_outcome.get("native", []), args.native) + spread(by_outcome.get("fail", []), args.fail) + \
            spread(by_outcome.get("jit", []), args.jit)
        if not chosen:
            continue
        totals["objects"] += 1
        with open(path, "rb") as f:
            data = f.read()
        counts = {}
        for u in chosen:
            if time.monotonic() - t0 > args.budget:
                out_of_time = True
                break
            fb = fatbins.get(u["fatbin"])
            if fb is None:
                totals["unmatched"] += 1
                problems.append(f"UNMATCHED {path}: fatbin {u['fatbin']} of check is not in inspect's list")
                continue
            blob = ctypes.create_string_buffer(data[fb["offset"]:fb["offset"] + fb["size"]], fb["size"] + 8)
            mod = ctypes.c_void_p()
            r = cuda.cuModuleLoadDataEx(ctypes.byref(mod), blob, 0, None, None)
            if r == CUDA_SUCCESS:
                cuda.cuModuleUnload(mod)
            predicted = u["verdict"]["cuda_error"]
            key = (u["verdict"]["outcome"], r)
            counts[key] = counts.get(key, 0) + 1
            totals["loaded"] += 1
            where = f"{path}: fatbin {u['fatbin']} at {hex(fb['offset'])} ({fb['section_name'] or fb['section']}, " \
                    f"{' '.join(i['arch'] for i in u['images'])})"
            if r == predicted:
                totals["agree"] += 1
            elif predicted == 0 and r in (209, 222):
                totals["missed"] += 1
                problems.append(f"MISSED {where}: predicted {u['verdict']['outcome']}, the driver says {r}")
            elif predicted in (209, 222) and r == CUDA_SUCCESS:
                totals["false_alarm"] += 1
                problems.append(f"FALSE ALARM {where}: predicted {predicted}, the driver loads it")
            else:
                totals["other"] += 1
                others.append(f"{where}: predicted {u['verdict']['outcome']} ({predicted}), the driver says {r}")
        summary = ", ".join(f"{o} -> {r}: {n}" for (o, r), n in sorted(counts.items()))
        lines.append(f"- `{path}`: {len(units)} units; loaded {sum(counts.values())} ({summary})")

    lines += ["", f"loaded {totals['loaded']} fatbins of {totals['objects']} objects in {time.monotonic() - t0:.0f} s: "
              f"{totals['agree']} as predicted, {totals['missed']} missed failures, {totals['false_alarm']} false alarms, "
              f"{totals['other']} other answers; {totals['skipped_relocatable']} relocatable units not loaded"]
    if out_of_time:
        lines.append(f"stopped after the {args.budget:.0f} s budget: the remaining objects were not loaded")
    lines += [f"  {p}" for p in problems[:50]] + [f"  other: {o}" for o in others[:20]]
    text = "\n".join(lines)
    print(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
    if totals["loaded"] == 0:
        print("driver_oracle: nothing was loaded: no device code in the given paths")
        return 1
    return 1 if totals["missed"] or totals["false_alarm"] or totals["unmatched"] else 0


if __name__ == "__main__":
    sys.exit(main())
