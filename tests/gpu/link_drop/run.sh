#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds tests/cli/link_drop's programs for this GPU: app (-rdc, device-linked for this GPU's
# architecture, with an -rdc member built for an older one only) and gated (this architecture
# and the next, the kernel left out of this one's image), asks `archguard check --json --cc
# <this GPU>` for each kernel's verdict, launches each kernel and compares the error numbers.
# Exit 77 without a GPU or nvcc.
set -u
ag=$1 src=$2
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x $nvcc ]] || { echo "skip: no nvcc"; exit 77; }
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
[[ -n $cc ]] || { echo "skip: no GPU"; exit 77; }
sm=${cc/./}
old=80; [[ $sm -le 80 ]] && old=75
next=$((sm + 10)); [[ $sm -eq 90 ]] && next=100
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$nvcc" -rdc=true -c -gencode arch=compute_$old,code=sm_$old "$src/old_lib.cu" -o "$tmp/old_lib.o" || exit 1
"$nvcc" -rdc=true -c -gencode arch=compute_$sm,code=sm_$sm "$src/new_part.cu" -o "$tmp/new_part.o" || exit 1
"$nvcc" -rdc=true -c -gencode arch=compute_$sm,code=sm_$sm "$src/main.cu" -o "$tmp/main.o" || exit 1
ar rcs "$tmp/libold.a" "$tmp/old_lib.o"
"$nvcc" -gencode arch=compute_$sm,code=sm_$sm "$tmp/main.o" "$tmp/new_part.o" "$tmp/libold.a" -o "$tmp/app" || exit 1
"$nvcc" -DGATE=$((next * 10)) -gencode arch=compute_$sm,code=sm_$sm -gencode arch=compute_$next,code=sm_$next \
  "$src/gated.cu" -o "$tmp/gated" || exit 1
bad=0
for prog in app gated; do
  "$tmp/$prog" > "$tmp/$prog.real"; rc=$?
  [[ $rc -eq 77 ]] && { echo "skip: no usable device"; exit 77; }
  "$ag" check --json --cc "$cc" "$tmp/$prog" > "$tmp/$prog.json"
  python3 - "$tmp/$prog.json" "$tmp/$prog.real" "$cc" "$prog" <<'PY' || bad=1
import json, sys
o = json.load(open(sys.argv[1]))["devices"][0]["objects"][0]
pred = {k["demangled"]: (k["cuda_error"] if k["outcome"] == "fail" else 0) for k in o["kernels"]}
bad = 0
for line in open(sys.argv[2]):
    name, err = line.rsplit(" ", 1)
    p = pred.get(name)
    ok = p == int(err)
    bad += not ok
    print("%s %s cc %s: %s predicted %s, launch returned %s" % ("ok" if ok else "MISMATCH", sys.argv[4], sys.argv[3], name, p, err.strip()))
print(sys.argv[4], "tier:", o["tier"], "-", o["summary"])
sys.exit(1 if bad else 0)
PY
done
exit $bad
