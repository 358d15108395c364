#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Scenario of issue 9: an application of three translation units, one of them (old_tu.cu) built
# for sm_80/86 only while the others carry sm_90. On CC 9.0:
#   check   : "some kernels have no image", exit 1, naming old_tu's kernel (and the TU where the
#             binary records it), not the other two;
#   verify  : fails naming the same kernel; main.cu's kernel-less fatbin decides nothing;
#   doctor  : step 3 FAIL with the same kernel, the right counts, no "without a usable image";
#   the CMake verify step: the same kernel, the path once, no ';' turned into line breaks.
# On CC 8.6 everything runs. Usage: stale_tu.sh ARCHGUARD SOURCE_DIR CMAKE_MODULE_DIR.
# Skips (77) without nvcc. The lead's H200 run: tests/gpu/stale_tu (same binary, real launch).
set -u
ag=$1 src=$2 modules=$3
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cli_nvcc
cli_tmp
G=(-gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 -gencode arch=compute_90,code=sm_90)
"$nvcc" -c "${G[@]}" "$src/good_a.cu" -o "$tmp/good_a.o" &
"$nvcc" -c "${G[@]}" "$src/good_b.cu" -o "$tmp/good_b.o" &
"$nvcc" -c -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 "$src/old_tu.cu" -o "$tmp/old_tu.o" &
"$nvcc" -c "${G[@]}" "$src/main.cu" -o "$tmp/main.o"
wait
"$nvcc" "${G[@]}" "$tmp/good_a.o" "$tmp/good_b.o" "$tmp/old_tu.o" "$tmp/main.o" -o "$tmp/app" || { echo "FAIL: nvcc"; exit 1; }
cli_count_failures
kernel='legacy::stale_scale(float*, float)'
# Translation units are named where the fatbin reader attributes them (symbol table of this
# unstripped binary). ARCHGUARD_EXPECT_TU=1 makes it required; otherwise it is required as soon
# as the reader attributes any fatbin of the binary.
tu=""
if [[ ${ARCHGUARD_EXPECT_TU:-0} == 1 ]] ||
   "$ag" check --json --cc 9.0 "$tmp/app" 2>/dev/null | grep -q '"translation_unit": *"[^"]'; then
  tu=old_tu.cu
else
  echo "note: this build's reader does not attribute fatbins to translation units; kernels only"
fi
names() {  # $1 = what, $2 = file with the output
  grep -qF "$kernel" "$2" || fail "$1 does not name $kernel"
  grep -qE 'good_a_kernel|good_b_kernel' "$2" && fail "$1 names a kernel that runs"
  if [[ -n $tu ]]; then grep -qF "$tu" "$2" || fail "$1 does not name $tu"; fi
}

"$ag" check "$tmp/app" --cc 9.0 > "$tmp/check" 2>&1; rc=$?
[[ $rc -eq 1 ]] || fail "check --cc 9.0 exits $rc, expected 1"
grep -q 'some kernels have no image for this GPU: 1 of 3 kernels fail with 209' "$tmp/check" || fail "check: tier"
grep -q 'fails with' "$tmp/check" && fail "check: 'fails with' (the other kernels run)"
names check "$tmp/check"
"$ag" check "$tmp/app" --cc 8.6 > "$tmp/check86" 2>&1 || fail "check --cc 8.6 exits non-zero"
"$ag" check --json "$tmp/app" --cc 9.0 > "$tmp/check.json"
python3 - "$tmp/check.json" "$kernel" <<'PY' || fail "check --json"
import json, sys
d = json.load(open(sys.argv[1])); o = d["devices"][0]["objects"][0]
assert d["schema"] == "archguard.check/2" and d["fails"], d["schema"]
assert o["tier"] == "some-missing" and o["problem"] and o["kind"] == "executable", o["tier"]
c = o["counts"]; assert (c["kernels"], c["native"], c["failed"]) == (3, 2, 1), c
bad = [k for k in o["kernels"] if k["outcome"] == "fail"]
assert [k["demangled"] for k in bad] == [sys.argv[2]] and bad[0]["cuda_error"] == 209, bad
print("ok: check --json")
PY

"$ag" verify "$tmp/app" --require 80,86,90 > "$tmp/verify" 2>&1; rc=$?
[[ $rc -eq 1 ]] || fail "verify exits $rc, expected 1"
names verify "$tmp/verify"
grep -q '1 lacking' "$tmp/verify" || fail "verify: more than the stale fatbin lacks sm_90"

"$ag" doctor --no-smoke --cc 9.0 "$tmp/app" > "$tmp/doctor" 2>&1
sed -n '/^\[3\]/,/^\[4\]/p' "$tmp/doctor" > "$tmp/step3"
grep -q 'FAIL' "$tmp/step3" || fail "doctor step 3 is not FAIL"
grep -q '0 native, 0 through ptx jit, 0 without a usable image, 1 with some kernels without an image' "$tmp/step3" ||
  fail "doctor step 3 counts"
names "doctor step 3" "$tmp/step3"
# The same run as JSON: the failing finding carries its fix kind, and the fix list has the rebuild.
"$ag" doctor --no-smoke --cc 9.0 --json "$tmp/app" > "$tmp/doctor.json" 2>/dev/null
python3 - "$tmp/doctor.json" <<'PY' || fail "doctor --json: fix kinds"
import json, sys
j = json.load(open(sys.argv[1]))
step3 = next(s for s in j["steps"] if s["number"] == 3)
fails = [f for f in step3["findings"] if f["status"] == "fail"]
assert fails and all(f["fix_kind"] == "rebuild" for f in fails), fails
assert all(f["fix_kind"] is None for s in j["steps"] for f in s["findings"] if not f["fix"]), "fix_kind without a fix"
assert any(f["kind"] == "rebuild" and "9.0" in f["text"] for f in j["fixes"]), j["fixes"]
assert j["schema"] == "archguard.doctor/1", j.get("schema")
assert j["verdict"] == "fail" and j["exit_code"] in (1, 3), (j["verdict"], j["exit_code"])
PY

cmake -DTARGET=app "-DFILES=$tmp/app" "-DREQUIRE=sass:80|sass:86|sass:90" "-DARCHGUARD=$ag" -DREASON=ARCH_POLICY \
  -P "$modules/CudaArchGuardVerify.cmake" > "$tmp/cmake" 2>&1 && fail "the verify step passed"
names "the CMake verify step" "$tmp/cmake"
[[ $(grep -c "$tmp/app" "$tmp/cmake") -eq 1 ]] || fail "the CMake verify step prints the path more than once"
grep -q '(fatbin 3) has no SASS for sm_90.*; kernels: legacy' "$tmp/cmake" || fail "the CMake verify step split a line at ';'"
grep -q 'to ARCH_POLICY' "$tmp/cmake" && fail "the CMake verify step advises adding architectures the policy has"

for f in check verify step3 cmake; do echo "--- $f"; cat "$tmp/$f"; done | cut -c1-300
echo "$fails failure(s)"
[[ $fails -eq 0 ]]
