#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 25 on the GPU machine: build, the gpu-labelled tests, then doctor and check of this
# machine's site-packages three times each (filling the results cache, from it, --no-cache):
# wall time, peak memory, cache counters, and whether the outputs agree. Logs under $OUT.
#   OUT=<dir> (required)  GIT_COMMIT=<sha>
set -uo pipefail
export PATH="$PATH:/usr/local/cuda/bin"
. scripts/lib/gpu-deps.sh
echo "$deps_note"
b=/tmp/agb; t0=$(date +%s)
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARCHGUARD_BUILD_SAMPLES=OFF -DARCHGUARD_BUILD_TESTS=ON -DARCHGUARD_GIT_COMMIT=${GIT_COMMIT:-unknown} "${extra[@]}" > $OUT/build.log 2>&1 && ninja -C $b >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
ag=$b/bin/archguard
(cd $b && ctest -L gpu -j4 > $OUT/ctest-gpu.log 2>&1); echo "ctest gpu rc=$?"; grep -E "tests passed|Failed|Skipped" $OUT/ctest-gpu.log | tail -8
sp=$(python3 -c 'import site;print(site.getsitepackages()[0])')
export ARCHGUARD_CACHE_DIR=/tmp/agcache ARCHGUARD_RESULTS_CACHE_STATS=1
rm -rf /tmp/agcache
tm() { local s=$(date +%s%N); /usr/bin/time -f "%M KB" -o /tmp/tm "$@" > /tmp/o 2>/tmp/e; local rc=$?; local e=$(date +%s%N); echo "$(( (e-s)/1000000 )) ms rc=$rc $(cat /tmp/tm) $(grep -o '[0-9]* hits.*' /tmp/e) :: ${*:2:3}"; }
tm $ag doctor --no-smoke $sp; cp /tmp/o $OUT/doctor-1.txt
tm $ag doctor --no-smoke $sp; cp /tmp/o $OUT/doctor-2.txt
tm $ag doctor --no-smoke --no-cache $sp
grep -c "FAIL" $OUT/doctor-2.txt; grep "FAIL" $OUT/doctor-2.txt | head -5
tm $ag check --no-deps $sp; cp /tmp/o $OUT/check-1.txt
tm $ag check --no-deps $sp; cp /tmp/o $OUT/check-2.txt
tm $ag check --no-deps --no-cache $sp; cp /tmp/o $OUT/check-3.txt
echo "check rc files:"; tail -3 $OUT/check-2.txt; cmp $OUT/check-1.txt $OUT/check-2.txt && cmp $OUT/check-2.txt $OUT/check-3.txt && echo "check outputs identical"
grep -E "fails with|some kernels have no image|none of its kernels" $OUT/check-2.txt | head -5
