#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The limits on what is derived from input (docs/cli.md) are overridable at run time: each bomb
# of tests/cli/hostile_inputs.py (the generator bench/bench_hostile.sh uses, here at small
# sizes) stops under the default limit and is read fully with the limit raised; a bad value is
# a usage error (exit 2) naming the variable and the value.
# Usage: hostile_limits.sh ARCHGUARD_BINARY
set -u
A="$1"
here=$(cd "$(dirname "$0")" && pwd)
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
unset ARCHGUARD_MAX_NAME_LENGTH ARCHGUARD_MAX_KERNEL_NAMES ARCHGUARD_MAX_SEARCH_WORK ARCHGUARD_MAX_THREADS

# A 2 MiB section name (past the 1 MiB default), 40 kernels sharing a 1 MiB name (80 MiB of
# names, past the 64 MiB default), a 160 KB entry chain (about 40 times the default work bound).
python3 "$here/hostile_inputs.py" "$T" --name $((2 << 20)) --headers 100 --kname $(((1 << 20) - 16)) --symbols 40 --chain 160000 --computed 1 --links 1 \
  || fail "could not generate the inputs"

# --- the name length: ARCHGUARD_MAX_NAME_LENGTH ---------------------------------------------
"$A" inspect "$T/section-names.so" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "name bomb, default: exit $rc: $(cat "$T/err.txt")"
grep -q "section-names.so: section name at 0x41: name is longer than the limit 0x100000 bytes (raise it with ARCHGUARD_MAX_NAME_LENGTH)" "$T/err.txt" \
  || fail "name bomb message: $(cat "$T/err.txt")"
ARCHGUARD_MAX_NAME_LENGTH=4M "$A" inspect --json "$T/section-names.so" > "$T/out.json" 2> "$T/err.txt"; rc=$?
[ $rc -eq 0 ] || fail "name bomb, raised: exit $rc: $(cat "$T/err.txt")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["errors"]==[] and len(d["inputs"][0]["objects"])==1, d["errors"]' "$T/out.json" \
  || fail "name bomb, raised: not read"
ARCHGUARD_MAX_NAME_LENGTH=1K "$A" inspect "$T/section-names.so" > /dev/null 2> "$T/err.txt"
grep -q "longer than the limit 0x400 bytes" "$T/err.txt" || fail "name limit lowered: $(cat "$T/err.txt")"
echo "ok: ARCHGUARD_MAX_NAME_LENGTH"

# --- kernel-name bytes per image: ARCHGUARD_MAX_KERNEL_NAMES ----------------------------------
"$A" inspect --kernels "$T/kernel-names.fatbin" > "$T/out.txt" 2> "$T/err.txt"
grep -q "kernel names after 32 kernels exceed the limit 0x4000000 bytes per image (raise it with ARCHGUARD_MAX_KERNEL_NAMES)" "$T/out.txt" \
  || fail "kernel-name bomb, default: $(head -c 600 "$T/out.txt") $(cat "$T/err.txt")"
ARCHGUARD_MAX_KERNEL_NAMES=128M "$A" inspect --kernels "$T/kernel-names.fatbin" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -eq 0 ] || fail "kernel-name bomb, raised: exit $rc: $(cat "$T/err.txt")"
grep -q "kernel names after" "$T/out.txt" && fail "kernel-name bomb, raised: still stopped"
n=$(grep -c "^ *kernel kkkk" "$T/out.txt")
[ "$n" -eq 40 ] || fail "kernel-name bomb, raised: $n kernels listed, expected 40"
ARCHGUARD_MAX_KERNEL_NAMES=3M "$A" inspect --kernels "$T/kernel-names.fatbin" > "$T/out.txt" 2> "$T/err.txt"
grep -q "kernel names after 1 kernels exceed the limit 0x300000 bytes per image" "$T/out.txt" \
  || fail "kernel-name limit lowered: $(head -c 600 "$T/out.txt")"
echo "ok: ARCHGUARD_MAX_KERNEL_NAMES"

# --- the embedded-fatbin search: ARCHGUARD_MAX_SEARCH_WORK -----------------------------------
"$A" inspect "$T/chain.so" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "chain, default: exit $rc"
grep -q "chain.so: embedded-fatbin search of section .rodata at 0x50: more than 105536 fatbin entry headers checked in 0x27100 bytes (the limit; crafted data?): the search was stopped (raise it with ARCHGUARD_MAX_SEARCH_WORK)" "$T/err.txt" \
  || fail "chain message: $(cat "$T/err.txt")"
ARCHGUARD_MAX_SEARCH_WORK=1000 "$A" inspect "$T/chain.so" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -eq 0 ] || fail "chain, raised: exit $rc: $(cat "$T/err.txt")"
grep -q "no device code" "$T/out.txt" || fail "chain, raised: $(cat "$T/out.txt")"
echo "ok: ARCHGUARD_MAX_SEARCH_WORK"

# --- worker threads: ARCHGUARD_MAX_THREADS ---------------------------------------------------
"$A" inspect --threads 300 "$T/section-names.so" > /dev/null 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "--threads 300: exit $rc"
grep -q -- "--threads: 300 is above the limit 256 (raise it with ARCHGUARD_MAX_THREADS)" "$T/err.txt" || fail "--threads message: $(cat "$T/err.txt")"
ARCHGUARD_MAX_THREADS=300 ARCHGUARD_MAX_NAME_LENGTH=4M "$A" inspect --threads 300 "$T/section-names.so" > /dev/null 2> "$T/err.txt" \
  || fail "--threads 300 with ARCHGUARD_MAX_THREADS=300: $(cat "$T/err.txt")"
echo "ok: ARCHGUARD_MAX_THREADS"

# --- bad values are usage errors naming the variable and the value ---------------------------
bad() {  # variable, value, expected text, verb...
  local var=$1 value=$2 text=$3; shift 3
  env "$var=$value" "$A" "$@" "$T/chain.so" > "$T/out.txt" 2> "$T/err.txt"; local rc=$?
  [ $rc -eq 2 ] || fail "$var=$value: exit $rc"
  grep -qF -- "$var: '$value' $text" "$T/err.txt" || fail "$var=$value message: $(cat "$T/err.txt")"
  [ -s "$T/out.txt" ] && fail "$var=$value: something was read: $(cat "$T/out.txt")"
  return 0
}
for var in ARCHGUARD_MAX_NAME_LENGTH ARCHGUARD_MAX_KERNEL_NAMES; do
  bad $var abc "is not a size" inspect
  bad $var -1 "is not a size" verify --require 80
  bad $var 17179869184G "is not a size (bytes, or with K, M, G or T) that fits in 64 bits" check --cc 8.0
  bad $var 0 "is below the least value 1" inspect
done
for var in ARCHGUARD_MAX_SEARCH_WORK ARCHGUARD_MAX_THREADS; do
  bad $var abc "is not a whole number" inspect
  bad $var -3 "is not a whole number" verify --require 80
  bad $var 99999999999999999999999 "is not a whole number that fits in 64 bits" check --cc 8.0
  bad $var 2K "is not a whole number" inspect
  bad $var 0 "is below the least value 1" inspect
done
bad ARCHGUARD_MAX_THREADS 100000 "is above the most threads 65536" inspect
echo "ok: bad values"
