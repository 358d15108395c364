#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a new user meets in the CLI: a mistyped verb names the nearest one; colour only on a
# terminal and never with NO_COLOR; no progress line when stderr is not a terminal; inspect's
# coverage is what every fatbin holds, with the union apart (two translation units built for
# different architectures, linked into one library by nvcc: ~10 s).
# Usage: first_use.sh <archguard> [nvcc] [--coverage]
# The coverage part (3) needs nvcc and is its own CTest entry (--coverage): without nvcc it
# reports "Skipped" (77); parts 1 and 2 need no nvcc.
set -uo pipefail
ag=$1 nvcc=${2:-nvcc} part=${3:-}
fails=0 skipped=""
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

if [[ $part != --coverage ]]; then
# 1. typo -> suggestion, exit 2
out=$("$ag" inpsect 2>&1); rc=$?
[[ $rc == 2 ]] || fail "archguard inpsect exited $rc, expected 2"
grep -q "unknown command 'inpsect'; did you mean 'inspect'?" <<<"$out" || fail "no suggestion for inpsect: $out"
out=$("$ag" zzzzzzzz 2>&1); rc=$?
[[ $rc == 2 ]] || fail "archguard zzzzzzzz exited $rc, expected 2"
grep -q "did you mean" <<<"$out" && fail "a suggestion for a word close to nothing: $out"
grep -q "commands:.*inspect" <<<"$out" || fail "the verbs are not listed: $out"
echo "ok: unknown verbs"

# 2. colour: doctor's badges on a terminal (script gives it one), not with NO_COLOR, not in a pipe
if command -v script >/dev/null 2>&1; then
  script -qec "$ag doctor --no-smoke" /dev/null > "$tmp/tty.txt" 2>&1
  grep -q $'\033\[3[123]m' "$tmp/tty.txt" || fail "no colour on a terminal"
  script -qec "env NO_COLOR=1 $ag doctor --no-smoke" /dev/null > "$tmp/nocolor.txt" 2>&1
  grep -q $'\033\[3' "$tmp/nocolor.txt" && fail "colour despite NO_COLOR=1"
  echo "ok: colour on a terminal only, and NO_COLOR"
else
  skipped="no script(1): the terminal checks did not run"
fi
"$ag" doctor --no-smoke > "$tmp/pipe.txt" 2>&1
grep -q $'\033' "$tmp/pipe.txt" && fail "escape codes in piped output"

else
# 3. intersection vs union over fatbins
if ! command -v "$nvcc" >/dev/null 2>&1; then
  skipped="no nvcc ($nvcc): the coverage check did not run"
else
  printf '__global__ void ka(float* p) { p[0] = 1; }\n' > "$tmp/a.cu"
  printf '__global__ void kb(float* p) { p[0] = 2; }\n' > "$tmp/b.cu"
  "$nvcc" -c -Xcompiler -fPIC "$tmp/a.cu" -o "$tmp/a.o" -gencode arch=compute_80,code=sm_80 \
      -gencode arch=compute_90,code=[sm_90,compute_90] &&
  "$nvcc" -c -Xcompiler -fPIC "$tmp/b.cu" -o "$tmp/b.o" -gencode arch=compute_90,code=[sm_90,compute_90] &&
  "$nvcc" -shared "$tmp/a.o" "$tmp/b.o" -o "$tmp/libmixed.so" || fail "nvcc could not build the mixed library"
  out=$("$ag" inspect --summary "$tmp/libmixed.so" 2>/dev/null)
  grep -q "coverage: sass sm_90; ptx compute_90 (in all 2 fatbins)" <<<"$out" || fail "intersection: $out"
  grep -q "in some fatbins only (not enough to run every kernel): union sass sm_80 sm_90; ptx compute_90" <<<"$out" \
    || fail "union: $out"
  "$ag" inspect --json "$tmp/libmixed.so" | python3 -c '
import json, sys
o = [o for r in json.load(sys.stdin)["inputs"] for o in r["objects"]][0]
assert o["coverage_every_fatbin"] == {"sass": ["sm_90"], "ptx": ["compute_90"]}, o["coverage_every_fatbin"]
assert o["coverage"]["sass"] == ["sm_80", "sm_90"], o["coverage"]
' || fail "inspect --json coverage_every_fatbin"
  # check agrees: sm_75 and sm_80 are not covered by every fatbin
  "$ag" check --cc 8.0 "$tmp/libmixed.so" > /dev/null 2>&1; [[ $? == 1 ]] || fail "check --cc 8.0 should predict a failure"
  echo "ok: coverage over every fatbin"
fi
fi
[[ $fails == 0 ]] || exit 1
[[ -z $skipped ]] || { echo "SKIPPED: $skipped (the rest passed)"; exit 77; }
echo "first_use: all passed"
