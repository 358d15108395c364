#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fleet scale (issue 23): N node reports (default 10,000, one JSON line each, as
# `archguard doctor --json` prints them: a real report of this machine's doctor with its node
# name, GPUs and driver varied) merged by `archguard fleet merge -`, and `check --fleet` of a
# small binary against the merged fleet report; wall time and peak RSS of each, paired in the
# same run with an anchor: Python's json module decoding the same stream (what a hand-written
# merge script would do at least). Also `fleet slurm` on scontrol output of N nodes.
# Usage: bench_merge.sh <archguard> [N]     Goal: merge of 10,000 reports < 2 s, < 200 MB.
set -euo pipefail
ag="$(realpath "$1")"
n="${2:-10000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
fake="$(dirname "$ag")/../tests/fake/libarchguard_fake_libcuda.so"
# One real node report (the fake driver when this machine has none), then N variants of it.
if [ -f "$fake" ]; then
  ARCHGUARD_LIBCUDA="$fake" FAKE_CUDA_COUNT=8 FAKE_CUDA_NAME="NVIDIA H100 80GB HBM3" "$ag" doctor --json --no-smoke --node seed > "$work/seed.json" || true
else
  "$ag" doctor --json --no-smoke --node seed > "$work/seed.json" || true
fi
python3 - "$work/seed.json" "$n" "$work/reports.txt" "$work/scontrol.txt" <<'PY'
import json, sys
seed = json.loads(open(sys.argv[1]).read())
n = int(sys.argv[2])
models = [("NVIDIA H100 80GB HBM3", "9.0", "580.65.06", "13.0"), ("NVIDIA A100-SXM4-80GB", "8.0", "550.54.14", "12.4"),
          ("NVIDIA L40S", "8.9", "570.86.15", "12.8"), ("NVIDIA B200", "10.0", "580.65.06", "13.0")]
with open(sys.argv[3], "w") as out, open(sys.argv[4], "w") as sc:
    for i in range(n):
        name, cc, drv, cuda = models[i % len(models)]
        r = dict(seed)
        r["node"] = dict(seed.get("node", {}), name=f"gpu{i:05d}")
        r["driver_version"], r["driver_cuda"] = drv, cuda
        r["devices"] = [{"ordinal": g, "name": name, "cc": cc, "tegra": False, "pci_bus_id": f"0000:{g + 1:02x}:00.0",
                         "uuid": f"GPU-{i:08x}-0000-0000-0000-{g:012x}", "mig_mode": "disabled"} for g in range(8)]
        out.write(json.dumps(r, separators=(",", ":")) + "\n")
        sc.write(f"NodeName=gpu{i:05d} Arch=x86_64 CoresPerSocket=32 Gres=gpu:{name.split()[1].split('-')[0].lower()}:8(S:0-1) State=IDLE\n")
PY
size=$(wc -c < "$work/reports.txt")
printf '__global__ void k(float* x) { x[0] = 1; }\nint main() { return 0; }\n' > "$work/k.cu"
have_nvcc=0
command -v nvcc >/dev/null 2>&1 && nvcc -gencode arch=compute_90,code=sm_90 "$work/k.cu" -o "$work/k" >/dev/null 2>&1 && have_nvcc=1
measure() {  # label, command...: prints "label: wall s, peak RSS MB"
  local label="$1"; shift
  /usr/bin/time -f "%e %M" -o "$work/t" "$@" > /dev/null 2>&1 || true
  read -r wall rss < <(tail -n 1 "$work/t")
  printf '%-44s %6.2f s %7.1f MB\n' "$label" "$wall" "$(echo "$rss / 1024" | bc -l)"
  echo "$wall $rss" > "$work/last"
}
echo "fleet scale: $n node reports, $(( size / 1024 / 1024 )) MiB ($(( size / n )) bytes each), $(nproc) cores"
for round in 1 2 3; do
  echo "round $round"
  measure "  anchor: python3 json.loads of every line" python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$work/reports.txt"
  read -r aw ar < "$work/last"
  measure "  archguard fleet merge - --report" sh -c "'$ag' fleet merge - --report '$work/fleet.json' < '$work/reports.txt'"
  read -r mw mr < "$work/last"
  printf '  ratio merge/anchor: time %.2f, memory %.2f\n' "$(echo "$mw / $aw" | bc -l)" "$(echo "$mr / $ar" | bc -l)"
  measure "  archguard fleet slurm (scontrol of $n nodes)" "$ag" fleet slurm "$work/scontrol.txt"
  [ "$have_nvcc" = 1 ] && measure "  archguard check --fleet (the merged report)" "$ag" check "$work/k" --fleet "$work/fleet.json"
done
"$ag" fleet merge - < "$work/reports.txt" | head -3
