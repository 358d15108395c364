#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The largest hostile inputs of issue 22 at their full sizes (tests/cli/hostile_inputs.py), against the budgets of
# docs/cli.md ("what is derived from input"): wall time and peak memory (GNU time) of one
# archguard run each, with the run on a small valid object as the anchor (ratios in the same
# session). The inputs are generated in a temporary directory and removed.
# Usage: bench/bench_hostile.sh [archguard binary]
#   GNU_TIME  GNU time (default /usr/bin/time)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ag=${1:-$here/build/default/bin/archguard}
gnutime=${GNU_TIME:-/usr/bin/time}
[[ -x $ag ]] || { echo "bench_hostile: no archguard binary $ag" >&2; exit 2; }
[[ -x $gnutime ]] || { echo "bench_hostile: needs GNU time ($gnutime)" >&2; exit 2; }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
python3 "$here/tests/cli/hostile_inputs.py" "$t"  # the issue's full sizes (its defaults)
cp "$here/tests/data/malformed/valid.o" "$t/anchor.o"
run() {  # label, expected exit codes (regex), args...
  local label=$1 codes=$2; shift 2
  set +e
  "$gnutime" -f '%e %M' -o "$t/time.txt" timeout "${BENCH_TIMEOUT:-600}" "$ag" "$@" > "$t/out.txt" 2> "$t/err.txt"; local rc=$?
  set -e
  read -r secs kib < <(tail -1 "$t/time.txt")
  [[ $rc =~ ^($codes)$ ]] || { echo "bench_hostile: $label: exit $rc: $(head -c 400 "$t/err.txt")" >&2; exit 1; }
  printf '%-34s %6s  %8.2f s  %7d MiB  exit %d\n' "$label" "$(du -h "${@: -1}" | cut -f1)" "$secs" $((kib / 1024)) "$rc"
  echo "$secs" > "$t/last"
}
echo "input                              size     time      peak      outcome"
run "anchor: inspect valid.o" 0 inspect "$t/anchor.o"; anchor=$(cat "$t/last")
run "section-name bomb: inspect" 0 inspect "$t/section-names.so"
run "kernel-name bomb: verify --require 90" "1|2" verify --require 90 "$t/kernel-names.fatbin"
run "kernel-name bomb: inspect --kernels" "0|2" inspect --kernels "$t/kernel-names.fatbin"
run "embedded chain 16 MiB: inspect" 2 inspect "$t/chain.so"
grep -o 'fatbin entry headers checked.*' "$t/err.txt" | head -1 | sed 's/^/  chain: /'
# The JIT cache key of a source full of computed includes (about 480 KB, 5,000 of them that
# resolve, 5,000 that never do, a chain of 150 headers): the key's include scan is linear; the
# anchor is the same compile of a source with one of each (NVRTC's load and compile in both).
if "$ag" jit compile --arch sm_90 --no-cache "$t/anchor.cu" > /dev/null 2>&1; then
  run "jit anchor: compile anchor.cu" 0 jit compile --arch sm_90 --cache-dir "$t/cache" "$t/anchor.cu"; jit_anchor=$(cat "$t/last")
  run "computed includes: jit compile" 0 jit compile --arch sm_90 --cache-dir "$t/cache" "$t/computed.cu"
  awk -v a="$jit_anchor" -v b="$(cat "$t/last")" 'BEGIN { if (a > 0) printf "  computed includes: %.1f times the jit anchor\n", b / a }'
else
  echo "computed includes: skipped (archguard jit compile does not work here: no NVRTC?)"
fi
echo "anchor: $anchor s"
