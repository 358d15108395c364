#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The long fuzz run (docs/fuzzing.md): each libFuzzer target for a set time, one after the
# other on one core, then a summary of executions and coverage per target.
# Usage: bench/fuzz_long.sh [build dir] [fatbin s] [fleet s] [tokens s]
# Defaults: build/fuzz, 1080 s, 480 s, 480 s (34 min). Run it niced on a shared machine:
#   nice -n 19 bench/fuzz_long.sh
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build/fuzz}
declare -A seconds=([fatbin]=${2:-1080} [fleet]=${3:-480} [tokens]=${4:-480})
log=$build/fuzz-long.log
mkdir -p "$build"
: > "$log"
for t in fatbin fleet tokens; do
  bash "$src/tests/fuzz/run_libfuzzer.sh" "$src" "$build" "${seconds[$t]}" "$t" >> "$log" 2>&1
done
echo "target  seconds  executions  exec/s  coverage(edges)  features  corpus" | tee "$build/fuzz-long.summary"
total=0
for t in fatbin fleet tokens; do
  block=$(awk -v t="== fuzz_$t:" '$0 ~ t {on=1; next} /^== fuzz_/ {on=0} on' "$log")
  runs=$(grep -o 'number_of_executed_units: [0-9]*' <<<"$block" | awk '{print $2}')
  rate=$(grep -o 'average_exec_per_sec: *[0-9]*' <<<"$block" | awk '{print $2}')
  done_line=$(grep -E 'DONE +cov:' <<<"$block" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' <<<"$done_line" | awk '{print $2}')
  ft=$(grep -o 'ft: [0-9]*' <<<"$done_line" | awk '{print $2}')
  corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' <<<"$done_line" | awk '{print $2}')
  echo "$t  ${seconds[$t]}  $runs  $rate  $cov  $ft  $corp" | tee -a "$build/fuzz-long.summary"
  total=$((total + ${runs:-0}))
done
echo "total executions: $total" | tee -a "$build/fuzz-long.summary"
grep -q -E '^(==[0-9]+==ERROR|SUMMARY: )' "$log" && { echo "FINDING: see $log"; exit 1; }
echo "no finding"
