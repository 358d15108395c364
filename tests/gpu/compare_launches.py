#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Compares `archguard check --json --cc X` of one program with what its launches returned: the
# program prints "<demangled kernel> <cuda error>" per kernel; every kernel's predicted error (0
# when it runs) must be the one returned. Usage: compare_launches.py CHECK_JSON LAUNCHES CC [LABEL]
import json, sys

o = json.load(open(sys.argv[1]))["devices"][0]["objects"][0]
label = (sys.argv[4] + " ") if len(sys.argv) > 4 else ""
pred = {k["demangled"]: (k["cuda_error"] if k["outcome"] == "fail" else 0) for k in o["kernels"]}
bad = 0
for line in open(sys.argv[2]):
    name, err = line.rsplit(" ", 1)
    p = pred.get(name)
    ok = p == int(err)
    bad += not ok
    print("%s %scc %s: %s predicted %s, launch returned %s" % ("ok" if ok else "MISMATCH", label, sys.argv[3], name, p, err.strip()))
print(label + "tier:", o["tier"], "-", o["summary"])
sys.exit(1 if bad else 0)
