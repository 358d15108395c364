#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# check_json.py REPORT.json NAME EXPR...: evaluates each Python expression with r = the report
# (archguard run --json) and helpers; prints "ok NAME" or the first expression that is false.
import json
import sys


def failures(r):
    return [f for p in r["processes"] for f in p["failures"]]


def loads(r):
    return [l for p in r["processes"] for l in p["loads"]]


def fixes_text(f):
    return " ".join(x["text"] + " " + " ".join(x["details"]) for x in f["fixes"])


def main():
    path, name, exprs = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        with open(path, encoding="utf-8") as fh:
            r = json.load(fh)
    except (OSError, ValueError) as e:
        print(f"FAIL {name}: {path}: not a JSON report: {e}")
        return 1
    env = {"r": r, "failures": failures, "loads": loads, "fixes_text": fixes_text, "any": any, "all": all, "len": len}
    for e in exprs:
        try:
            ok = eval(e, env)  # noqa: S307 - the expressions are the test's own
        except Exception as ex:  # noqa: BLE001
            ok = False
            e = f"{e} (raised {ex!r})"
        if not ok:
            print(f"FAIL {name}: {e}")
            print(json.dumps(r, indent=1)[:6000])
            return 1
    print(f"ok {name}")
    return 0


sys.exit(main())
