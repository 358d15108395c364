#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 26 on a public wheel nobody here wrote: torchao 0.18.0 (3.4 MB; PyPI, cached in
# $ARCHGUARD_TOOLS/unit-wheels) ships _C_cutlass_90a (sm_90a only) and _C_mxfp8 (sm_100 +
# compute_120). Each object keeps its verdict; the package's verdict follows docs/verdicts.md:
# 9.0 and 10.0 run (the other object is built for other GPUs on purpose), 8.0 holds nothing for
# the GPU (exit 0). Skips (77) when the wheel cannot be downloaded.
# Usage: package_verdicts.sh ARCHGUARD REPO
set -u
ag=$1 repo=$2
cache=${ARCHGUARD_TOOLS:-$repo/.tools}/unit-wheels
mkdir -p "$cache"
py=${PYTHON:-python3}
[[ -x $repo/.venv/bin/python ]] && py=$repo/.venv/bin/python
whl=$(ls "$cache"/torchao-0.18.0-*.whl 2>/dev/null | head -1)
if [[ -z $whl ]]; then
  timeout 120 "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$cache" torchao==0.18.0 \
    >/dev/null 2>&1 || { echo "skip: torchao 0.18.0 cannot be downloaded here"; exit 77; }
  whl=$(ls "$cache"/torchao-0.18.0-*.whl | head -1)
fi
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for cc in 8.0 9.0 10.0; do
  "$ag" check --cc $cc --no-deps "$whl" > "$tmp/h$cc" 2>&1 || fail "check --cc $cc exits $?, expected 0"
  "$ag" check --json --cc $cc --no-deps "$whl" > "$tmp/j$cc" 2>/dev/null
done
grep -q '_C_mxfp8.*: fails with 209' "$tmp/h9.0" || fail "9.0: the object line of _C_mxfp8 changed"
grep -q 'package runs: 1 of 2 objects with device code run here' "$tmp/h9.0" || fail "9.0: package verdict"
grep -q '1 object built for newer GPUs only: _C_mxfp8' "$tmp/h9.0" || fail "9.0: why _C_mxfp8 is not a problem"
grep -q 'built for particular GPUs only.*_C_cutlass_90a' "$tmp/h10.0" || fail "10.0: why _C_cutlass_90a is not a problem"
grep -q 'package holds no device code for this GPU' "$tmp/h8.0" || fail "8.0: package verdict"
"$py" - "$tmp" <<'PY' || fail "check --json"
import json, sys
for cc, run, excused in (("9.0", 1, "_C_mxfp8"), ("10.0", 1, "_C_cutlass_90a")):
    d = json.load(open("%s/j%s" % (sys.argv[1], cc)))
    dev = d["devices"][0]
    assert not d["fails"], cc
    pk = dev["packages"][0]
    assert pk["run"] == run and not pk["problem"] and pk["objects"] == 2, pk
    ex = [o["object"] for o in dev["objects"] if o["excused"]]
    assert len(ex) == 1 and excused in ex[0], ex
PY
# doctor agrees with check
"$ag" doctor --no-smoke --cc 9.0 "$whl" > "$tmp/doctor" 2>&1
sed -n '/^\[3\]/,/^\[4\]/p' "$tmp/doctor" | grep -q 'PASS.*1 variants of the package' || fail "doctor step 3 does not pass with the variant"
# verify stays strict
"$ag" verify --require 90a "$whl" > /dev/null 2>&1 && fail "verify --require 90a passed a wheel whose _C_mxfp8 lacks it"
cat "$tmp/h9.0" "$tmp/h8.0" | grep -v '^    ' | cut -c1-250 | head -30
echo "$fails failure(s)"
[[ $fails -eq 0 ]]
