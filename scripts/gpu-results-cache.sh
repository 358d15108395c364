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
# Drops the site-packages' pages from the page cache (no root needed: posix_fadvise DONTNEED of
# clean pages), so that a run reads its files from disk ("cold").
evict() { python3 - "$sp" <<'PY'
import os, sys
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(root, f)
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
PY
}
echo "== doctor: empty results cache, then from it (3x), then --no-cache; cold = page cache evicted first"
evict; echo -n "cold, empty cache: "; tm $ag doctor --no-smoke $sp; cp /tmp/o $OUT/doctor-1.txt
for i in 1 2 3; do echo -n "hit $i: "; tm $ag doctor --no-smoke $sp; done; cp /tmp/o $OUT/doctor-2.txt
evict; echo -n "cold, from the cache: "; tm $ag doctor --no-smoke $sp
# The run from the cache read no payload: the first --no-cache run reads them from disk.
echo -n "no-cache (payload pages cold): "; tm $ag doctor --no-smoke --no-cache $sp
echo -n "no-cache (warm pages): "; tm $ag doctor --no-smoke --no-cache $sp
evict; echo -n "cold, no-cache: "; tm $ag doctor --no-smoke --no-cache $sp
echo -n "doctor without files: "; tm $ag doctor --no-smoke
echo -n "inspect --summary: "; tm $ag inspect --summary $sp
grep -c "FAIL" $OUT/doctor-2.txt; grep "FAIL" $OUT/doctor-2.txt | head -5
echo "== check --no-deps: first (cache filled by doctor), hits, --no-cache"
tm $ag check --no-deps $sp; cp /tmp/o $OUT/check-1.txt
for i in 1 2 3; do echo -n "hit $i: "; tm $ag check --no-deps $sp; done; cp /tmp/o $OUT/check-2.txt
for i in 1 2; do echo -n "no-cache $i: "; tm $ag check --no-deps --no-cache $sp; done; cp /tmp/o $OUT/check-3.txt
echo "check rc files:"; tail -3 $OUT/check-2.txt; cmp $OUT/check-1.txt $OUT/check-2.txt && cmp $OUT/check-2.txt $OUT/check-3.txt && echo "check outputs identical"
grep -E "fails with|some kernels have no image|none of its kernels" $OUT/check-2.txt | head -5
echo "== the directory walk on threads: cache hits at the default threads against --threads 1 (interleaved)"
for i in 1 2 3; do
  echo -n "check --cc 9.0 hit: "; tm $ag check --no-deps --cc 9.0 $sp; cp /tmp/o $OUT/check-cc-threads.txt
  echo -n "check --cc 9.0 hit, ARCHGUARD_MAX_THREADS=1: "; ARCHGUARD_MAX_THREADS=1 tm $ag check --no-deps --cc 9.0 $sp; cp /tmp/o $OUT/check-cc-one.txt
  echo -n "inspect --summary: "; tm $ag inspect --summary $sp
  echo -n "inspect --summary --threads 1: "; tm $ag inspect --summary --threads 1 $sp
done
cmp $OUT/check-cc-threads.txt $OUT/check-cc-one.txt && echo "check outputs identical on 1 and all threads"
echo "== bench: inspect and inspect --kernels against cuobjdump and the C floors (bench/bench_inspect.sh)"
tl=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))' 2>/dev/null)
lt=/usr/local/cuda/lib64/libcublasLt.so.13
CUOBJDUMP=$(command -v cuobjdump) LIBS="$tl $lt" KERNELS_LIB=$lt timeout ${BENCH_LIMIT:-200} bash bench/bench_inspect.sh --suite --sections inspect,kernels --reps 3 --archguard $ag > $OUT/bench.txt 2>&1
echo "bench rc=$?"; sed -n '/^## summary/,$p' $OUT/bench.txt
