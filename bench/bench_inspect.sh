#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# archguard inspect against cuobjdump --list-elf + --list-ptx on one library: wall time and
# peak memory (GNU time -v), the runs interleaved in the same session, medians over N runs.
# Method and figures: docs/benchmarks-inspect.md.
#
# Usage: bench/bench_inspect.sh [library] [repetitions]
#   ARCHGUARD   the archguard binary (default: build/default/bin/archguard, then build/dev)
#   CUOBJDUMP   cuobjdump (default: the one scripts/setup.sh installs into $ARCHGUARD_VENV/.venv)
#   GNU_TIME    GNU time, for peak memory (default: /usr/bin/time)
#   ARCHGUARD_OLD  optional: another archguard binary (the one before a change), measured in the
#               same rounds; its row and the new-vs-old ratio are added
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:-/usr/local/cuda/lib64/libcublasLt.so.13}
reps=${2:-5}
ag=${ARCHGUARD:-}
for c in "$here/build/default/bin/archguard" "$here/build/ci/bin/archguard" "$here/build/dev/bin/archguard"; do
  [[ -n $ag ]] && break
  [[ -x $c ]] && ag=$c
done
venv=${ARCHGUARD_VENV:-$here/.venv}
cuobjdump=${CUOBJDUMP:-$(ls "$venv"/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump 2>/dev/null | head -1)}
[[ -x $ag ]] || { echo "bench_inspect: no archguard binary (set ARCHGUARD)" >&2; exit 2; }
[[ -x $cuobjdump ]] || { echo "bench_inspect: no cuobjdump (set CUOBJDUMP or run scripts/setup.sh --tests)" >&2; exit 2; }
[[ -f $lib ]] || { echo "bench_inspect: no $lib" >&2; exit 2; }
old=${ARCHGUARD_OLD:-}
[[ -z $old || -x $old ]] || { echo "bench_inspect: ARCHGUARD_OLD=$old is not executable" >&2; exit 2; }
gnutime=${GNU_TIME:-/usr/bin/time}
[[ -x $gnutime ]] || { echo "bench_inspect: needs GNU time ($gnutime; Debian package 'time', or set GNU_TIME)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# measure <name> <command...>: appends "seconds kilobytes" to $tmp/<name>. Wall time from the
# shell's microsecond clock (GNU time prints only centiseconds), peak RSS from GNU time.
measure() {
  local name=$1 t0 t1
  shift
  t0=$EPOCHREALTIME
  "$gnutime" -f "%M" -o "$tmp/t" "$@" >/dev/null 2>&1 || true
  t1=$EPOCHREALTIME
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", b - a}') $(cat "$tmp/t")" >> "$tmp/$name"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

echo "library:   $lib ($(du -h "$lib" | cut -f1))"
echo "archguard: $ag"
[[ -n $old ]] && echo "old:       $old"
echo "cuobjdump: $cuobjdump ($("$cuobjdump" --version | tail -1))"
echo "machine:   $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); runs: $reps (after one warm-up each)"
"$ag" inspect "$lib" >/dev/null; "$cuobjdump" --list-elf "$lib" >/dev/null 2>&1 || true  # warm the page cache
[[ -n $old ]] && "$old" inspect "$lib" >/dev/null
for ((i = 0; i < reps; ++i)); do
  measure ag_table "$ag" inspect "$lib"
  [[ -n $old ]] && measure ag_old "$old" inspect "$lib"
  measure ag_list "$ag" inspect --list-like-cuobjdump "$lib"
  measure cu_elf "$cuobjdump" --list-elf "$lib"
  measure cu_ptx "$cuobjdump" --list-ptx "$lib"
  measure ag_json "$ag" inspect --json "$lib"
done
# cuobjdump needs two runs for what one inspect prints: time adds up, memory is the larger.
paste -d' ' "$tmp/cu_elf" "$tmp/cu_ptx" | awk '{print $1 + $3, ($2 > $4 ? $2 : $4)}' > "$tmp/cu_both"
row() {
  local name=$1 label=$2
  local t m
  t=$(cut -d' ' -f1 "$tmp/$name" | median)
  m=$(cut -d' ' -f2 "$tmp/$name" | median)
  printf "| %-44s | %8.3f | %10.1f |\n" "$label" "$t" "$(awk -v m="$m" 'BEGIN {print m / 1024}')"
  echo "$t $m" > "$tmp/$name.med"
}
echo
echo "| command (median of $reps) | wall s | peak MiB |"
echo "|---|---:|---:|"
row cu_elf "cuobjdump --list-elf"
row cu_ptx "cuobjdump --list-ptx"
row cu_both "cuobjdump --list-elf + --list-ptx"
row ag_table "archguard inspect (table)"
[[ -n $old ]] && row ag_old "ARCHGUARD_OLD inspect (table)"
row ag_list "archguard inspect --list-like-cuobjdump"
row ag_json "archguard inspect --json"
read -r ct cm < "$tmp/cu_both.med"
read -r at am < "$tmp/ag_table.med"
read -r lt lm < "$tmp/ag_list.med"
echo
printf "inspect (table) vs cuobjdump elf+ptx: %.0fx faster, %.0fx less memory\n" "$(awk -v a="$ct" -v b="$at" 'BEGIN {print a / b}')" "$(awk -v a="$cm" -v b="$am" 'BEGIN {print a / b}')"
printf "inspect --list-like-cuobjdump vs cuobjdump elf+ptx: %.0fx faster, %.0fx less memory\n" "$(awk -v a="$ct" -v b="$lt" 'BEGIN {print a / b}')" "$(awk -v a="$cm" -v b="$lm" 'BEGIN {print a / b}')"
if [[ -n $old ]]; then
  read -r ot om < "$tmp/ag_old.med"
  printf "ARCHGUARD_OLD inspect vs cuobjdump elf+ptx: %.0fx faster, %.0fx less memory\n" "$(awk -v a="$ct" -v b="$ot" 'BEGIN {print a / b}')" "$(awk -v a="$cm" -v b="$om" 'BEGIN {print a / b}')"
  printf "inspect (table) vs ARCHGUARD_OLD inspect: %.2fx the wall time, %.2fx the memory\n" "$(awk -v a="$at" -v b="$ot" 'BEGIN {print a / b}')" "$(awk -v a="$am" -v b="$om" 'BEGIN {print a / b}')"
fi
