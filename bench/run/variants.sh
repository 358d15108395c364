#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Where archguard run's cost per launch goes (docs/run.md, "Cost"): launches.cu under the plain
# run, the default recorder, the recorder with fewer launch calls watched (ARCHGUARD_RUN_LAUNCHES)
# and an empty callback (CUPTI's own cost), interleaved over ROUNDS rounds; medians of the
# program's own launch-loop time. Usage: variants.sh ARCHGUARD NVCC OUTDIR
set -u
ag=$1 nvcc=$2 out=$3
rounds=${ROUNDS:-5}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')
"$nvcc" -O2 -gencode "arch=compute_$cc,code=sm_$cc" "$here/launches.cu" -o "$out/launches" || exit 1
variants=(plain default runtime driver none empty)
declare -A figs
for ((r = 0; r < rounds; r++)); do
  for v in "${variants[@]}"; do
    case $v in
      plain) o=$("$out/launches") ;;
      default) o=$("$ag" run -q --json /dev/null -- "$out/launches" 2>/dev/null) ;;
      empty) o=$(ARCHGUARD_RUN_EMPTY_CALLBACK=1 "$ag" run -q --json /dev/null -- "$out/launches" 2>/dev/null) ;;
      *) o=$(ARCHGUARD_RUN_LAUNCHES=$v "$ag" run -q --json /dev/null -- "$out/launches" 2>/dev/null) ;;
    esac
    ms=$(echo "$o" | grep -o 'launch_loop_ms=[0-9.]*' | cut -d= -f2)
    figs[$v]="${figs[$v]:-} $ms"
  done
done
{
  echo "| variant | launch loop ms (median of $rounds) | per launch us | over plain |"
  echo "|---|---:|---:|---:|"
  for v in "${variants[@]}"; do
    echo "$v ${figs[$v]}"
  done | python3 -c '
import sys, statistics
rows = [l.split() for l in sys.stdin if l.strip()]
med = {r[0]: statistics.median(map(float, r[1:])) for r in rows if len(r) > 1}
base = med.get("plain")
for v, m in med.items():
    print("| %s | %.1f | %.3f | %s |" % (v, m, m * 10.0 / 1000.0, "-" if v == "plain" or not base else "%+.1f %%" % ((m / base - 1) * 100)))
'
} | tee "$out/variants.md"
# Which traced calls fire, per variant (the closing line of one recording each).
for v in default none; do
  rm -rf "$out/keep-$v"
  if [[ $v == default ]]; then "$ag" run -q --keep "$out/keep-$v" -- "$out/launches" > /dev/null 2>&1
  else ARCHGUARD_RUN_LAUNCHES=$v "$ag" run -q --keep "$out/keep-$v" -- "$out/launches" > /dev/null 2>&1; fi
  echo "$v: $(grep -h '"ev":"counts"' "$out/keep-$v"/p*.events)"
done | tee -a "$out/variants.md"
