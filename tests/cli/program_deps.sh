#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Whole programs: an executable whose own kernel covers CC 9.0 loads libold.so (DT_NEEDED,
# DT_RUNPATH $ORIGIN/lib) built for sm_80 only. `check --cc 9.0` and `doctor --cc 9.0` must fail
# naming the library and its kernel; `--no-deps` judges the executable alone. Also: every input
# gets a line, check without --cc and without a GPU is a usage error.
# With --gpu (label gpu): runs the executable and compares the real launch results with
# `archguard check`'s prediction for this machine (no --cc); exit 77 without a GPU.
# Without --gpu, a fake libcuda (tests/unit/device/fake_libcuda.cpp) stands in for this machine's
# driver to test check without --cc.
# Usage: program_deps.sh <archguard> <nvcc> <work dir> [--gpu | <fake libcuda>]
set -uo pipefail
ag=$1 nvcc=$2 work=$3 mode=${4:-}
src=$(cd "$(dirname "$0")/program" && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v "$nvcc" >/dev/null 2>&1 || [[ -x $nvcc ]] || { echo "no nvcc: skipped"; exit 77; }
fails=0

if [[ $mode == --gpu && $("$ag" check --no-deps "$ag" 2>&1) == *"no GPU visible"* ]]; then
  echo "no GPU: skipped"; exit 77
fi
# Built once per work dir (about 15 s on 2 cores), rebuilt when a source changes.
mkdir -p "$work/bin/lib"
if [[ ! -x $work/bin/app || $src/app.cu -nt $work/bin/app || $src/libold.cu -nt $work/bin/app ]]; then
  "$nvcc" -shared -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 -Xlinker -soname=libold.so \
    -o "$work/bin/lib/libold.so" "$src/libold.cu" || { echo "FAIL: nvcc libold.so"; exit 1; }
  "$nvcc" -gencode 'arch=compute_90,code=[sm_90,compute_90]' -o "$work/bin/app" "$src/app.cu" \
    -L"$work/bin/lib" -lold -Xlinker --enable-new-dtags -Xlinker -rpath -Xlinker '$ORIGIN/lib' ||
    { echo "FAIL: nvcc app"; exit 1; }
fi
app=$work/bin/app lib=$work/bin/lib/libold.so

if [[ $mode == --gpu ]]; then
  pred=$("$ag" check --json "$app")
  rc=$?
  real=$("$app")
  arc=$?
  [[ $arc == 77 ]] && { echo "no GPU: skipped ($real)"; exit 77; }
  echo "real launch: $real (exit $arc); archguard check exit $rc"
  python3 - "$pred" "$real" <<'PY' || exit 1
import json, re, sys
doc = json.loads(sys.argv[1])
real = dict(re.findall(r"(own|lib)=(\d+)", sys.argv[2]))
ok = True
for dev in doc["devices"]:
    predicted = {}
    for o in dev["objects"]:
        who = "lib" if o["object"].endswith("libold.so") else "own" if o["object"].endswith("/app") else None
        if who:
            predicted[who] = str(o["cuda_error"] if o["outcome"] == "fail" else 0)
    for who in ("own", "lib"):
        verdict = "matches" if predicted.get(who) == real.get(who) else "DIFFERS"
        ok = ok and verdict == "matches"
        print(f"{dev['name']} (cc {dev['cc']}): {who}: predicted {predicted.get(who)}, real {real.get(who)}: {verdict}")
sys.exit(0 if ok else 1)
PY
  [[ $? == 0 ]] || exit 1
  # The doctor on this GPU, without --cc: FAIL naming the library and its kernel when the real
  # launch of the library failed, no FAIL for it when it ran.
  out=$("$ag" doctor --no-smoke "$app" 2>&1)
  drc=$?
  echo "$out" | sed -n '/\[3\]/,/\[4\]/p'
  if [[ $real == *"lib=0"* ]]; then
    grep -q "FAIL .*libold" <<<"$out" && { echo "FAIL: doctor blames libold.so, which ran"; exit 1; }
  elif [[ $drc != 1 ]] || ! grep -q "libold\.so (loaded by" <<<"$out" || ! grep -q "old_library_kernel" <<<"$out"; then
    echo "FAIL: doctor (exit $drc) does not name libold.so and old_library_kernel, whose launch failed"; exit 1
  fi
  echo "doctor agrees with the real launch"
  exit 0
fi

# expect <exit code> <regex the output must match (or -)> -- command...: lib.sh

# The library is judged with the program, named with the object that loads it, kernel named.
expect 1 "^  .*/lib/libold\.so \(loaded by .*/bin/app\): fails with 209" -- "$ag" check "$app" --cc 9.0
expect 1 "old_library_kernel" -- "$ag" check "$app" --cc 9.0
expect 1 "^.*/bin/app: runs natively \(sm_90\)" -- "$ag" check "$app" --cc 9.0
expect 0 "^.*/bin/app: runs natively" -- "$ag" check --no-deps "$app" --cc 9.0
# Named as an input too, it is judged once.
n=$("$ag" check "$lib" "$app" --cc 9.0 2>&1 | grep -c 'libold\.so.*: fails with 209')
[[ $n == 1 ]] && echo "ok: libold.so judged once" || { echo "FAIL: libold.so judged $n times"; fails=$((fails + 1)); }
"$ag" check --json "$app" --cc 9.0 > "$work/check.json"
python3 - "$work/check.json" <<'PY' || fails=$((fails + 1))
import json, sys
doc = json.load(open(sys.argv[1]))
objs = doc["devices"][0]["objects"]
lib = [o for o in objs if o["object"].endswith("libold.so")]
assert len(lib) == 1, objs
assert lib[0]["loaded_by"].endswith("/bin/app") and lib[0]["cuda_error"] == 209, lib[0]
assert [k["name"] for k in lib[0]["kernels_without_image"]] == ["_Z18old_library_kernelPi"], lib[0]
assert doc["fails"] is True and doc["inputs"][0]["libraries"] >= 2, doc["inputs"]
print("ok: check --json names the library, its loader and its kernel")
PY
# The doctor: FAIL naming the library and the kernel (exit 1 with a driver, 3 without one).
out=$("$ag" doctor --no-smoke --cc 9.0 "$app" 2>&1)
rc=$?
if [[ $rc != 1 && $rc != 3 ]] || ! grep -q "FAIL" <<<"$out" || ! grep -q "libold\.so (loaded by" <<<"$out" ||
   ! grep -q "old_library_kernel" <<<"$out"; then
  echo "FAIL: doctor --cc 9.0 on the program (exit $rc):"; echo "$out"; fails=$((fails + 1))
else
  echo "ok: doctor --cc 9.0 names libold.so and old_library_kernel"
fi
out=$("$ag" doctor --no-smoke --no-deps --cc 9.0 "$app" 2>&1)
grep -q "libold" <<<"$out" && { echo "FAIL: doctor --no-deps still judges libold.so"; fails=$((fails + 1)); } ||
  echo "ok: doctor --no-deps"

# Assumptions said: a JIT verdict without --driver names the driver its PTX ISA needs; a driver
# given as 580.65 meets 580.65.06 (compared on the numbers given); 575 rejects PTX ISA 9.0.
expect 0 "runs after a JIT of compute_90 .*assumes driver >= 580\.65\.06 \(ptx isa 9\.0\)" -- \
  "$ag" check --no-deps "$app" --cc 10.0
expect 0 "runs after a JIT of compute_90 \(first-launch delay\) on" -- "$ag" check --no-deps "$app" --cc 10.0 --driver 580.65
expect 1 "fails with 222" -- "$ag" check --no-deps "$app" --cc 10.0 --driver 575

# Every input gets a line.
mkdir -p "$work/empty" "$work/text"
echo hello > "$work/text/readme.txt"
expect 0 "empty: no device code \(0 files scanned\)" -- "$ag" check "$work/empty" --cc 9.0
expect 0 "text: no device code \(1 file scanned\)" -- "$ag" check "$work/text" --cc 9.0
expect 0 "text: no device code \(1 file scanned\)" -- "$ag" verify "$work/text" --require 90
host=$(type -P true)
expect 0 "no device code \([0-9]+ files? scanned(, including [0-9]+ loaded librar(y|ies))?\)" -- "$ag" check "$host" --cc 9.0
out=$("$ag" doctor --no-smoke --cc 9.0 "$work/text" 2>&1)
rc=$?  # 0 with a driver, 3 without one
if [[ $rc != 0 && $rc != 3 ]] || ! grep -Eq "PASS .*text: no device code \(1 file scanned" <<<"$out"; then
  echo "FAIL: doctor on a directory without device code (exit $rc):"; echo "$out"; fails=$((fails + 1))
else
  echo "ok: doctor says no device code (1 file scanned)"
fi

# Without --cc and without a GPU: a usage error that says what to give.
expect 2 "no GPU visible here .*give --cc" -- env ARCHGUARD_LIBCUDA=/nonexistent/libcuda.so.1 "$ag" check "$app"

# Without --cc on a machine with a GPU: its GPUs and driver, said on the first line.
if [[ -n $mode && -f $mode ]]; then
  expect 1 "^assuming this machine: Fake GPU \(CC 9\.0, 1 GPU\), driver [0-9]" -- \
    env ARCHGUARD_LIBCUDA="$mode" FAKE_CUDA_CC=9.0 "$ag" check "$app"
  expect 1 "libold\.so \(loaded by .*\): fails with 209" -- env ARCHGUARD_LIBCUDA="$mode" FAKE_CUDA_CC=9.0 "$ag" check "$app"
  expect 0 "libold\.so: runs natively \(sm_80\)" -- \
    env ARCHGUARD_LIBCUDA="$mode" FAKE_CUDA_CC=8.0 "$ag" check --no-deps "$lib"
  expect 1 "/bin/app: fails with 209" -- env ARCHGUARD_LIBCUDA="$mode" FAKE_CUDA_CC=8.0 "$ag" check "$app"
  # This machine's environment too (issue 26): the sm_80-only library fails under forced JIT.
  expect 0 "environment: no CUDA_FORCE_PTX_JIT or CUDA_DISABLE_PTX_JIT" -- \
    env -u CUDA_FORCE_PTX_JIT -u CUDA_DISABLE_PTX_JIT ARCHGUARD_LIBCUDA="$mode" FAKE_CUDA_CC=8.0 "$ag" check --no-deps "$lib"
  expect 1 "^assuming this machine: .*environment: CUDA_FORCE_PTX_JIT=1" -- \
    env CUDA_FORCE_PTX_JIT=1 ARCHGUARD_LIBCUDA="$mode" FAKE_CUDA_CC=8.0 "$ag" check --no-deps "$lib"
  expect 0 "libold\.so: runs natively \(sm_80\)" -- \
    env CUDA_FORCE_PTX_JIT=1 ARCHGUARD_LIBCUDA="$mode" FAKE_CUDA_CC=8.0 "$ag" check --cc 8.0 --no-deps "$lib"
fi

[[ $fails == 0 ]] && echo "all passed" || echo "$fails failed"
[[ $fails == 0 ]]
