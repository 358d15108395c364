#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `check --no-kernels` judges by fatbins first and never fails a library that runs:
#   libsame.so    : a kernel in an sm_90 + sm_100 fatbin and again in an sm_100-only fatbin (as
#                   in libtorch_cuda): runs on CC 9.0 (exit 0), though one fatbin has no image;
#   libmissing.so : a kernel of its own in an sm_100-only fatbin: fails with 209 (exit 1), named;
#   libstub.so    : an sm_100-only fatbin without kernels: decides nothing (exit 0);
#   liball.so     : every fatbin runs: judged without decoding (kernels_listed false).
# Each gives the same lines and exit code as a check with the kernels. Usage: no_kernels.sh
# ARCHGUARD SOURCE_DIR. Skips (77) without nvcc.
set -u
ag=$1 src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cli_nvcc
cli_tmp
bash "$src/build.sh" "$nvcc" "$src" "$tmp" || { echo "FAIL: nvcc"; exit 1; }
cli_count_failures
export ARCHGUARD_CACHE_DIR=$tmp/cache

for lib in same:0 missing:1 stub:0 all:0; do
  name=${lib%%:*} want=${lib##*:}
  for mode in kernels fatbins; do
    flags=(--no-deps --cc 9.0)
    [[ $mode == fatbins ]] && flags+=(--no-kernels)
    "$ag" check "${flags[@]}" "$tmp/lib$name.so" > "$tmp/$name.$mode" 2>&1
    rc=$?
    [[ $rc == "$want" ]] || fail "check ${flags[*]} lib$name.so exits $rc, expected $want: $(head -1 "$tmp/$name.$mode")"
  done
  cmp -s "$tmp/$name.kernels" "$tmp/$name.fatbins" || { fail "lib$name.so: --no-kernels prints another verdict"; diff "$tmp/$name.kernels" "$tmp/$name.fatbins" | head -6; }
done
grep -qF 'only_on_new_gpus' "$tmp/missing.fatbins" || fail "--no-kernels does not name the kernel that fails"
grep -qF 'only_new.cu' "$tmp/missing.fatbins" || fail "--no-kernels does not name its translation unit"
grep -qF 'shared_scale' "$tmp/missing.fatbins" && fail "--no-kernels names the kernel that runs"
grep -qF 'defines no kernel' "$tmp/stub.fatbins" || fail "the stub is not 'defines no kernel': $(head -1 "$tmp/stub.fatbins")"
grep -qF '0 of 0' "$tmp"/*.fatbins && fail "a count of nothing: $(grep -h '0 of 0' "$tmp"/*.fatbins | head -1)"

# Decoded only where a fatbin does not run.
for name in all same; do
  "$ag" check --json --no-kernels --no-deps --cc 9.0 "$tmp/lib$name.so" > "$tmp/$name.json" || fail "check --json --no-kernels lib$name.so"
done
python3 - "$tmp/all.json" "$tmp/same.json" <<'PY' || fail "check --json --no-kernels"
import json, sys
every = json.load(open(sys.argv[1]))["devices"][0]["objects"][0]
assert every["kernels_listed"] is False and every["tier"] == "all-run", (every["kernels_listed"], every["tier"])
same = json.load(open(sys.argv[2]))["devices"][0]["objects"][0]
assert same["kernels_listed"] is True and same["tier"] == "all-run" and not same["problem"], (same["tier"], same["summary"])
PY

for f in same missing stub all; do echo "--- $f"; cat "$tmp/$f.fatbins"; done | cut -c1-240 | head -40
echo "$fails failure(s)"
[[ $fails -eq 0 ]]
