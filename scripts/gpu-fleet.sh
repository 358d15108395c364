#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 23 on a GPU machine: the node report of this machine (timed, its UUIDs and MIG modes
# against nvidia-smi's), merged with two fake nodes (the fake libcuda and a fake nvidia-smi: an
# A100 under a CUDA 12.4 driver, an RTX 5090 under a CUDA 12.8 driver); `check --fleet` of a build
# for sm_90 only and of one with compute_90 PTX only against that fleet, and what this machine's
# real driver does with the same two binaries (the prediction for this node must match it); then
# the gpu- and fleet-labelled tests. Logs under $OUT: fleet-summary.md and one log per part.
#   OUT=<dir> (default ./gpu-fleet-out)  JOBS=<n>
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
# shellcheck source=lib/gpu-common.sh
. "$here/scripts/lib/gpu-common.sh"
gpu_setup gpu-fleet-out /tmp/archguard-fleet-build fleet-summary.md
gpu_header fleet
gpu_build build.log "build (tests included)" ON
fake="$build/tests/fake/libarchguard_fake_libcuda.so"
work="$(mktemp -d)"

say ""
say "## the node report of this machine"
for i in 1 2 3; do
  s=$(date +%s%N); "$ag" doctor --json > "$work/h200.json"; rc=$?; e=$(date +%s%N)
  s2=$(date +%s%N); "$ag" doctor --json --no-smoke > "$work/h200-nosmoke.json"; e2=$(date +%s%N)
  say "- run $i: doctor --json exit $rc in $(( (e - s) / 1000000 )) ms; --no-smoke $(( (e2 - s2) / 1000000 )) ms; $(wc -l < "$work/h200.json") line(s), $(wc -c < "$work/h200.json") bytes"
done
cp "$work/h200.json" "$OUT/node-report.json"
nvidia-smi --query-gpu=index,uuid,mig.mode.current --format=csv,noheader > "$OUT/nvidia-smi-uuid.txt" 2>&1
python3 - "$work/h200.json" "$OUT/nvidia-smi-uuid.txt" <<'PY' | tee -a "$summary"
import json, sys
r = json.load(open(sys.argv[1]))
smi = [l.split(", ") for l in open(sys.argv[2]).read().splitlines() if l.strip()]
print(f"- node {r['node']['name']}: {len(r['devices'])} GPU(s), driver {r['driver_version']} (CUDA {r['driver_cuda']}, PTX ISA {r['driver_ptx_isa']}); runtimes: " +
      ", ".join(f"{x['name']} {x['version']}" for x in r['node']['runtimes']))
ok = 0
for d in r["devices"]:
    row = next((s for s in smi if s[1].strip() == (d["uuid"] or "")), None)
    mig = row[2].strip().lower() if row else None
    same_mig = (d["mig_mode"] or "[n/a]").lower() == (mig or "").replace("[n/a]", "[n/a]") or (d["mig_mode"] is None and mig in ("[n/a]", "n/a", None))
    print(f"  - device {d['ordinal']} {d['name']} cc {d['cc']}: uuid {d['uuid']} {'= nvidia-smi' if row else 'NOT IN nvidia-smi'}; mig {d['mig_mode']} (nvidia-smi: {mig}){'' if same_mig else ' MISMATCH'}")
    ok += bool(row) and same_mig
print(f"- {ok} of {len(r['devices'])} devices: UUID and MIG mode as nvidia-smi says")
PY

# Two fake nodes beside it.
fake_node() {  # name gpu cc count cuda-version driver
  local d="$work/bin-$1"; mkdir -p "$d"
  cat > "$d/nvidia-smi" <<EOF
#!/bin/sh
i=0; while [ \$i -lt $4 ]; do echo "\$i, $2, 00000000:0\$((i + 1)):00.0, $3, $6"; i=\$((i + 1)); done
EOF
  chmod +x "$d/nvidia-smi"
  PATH="$d:$PATH" ARCHGUARD_LIBCUDA="$fake" ARCHGUARD_LIBNVML="$d/no-nvml.so" FAKE_CUDA_NAME="$2" FAKE_CUDA_CC=$3 FAKE_CUDA_COUNT=$4 FAKE_CUDA_DRIVER=$5 \
    FAKE_CUDA_UUID_SEED=$((RANDOM % 200 + 1)) "$ag" doctor --json --no-smoke --node "$1"
}
{ cat "$work/h200.json"; fake_node fake-a100 "NVIDIA A100-SXM4-80GB" 8.0 2 12040 550.54.14; fake_node fake-5090 "NVIDIA GeForce RTX 5090" 12.0 1 12080 570.86.15; } > "$work/reports.txt"
"$ag" fleet merge - --report "$OUT/fleet.json" --csv-file "$OUT/fleet.csv" < "$work/reports.txt" > "$OUT/merge.log" 2>&1
say ""
say "## fleet merge (this machine and two fake nodes): exit $?"
sed 's/^/    /' "$OUT/merge.log" | tee -a "$summary"

say ""
say "## check --fleet vs this machine's driver"
cat > "$work/k.cu" <<'EOF'
#include <cstdio>
__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }
int main() {
  float* d = nullptr;
  cudaMalloc(&d, 128);
  scale<<<1, 32>>>(d);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  std::printf("%d %s\n", static_cast<int>(e), cudaGetErrorString(e));
  return 0;
}
EOF
nvcc -gencode arch=compute_90,code=sm_90 "$work/k.cu" -o "$work/sm90" && nvcc -gencode arch=compute_90,code=compute_90 "$work/k.cu" -o "$work/ptx90"
for b in sm90 ptx90; do
  "$ag" check "$work/$b" --fleet "$OUT/fleet.json" > "$OUT/check-$b.log" 2>&1
  real=$("$work/$b")
  # The prediction for this machine's group: "runs ..." or "fails with N".
  mine=$(grep -m1 -E "^  .*\(CC $(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' '), .* on $(python3 -c "import json;print(json.load(open('$work/h200.json'))['node']['name'])")" "$OUT/check-$b.log" | sed 's/.*): //')
  code=${real%% *}
  if { [ "$code" = 0 ] && [[ "$mine" == runs* ]]; } || [[ "$mine" == "fails with $code"* ]]; then verdict="agrees"; else verdict="DISAGREES"; fi
  say "- $b: predicted for this node: '$mine'; the real launch: $real -> $verdict"
  sed -n '/^fleet:/,$p' "$OUT/check-$b.log" | sed 's/^/    /' | tee -a "$summary"
done

say ""
[ "${SKIP_CTEST:-0}" = 1 ] && { rm -rf "$work"; exit 0; }
say "## ctest -L 'gpu|fleet'"
( cd "$build" && timeout 900 ctest -L 'gpu|fleet' -j 4 --output-on-failure > "$OUT/ctest.log" 2>&1 ); rc=$?
say "- exit $rc: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
grep -E "\*\*\*Failed|\*\*\*Skipped|Not Run" "$OUT/ctest.log" | head -20 | sed 's/^/    /' | tee -a "$summary"
rm -rf "$work"
