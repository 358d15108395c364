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
# shellcheck source=lib/gpu-common.sh
. "$here/scripts/lib/gpu-common.sh"
gpu_setup gpu-run-out /tmp/archguard-run-build run-summary.md
gpu_header "archguard run"
gpu_build run-build.log build ON archguard archguard_inject
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
