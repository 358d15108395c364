#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# archguard jit compile / cache ls|stat|verify|clear|prewarm end to end, without a GPU.
# Usage: cli_jit.sh ARCHGUARD_BINARY
set -u
A="$1"
T="$(mktemp -d)"
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset ARCHGUARD_CACHE_DISABLE ARCHGUARD_CACHE_READONLY_DIRS
export ARCHGUARD_CACHE_DIR="$T/cache"

cat > "$T/k.cu" <<'SRC'
#include "inc.h"
extern "C" __global__ void k(int* p) { p[threadIdx.x] += VALUE; }
SRC
echo '#define VALUE 3' > "$T/inc.h"
printf '__global__ void b(int* p) {\n  *p = missing;\n}\n' > "$T/bad.cu"

# compile: cubin to a file, then the same again is a cache hit
out=$("$A" jit compile "$T/k.cu" --arch sm_90 -o "$T/k.cubin") || fail "jit compile: $out"
echo "$out" | grep -q "compiled in .* stored as" || fail "first compile not stored: $out"
head -c 4 "$T/k.cubin" | od -An -c | grep -q 'E   L   F' || fail "k.cubin is not an ELF file"
out=$("$A" jit compile "$T/k.cu" --arch sm_90) || fail "second compile: $out"
echo "$out" | grep -q "cache hit" || fail "second compile missed the cache: $out"
# a changed header is a miss
echo '#define VALUE 4' > "$T/inc.h"
out=$("$A" jit compile "$T/k.cu" --arch sm_90) || fail "compile after header change: $out"
echo "$out" | grep -q "compiled in" || fail "header change did not invalidate: $out"
# PTX through --json
json=$("$A" jit compile "$T/k.cu" --arch compute_80 --json -- -lineinfo) || fail "ptx compile: $json"
echo "$json" | grep -q '"target": "compute_80"' || fail "json lacks the target: $json"
# errors: bad source -> 1 with the log; unknown arch and missing file -> 2
"$A" jit compile "$T/bad.cu" --arch sm_90 2> "$T/err.txt"; rc=$?
[ $rc -eq 1 ] || fail "bad source exit $rc"
grep -q 'bad.cu:2:   \*p = missing;' "$T/err.txt" || fail "no numbered source line: $(cat "$T/err.txt")"
"$A" jit compile "$T/k.cu" --arch sm_91 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "sm_91 exit $rc"
"$A" jit compile "$T/none.cu" --arch sm_90 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "missing file exit $rc"

# ls / stat / verify
n=$("$A" cache ls --json | grep -c '"layer"') || true
[ "$n" -eq 3 ] || fail "cache ls lists $n entries, expected 3"
"$A" cache stat | grep -q "entries:     3" || fail "cache stat"
"$A" cache verify > /dev/null || fail "verify of a sound cache failed"
bin=$(find "$T/cache/v1/entries" -name '*.bin' | head -1)
printf '\x00\x01' | dd of="$bin" bs=1 seek=100 conv=notrunc 2>/dev/null
"$A" cache verify > "$T/v.txt"; rc=$?
[ $rc -eq 1 ] || fail "verify of a damaged entry exit $rc"
grep -q "checksum at 0x30 does not match" "$T/v.txt" || fail "verify message: $(cat "$T/v.txt")"
"$A" cache verify --evict > /dev/null
"$A" cache verify > /dev/null || fail "verify after --evict still failed"

# a group-writable cache dir is refused with exit 2
chmod 0775 "$T/cache"
"$A" cache ls 2> "$T/perm.txt"; rc=$?
[ $rc -eq 2 ] || fail "group-writable dir exit $rc"
grep -q "writable by group or others (mode 0775)" "$T/perm.txt" || fail "perm message: $(cat "$T/perm.txt")"
chmod 0700 "$T/cache"

# prewarm into another dir, then clear
out=$("$A" cache prewarm --cache-dir "$T/pre" --arch sm_80 --arch sm_90 "$T/k.cu") || fail "prewarm: $out"
echo "$out" | grep -q "2 compiled, 0 already cached" || fail "prewarm summary: $out"
out=$("$A" cache prewarm --cache-dir "$T/pre" --arch sm_80 --arch sm_90 "$T/k.cu") || fail "prewarm again: $out"
echo "$out" | grep -q "0 compiled, 2 already cached" || fail "prewarm again summary: $out"
"$A" cache clear --cache-dir "$T/pre" | grep -q "removed 2 entries" || fail "clear"
[ -z "$(find "$T/pre/v1" -type f)" ] || fail "files left after clear: $(find "$T/pre/v1" -type f)"
echo "ok"
