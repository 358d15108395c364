#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 26: device-link drops and kernels left out of an image by their source.
#   app   : an -rdc program device-linked for sm_90 with a static library whose one member
#           (old_lib.cu) is built for sm_80 only. nvlink says nothing; the member's kernel is
#           missing from the linked sm_90 image and its launch fails with 500 on CC 9.0.
#   gated : a plain build for sm_80 + sm_90 whose source leaves gated_kernel out of the sm_80
#           image (#if __CUDA_ARCH__ >= 900): on CC 8.0 the driver takes the sm_80 image, the
#           kernel has no code there (500), by the source's own choice.
# check, verify, inspect, doctor and the CMake verify step must all name the drop; the gated
# kernel is named (check --json, the summary) but never fails a verdict. libold.a alone is one
# static library. Usage: link_drop.sh ARCHGUARD SOURCE_DIR CMAKE_MODULE_DIR. Skips (77) without
# nvcc. On a GPU: tests/gpu/link_drop (the same programs, real launches).
set -u
ag=$1 src=$2 modules=$3
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cli_nvcc
cli_tmp
bash "$src/build.sh" "$nvcc" "$src" "$tmp" || { echo "FAIL: nvcc"; exit 1; }
cli_count_failures
kernel='legacy::old_scale(float*, float)'

"$ag" check --cc 9.0 "$tmp/app" > "$tmp/check" 2>&1; rc=$?
[[ $rc -eq 1 ]] || fail "check --cc 9.0 exits $rc, expected 1"
grep -qF "$kernel: device-link drop, fails with 500" "$tmp/check" || fail "check does not name the drop"
grep -qF "old_lib.cu" "$tmp/check" || fail "check does not name the -rdc object"
grep -q 'new_scale' "$tmp/check" && fail "check names the kernel that runs"
"$ag" check --json --cc 9.0 "$tmp/app" > "$tmp/check.json"
python3 - "$tmp/check.json" "$kernel" <<'PY' || fail "check --json"
import json, sys
o = json.load(open(sys.argv[1]))["devices"][0]["objects"][0]
bad = [k for k in o["kernels"] if k["outcome"] == "fail"]
assert [k["demangled"] for k in bad] == [sys.argv[2]], bad
assert bad[0]["cuda_error"] == 500 and "old_lib.cu" in bad[0]["link_drop"], bad[0]
assert o["counts"]["link_drops"] == 1 and o["problem"], o["counts"]
PY

"$ag" verify "$tmp/app" --require 90 > "$tmp/verify" 2>&1; rc=$?
[[ $rc -eq 1 ]] || fail "verify --require 90 exits $rc, expected 1"
grep -qF "device-link drop: $kernel is not in the linked sm_90 image (its -rdc object, old_lib.cu, carries only sm_80(rel))" "$tmp/verify" ||
  fail "verify does not name the drop"
"$ag" inspect "$tmp/app" > "$tmp/inspect" 2>&1 || fail "inspect exits non-zero"
grep -qF "device-link drop: $kernel (old_lib.cu, sm_80(rel)) is not in the linked sm_90 image" "$tmp/inspect" || fail "inspect"
"$ag" doctor --no-smoke --cc 9.0 "$tmp/app" > "$tmp/doctor" 2>&1
sed -n '/^\[3\]/,/^\[4\]/p' "$tmp/doctor" > "$tmp/step3"
grep -q 'FAIL' "$tmp/step3" || fail "doctor step 3 is not FAIL"
grep -qF "$kernel" "$tmp/step3" || fail "doctor step 3 does not name the kernel"
cmake -DTARGET=app "-DFILES=$tmp/app" "-DREQUIRE=sass:90" "-DARCHGUARD=$ag" -DREASON=ARCH_POLICY \
  -P "$modules/CudaArchGuardVerify.cmake" > "$tmp/cmake" 2>&1 && fail "the CMake verify step passed"
grep -qF "device-link drop" "$tmp/cmake" || fail "the CMake verify step does not say device-link drop"

# The source's own choice: named, never a failure.
"$ag" check --cc 8.0 "$tmp/gated" > "$tmp/gated80" 2>&1 || fail "check --cc 8.0 gated exits non-zero"
grep -q '1 of 2 kernels are built for other GPUs only.*left out of this GPU.s image by their source' "$tmp/gated80" ||
  fail "check --cc 8.0 gated does not name the left-out kernel"
"$ag" check --cc 9.0 "$tmp/gated" > "$tmp/gated90" 2>&1 || fail "check --cc 9.0 gated exits non-zero"
grep -q 'built for other GPUs' "$tmp/gated90" && fail "check --cc 9.0 gated: nothing is left out on 9.0"
"$ag" check --json --cc 8.0 "$tmp/gated" > "$tmp/gated.json"
python3 - "$tmp/gated.json" <<'PY' || fail "check --json gated"
import json, sys
o = json.load(open(sys.argv[1]))["devices"][0]["objects"][0]
k = {x["demangled"]: x for x in o["kernels"]}
assert k["gated_kernel(float*)"]["outcome"] == "fail" and k["gated_kernel(float*)"]["cuda_error"] == 500, k
assert "sm_80" in k["gated_kernel(float*)"]["absent_from_image"], k
assert k["plain_kernel(float*)"]["outcome"] == "native", k
assert o["tier"] == "other-gpus" and not o["problem"], o["tier"]
PY
"$ag" verify "$tmp/gated" --require 80,90 > "$tmp/gatedv" 2>&1 || fail "verify of gated fails (its fatbin has both)"

# Fix order: under CUDA_FORCE_PTX_JIT=1 the SASS-only build fails; unsetting it comes first, the
# rebuild (add PTX) only for whoever needs forced JIT.
CUDA_FORCE_PTX_JIT=1 "$ag" doctor --no-smoke --json --cc 9.0 "$tmp/gated" > "$tmp/force.json" 2>/dev/null
python3 - "$tmp/force.json" <<'PY' || fail "doctor: fix order under CUDA_FORCE_PTX_JIT"
import json, sys
fixes = json.load(open(sys.argv[1]))["fixes"]
kinds = [f["kind"] for f in fixes if f["kind"] != "driver"]  # no driver here: that one comes first
env = [f for f in fixes if f["kind"] == "environment"]
assert kinds and kinds[0] == "environment" and "CUDA_FORCE_PTX_JIT" in env[0]["text"], fixes
assert all(not (f["kind"] == "rebuild" and not f["text"].startswith("only if")) for f in fixes), fixes
PY

# The static library alone: one object of kind static-library, its member named.
"$ag" check --json --cc 8.0 "$tmp/libold.a" > "$tmp/lib.json" || fail "check --cc 8.0 libold.a exits non-zero"
python3 - "$tmp/lib.json" <<'PY' || fail "check --json libold.a"
import json, sys
objs = json.load(open(sys.argv[1]))["devices"][0]["objects"]
assert len(objs) == 1 and objs[0]["kind"] == "static-library" and objs[0]["members"] == 1, objs
assert objs[0]["units"][0]["translation_unit"], objs[0]["units"]
PY

for f in check verify inspect step3 cmake gated80; do echo "--- $f"; cat "$tmp/$f"; done | cut -c1-300 | head -80
echo "$fails failure(s)"
[[ $fails -eq 0 ]]
