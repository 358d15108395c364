#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 25 on the GPU machine, after scripts/gpu-validate.sh on the same machine (it reuses that
# build; on a fresh machine it builds the tool alone): the driver oracle alone (when ORACLE=1), then cache hits on the host's site-packages:
# doctor, check --cc 9.0 (all threads and one), inspect --summary, check --no-cache, and
# inspect --json of libtorch_cuda; wall time, peak memory, whether outputs agree. Logs under $OUT.
#   OUT=<dir> (required)  AG=<archguard> (default /tmp/archguard-gpu-build/bin/archguard)
set -uo pipefail
ag=${AG:-/tmp/archguard-gpu-build/bin/archguard}
if [ ! -x "$ag" ]; then  # a fresh machine: build the tool alone (no tests, no samples)
  . scripts/lib/gpu-deps.sh
  echo "$deps_note"
  b=/tmp/archguard-hits-build t0=$(date +%s)
  cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARCHGUARD_BUILD_TESTS=OFF -DARCHGUARD_BUILD_SAMPLES=OFF "${extra[@]}" > "$OUT/build.log" 2>&1 &&
    ninja -C $b archguard >> "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "build $(( $(date +%s) - t0 )) s"
  ag=$b/bin/archguard
fi
sp=$(python3 -c 'import site;print(site.getsitepackages()[0])')
if [ "${ORACLE:-0}" = 1 ]; then
  timeout "${ORACLE_LIMIT:-200}" python3 tests/gpu/driver_oracle.py "$ag" "$sp" /usr/local/cuda/lib64 \
    --budget "${ORACLE_BUDGET:-90}" --report "$OUT/oracle.md" > "$OUT/oracle.log" 2>&1
  echo "oracle exit $?"; tail -n 12 "$OUT/oracle.log"
fi
export ARCHGUARD_CACHE_DIR=/tmp/agcache-hits
rm -rf "$ARCHGUARD_CACHE_DIR"
tm() { local s=$(date +%s%N); /usr/bin/time -f "%M KB, user %U s, sys %S s" -o /tmp/tm "$@" > /tmp/o 2>/tmp/e; local rc=$?; local e=$(date +%s%N); echo "$(( (e-s)/1000000 )) ms rc=$rc $(cat /tmp/tm)"; }
echo "== site-packages: $(find "$sp" | wc -l) entries"
# The floors of a cache hit: listing the tree, and one stat per entry (what a hit must look at).
for i in 1 2; do echo -n "floor: find (names only): "; tm find "$sp"; echo -n "floor: find -printf (a stat per entry): "; tm find "$sp" -printf '%i %s %T@ %C@\n'; done
echo -n "doctor --no-smoke, empty cache: "; tm "$ag" doctor --no-smoke "$sp"; cp /tmp/o "$OUT/doctor-fill.txt"
for i in 1 2 3; do echo -n "doctor --no-smoke hit $i: "; tm "$ag" doctor --no-smoke "$sp"; done; cp /tmp/o "$OUT/doctor-hit.txt"
echo -n "doctor --no-smoke (no files): "; tm "$ag" doctor --no-smoke
"$ag" doctor --no-smoke --json "$sp" 2>/dev/null | python3 -c "
import json,sys; r=json.load(sys.stdin); print('doctor steps:', ', '.join('%s %.0f ms' % (s['name'], s['elapsed_ms']) for s in r['steps']))"
echo -n "check --cc 9.0, filling: "; tm "$ag" check --no-deps --cc 9.0 "$sp"; cp /tmp/o "$OUT/check-fill.txt"
for i in 1 2 3; do
  echo -n "check --cc 9.0 hit $i: "; tm "$ag" check --no-deps --cc 9.0 "$sp"; cp /tmp/o "$OUT/check-hit.txt"
  echo -n "check --cc 9.0 hit, ARCHGUARD_MAX_THREADS=1: "; ARCHGUARD_MAX_THREADS=1 tm "$ag" check --no-deps --cc 9.0 "$sp"; cp /tmp/o "$OUT/check-one.txt"
  echo -n "inspect --summary hit: "; tm "$ag" inspect --summary "$sp"
done
for i in 1 2; do echo -n "check --no-deps hit (driver asked) $i: "; tm "$ag" check --no-deps "$sp"; done
for i in 1 2; do echo -n "check --cc 9.0 --no-cache $i: "; tm "$ag" check --no-deps --cc 9.0 --no-cache "$sp"; done; cp /tmp/o "$OUT/check-nocache.txt"
cmp "$OUT/check-fill.txt" "$OUT/check-hit.txt" && cmp "$OUT/check-hit.txt" "$OUT/check-one.txt" && cmp "$OUT/check-hit.txt" "$OUT/check-nocache.txt" && echo "check outputs identical (filling, hit, one thread, --no-cache)"
grep -c FAIL "$OUT/doctor-hit.txt"; diff <(sed 's/[0-9.]* ms//g' "$OUT/doctor-fill.txt") <(sed 's/[0-9.]* ms//g' "$OUT/doctor-hit.txt") > /dev/null && echo "doctor reports identical (filling, hit)"
tl=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))' 2>/dev/null)
for i in 1 2; do echo -n "inspect --json --no-cache libtorch_cuda: "; tm "$ag" inspect --json --no-cache "$tl"; done
python3 -c "import json; d=json.load(open('/tmp/o')); print('json objects', sum(len(i['objects']) for i in d['inputs']))"
