#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 26 on a GPU machine, in one go: build the tool; tests/gpu/link_drop (a device-link drop
# and a kernel left out of the taken image, predicted vs the real launches); `check` and
# `doctor` of the toolkit's lib64 (static libraries beside the shared ones) on this GPU and on
# 7.5-12.0; `check --no-deps` of site-packages on this GPU (torch, cupy, jax work here: any
# problem is a false alarm); the driver oracle, capped. Logs under $OUT: verdicts-summary.md and
# one log per part.   OUT=<dir> (default ./gpu-verdicts-out)  JOBS=<n>  ORACLE_BUDGET=<s>
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
# shellcheck source=lib/gpu-common.sh
. "$here/scripts/lib/gpu-common.sh"
gpu_setup gpu-verdicts-out /tmp/archguard-verdicts-build verdicts-summary.md
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
gpu_header verdicts
gpu_build build.log build OFF archguard

say ""
say "## tests/gpu/link_drop: predicted vs real launches"
bash tests/gpu/link_drop/run.sh "$ag" tests/cli/link_drop > "$OUT/link_drop.log" 2>&1
say "- exit $?"
sed 's/^/    /' "$OUT/link_drop.log" | tee -a "$summary"

say ""
say "## the toolkit's lib64: check and doctor agree"
lib=/usr/local/cuda/lib64
say "- $(ls $lib/*.a 2>/dev/null | wc -l) static libraries, $(ls $lib/*.so* 2>/dev/null | wc -l) shared-library names"
for c in "$cc" 7.5 8.0 10.0 12.0; do
  t0=$(date +%s.%N)
  "$ag" check --cc "$c" "$lib" > "$OUT/lib64-check-$c.log" 2>&1; rc=$?
  t1=$(date +%s.%N)
  "$ag" doctor --no-smoke --cc "$c" "$lib" > "$OUT/lib64-doctor-$c.log" 2>&1
  step3=$(sed -n 's/^\[3\] binaries: //p' "$OUT/lib64-doctor-$c.log")
  say "- cc $c: check exit $rc ($(echo "$t1 - $t0" | bc) s), doctor step 3 $step3; static libraries: $(grep -c 'static library' "$OUT/lib64-check-$c.log")"
  grep -E "^$lib/[^ ]*\.a: " "$OUT/lib64-check-$c.log" | cut -c1-220 | head -n 6 | sed 's/^/    /' | tee -a "$summary"
done
"$ag" doctor --no-smoke "$lib" > "$OUT/lib64-doctor-gpu.log" 2>&1
say "- doctor on this GPU: step 3 $(sed -n 's/^\[3\] binaries: //p' "$OUT/lib64-doctor-gpu.log")"

say ""
say "## site-packages on this GPU (everything here works: a problem is a false alarm)"
sp="$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)"
t0=$(date +%s)
timeout 600 "$ag" check --no-deps "$sp" > "$OUT/site-check.log" 2> "$OUT/site-check.err"; rc=$?
say "- check --no-deps $sp: exit $rc in $(( $(date +%s) - t0 )) s; $(grep -c ': package ' "$OUT/site-check.log") package line(s)"
grep -E ': package fails|^[^ ].*: (fails with|some kernels have no image)' "$OUT/site-check.log" | grep -v 'not a problem for the package' |
  cut -c1-240 | head -n 15 | sed 's/^/    - problem: /' | tee -a "$summary"
grep -E ': package ' "$OUT/site-check.log" | cut -c1-240 | head -n 10 | sed 's/^/    - /' | tee -a "$summary"

say ""
say "## driver oracle (capped)"
gpu_oracle 420 150 12 "$sp" /usr/local/cuda/lib64
