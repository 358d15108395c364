#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# archguard run on a GPU machine, in one go (docs/run.md): build the tool and the injection
# library, run tests/gpu/run/run_mode.sh (real programs whose own result is the truth) and the
# overhead benchmark bench/run/bench_run.sh; logs under $OUT: run-summary.md, run-build.log,
# run-mode.log, bench_run.md, run-events.tar.gz (the recordings of the failing cases).
#   OUT=<dir> (default ./gpu-run-out)  JOBS=<n>  SKIP_BENCH=1  BUILD_DIR=<dir>
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
OUT="${OUT:-$here/gpu-run-out}"
mkdir -p "$OUT"
jobs="${JOBS:-$(nproc)}"
build="${BUILD_DIR:-/tmp/archguard-run-build}"
export PATH="$PATH:/usr/local/cuda/bin"
summary="$OUT/run-summary.md"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
say "# archguard run on $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1 | head -n1), $(date -u '+%Y-%m-%d %H:%M UTC')"
say "- commit: ${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}; $(nproc) cores"
# shellcheck source=lib/gpu-deps.sh
. "$here/scripts/lib/gpu-deps.sh"
say "- $deps_note"
t0=$(date +%s)
{ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARCHGUARD_BUILD_SAMPLES=OFF \
        -DARCHGUARD_BUILD_TESTS=ON "${extra[@]}" &&
  cmake --build "$build" -j "$jobs" --target archguard archguard_inject; } > "$OUT/run-build.log" 2>&1
rc=$?
say "- build: exit $rc in $(( $(date +%s) - t0 )) s"
if [ "$rc" != 0 ]; then tail -n 40 "$OUT/run-build.log"; exit 1; fi
ag="$build/bin/archguard"
work=/tmp/archguard-run-mode
t0=$(date +%s)
ARCHGUARD_RUN_TEST_KEEP="$work/keep" bash tests/gpu/run/run_mode.sh "$ag" "$(command -v nvcc)" "$work" > "$OUT/run-mode.log" 2>&1
say "- run_mode.sh: exit $? in $(( $(date +%s) - t0 )) s"
grep -E "^(ok|FAIL|skip) " "$OUT/run-mode.log" | sed 's/^/  - /' | tee -a "$summary"
# The reports as printed (the commands' own output, then archguard run's), and the recordings
# without the image copies.
for f in "$work"/*.run.out; do echo "===== $(basename "$f" .run.out)"; cat "$f"; done > "$OUT/run-reports.log" 2>/dev/null
(cd "$work" && tar czf "$OUT/run-events.tar.gz" --exclude='*.bin' ./*.json keep 2>/dev/null)
if [ "${VARIANTS:-1}" = 1 ]; then
  bash bench/run/variants.sh "$ag" "$(command -v nvcc)" "$OUT/variants" > "$OUT/variants.log" 2>&1
  say "- where a launch's cost goes (bench/run/variants.sh):"
  sed 's/^/  /' "$OUT/variants/variants.md" | tee -a "$summary"
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  t0=$(date +%s)
  bash bench/run/bench_run.sh "$ag" "$(command -v nvcc)" "$OUT" > "$OUT/bench-run.log" 2>&1
  say "- bench_run.sh: exit $? in $(( $(date +%s) - t0 )) s"
  [ -f "$OUT/bench_run.md" ] && sed 's/^/  /' "$OUT/bench_run.md" | tee -a "$summary"
fi
