#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The overhead of `archguard run`, on a GPU machine: builds launches.cu (10^5 tiny launches),
# startup.cu (cudaFree(0) only) and uses train_step.py (a PyTorch MLP training step), then runs
# each, INTERLEAVED, for N rounds: plain, under `archguard run --json /dev/null --` and under
# `archguard run --predict --json /dev/null --` (the order of the three turns round by round).
# It takes the wall time of each process (date +%s%N around it) and the program's own figures,
# prints a table of medians with the ratios to the plain run and the goals, and writes it to
# OUTDIR/bench_run.md (the raw figures to OUTDIR/bench_run.tsv).
# Goals: launch loop overhead <= 5 %, training step <= 1 %, start-up added <= 50 ms.
# Usage: bench_run.sh ARCHGUARD NVCC OUTDIR   (rounds: BENCH_ROUNDS, default 5; PYTHON)
# Exit 0 when measured (goals missed or not: the table says), 1 on an error, 77 without a GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../tests/cli/lib.sh"
cli_gpu_args "bench_run.sh ARCHGUARD NVCC OUTDIR" "$@"
out=$dir
rounds=${BENCH_ROUNDS:-5}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
g=(-gencode "arch=compute_$arch,code=sm_$arch")
"$nvcc" -O2 "${g[@]}" "$here/launches.cu" -o "$out/launches" || { echo "error: building launches.cu"; exit 1; }
"$nvcc" -O2 "${g[@]}" "$here/startup.cu" -o "$out/startup" || { echo "error: building startup.cu"; exit 1; }

progs=(launches startup)
if "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' > /dev/null 2>&1; then
  progs+=(train)
else
  echo "note: torch with CUDA not importable by $py: the training step is skipped"
fi
modes=(plain run predict)
tsv=$out/bench_run.tsv
printf 'program\tmode\tround\tstatus\twall_us\tfigures\n' > "$tsv"
errors=0
# one <program> <mode> <round>: runs it once, appends a line to the TSV.
one() {
  local prog=$1 mode=$2 round=$3 t0 t1 rc figures
  local -a cmd pre=()
  case $prog in
    launches) cmd=("$out/launches") ;;
    startup) cmd=("$out/startup") ;;
    train) cmd=("$py" "$here/train_step.py") ;;
  esac
  case $mode in
    run) pre=("$ag" run --json /dev/null --) ;;
    predict) pre=("$ag" run --predict --json /dev/null --) ;;
  esac
  t0=$(date +%s%N)
  "${pre[@]}" "${cmd[@]}" > "$out/last.out" 2>&1
  rc=$?
  t1=$(date +%s%N)
  figures=$(grep -oE '[a-z_]+_ms=[0-9.]+' "$out/last.out" | tr '\n' ' ')
  if [[ $rc -ne 0 ]]; then
    echo "error: $prog ($mode, round $round) exited $rc: $(tail -2 "$out/last.out" | tr '\n' ' ')"
    errors=$((errors + 1))
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$prog" "$mode" "$round" "$rc" "$(((t1 - t0) / 1000))" "$figures" >> "$tsv"
}
echo "GPU CC $cc; $rounds rounds of ${progs[*]} x ${modes[*]}; archguard: $ag"
for ((r = 1; r <= rounds; r++)); do
  for prog in "${progs[@]}"; do
    for ((k = 0; k < ${#modes[@]}; k++)); do
      one "$prog" "${modes[$(((k + r) % ${#modes[@]}))]}" "$r"
    done
  done
  echo "round $r/$rounds done"
done
rm -f "$out/last.out"

"$py" - "$tsv" "$out/bench_run.md" "$cc" "$rounds" "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)" <<'PY'
import statistics, sys
from collections import defaultdict

tsv, md, cc, rounds, gpu = sys.argv[1:]
wall = defaultdict(list)   # (program, mode) -> [wall ms]
figs = defaultdict(list)   # (program, mode, figure) -> [ms]
lines = open(tsv).read().splitlines()[1:]
for line in lines:
    prog, mode, _round, status, wall_us, figures = line.split("\t")
    if status != "0":
        continue
    wall[prog, mode].append(float(wall_us) / 1000.0)   # microseconds -> ms
    for f in figures.split():
        k, v = f.split("=")
        figs[prog, mode, k].append(float(v))


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x):
    return "-" if x is None else "%.2f" % x


rows = []  # (program, figure, plain, run, predict, kind, goal)
def row(prog, label, series, kind="ratio", goal=None):
    p, r, q = (med(series(m)) for m in ("plain", "run", "predict"))
    rows.append((prog, label, p, r, q, kind, goal))


row("launches", "launch loop, in-process (ms)", lambda m: figs["launches", m, "launch_loop_ms"], "ratio", 1.05)
row("launches", "process wall (ms)", lambda m: wall["launches", m])
row("startup", "process wall (ms)", lambda m: wall["startup", m], "added", 50.0)
row("startup", "cudaFree(0), in-process (ms)", lambda m: figs["startup", m, "startup_ms"])
if any(k[0] == "train" for k in wall):
    row("train", "training step, in-process (ms)", lambda m: figs["train", m, "step_ms"], "ratio", 1.01)
    row("train", "process wall (ms)", lambda m: wall["train", m])

out = ["# archguard run overhead", "",
       "GPU: %s (CC %s); %s rounds, interleaved; medians of the runs that exited 0." % (gpu, cc, rounds), "",
       "| program | figure | plain | run | run/plain | run --predict | predict/plain | goal | run meets it |",
       "|---|---|---:|---:|---:|---:|---:|---|---|"]
for prog, label, p, r, q, kind, goal in rows:
    ratio = lambda x: "-" if (x is None or not p) else "%.3f" % (x / p)
    if kind == "added":
        rel = lambda x: "-" if (x is None or p is None) else "+%.1f ms" % (x - p)
        rr, qq = rel(r), rel(q)
        goal_s = "added <= %g ms" % goal
        met = "-" if (r is None or p is None) else ("yes" if r - p <= goal else "NO")
    else:
        rr, qq = ratio(r), ratio(q)
        goal_s = "-" if goal is None else "overhead <= %g %%" % round((goal - 1) * 100, 2)
        met = "-" if (goal is None or r is None or not p) else ("yes" if r / p <= goal else "NO")
    out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (prog, label, fmt(p), fmt(r), rr, fmt(q), qq, goal_s, met))
failed = sum(1 for line in lines if line.split("\t")[3] != "0")
if failed:
    out += ["", "%d run(s) exited non-zero and are left out (see bench_run.tsv)." % failed]
text = "\n".join(out) + "\n"
open(md, "w").write(text)
print(text)
PY
echo "table: $out/bench_run.md; raw figures: $tsv"
[[ $errors -eq 0 ]]
