#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real Slurm cluster on this machine: munged, slurmctld and one slurmd per node name (three
# nodes on 127.0.0.1, each with its own port), configured and started here in a temporary
# directory and stopped on exit. Every node reports a different fake GPU and driver (the fake
# libcuda and a fake nvidia-smi of its own). Then the documented workflow:
#   srun --nodes=3 --ntasks-per-node=1 archguard doctor --json | archguard fleet merge -
#   archguard fleet slurm            (what Slurm's GRES say, no job)
#   archguard check BUILD --fleet fleet.json, ARCH_POLICY=fleet:fleet.csv
# and the expected fleet and per-node verdicts. Skips (77) without Slurm, munge or nvcc.
# Usage: slurm_fleet.sh <archguard> <fake libcuda>
set -uo pipefail
tool="$(realpath "$1")"
fake_libcuda="$(realpath "$2")"
src_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
for p in slurmctld slurmd munged mungekey srun scontrol sinfo; do
  command -v "$p" >/dev/null 2>&1 || [ -x "/usr/sbin/$p" ] || { echo "SKIP: $p is not installed (scripts/setup.sh --tests installs Slurm and munge)"; exit 77; }
done
export PATH="$PATH:/usr/sbin:/usr/local/cuda/bin"
command -v nvcc >/dev/null 2>&1 || { echo "SKIP: no nvcc to build the binary the fleet judges"; exit 77; }

work="$(mktemp -d "${TMPDIR:-/tmp}/ag-slurm.XXXXXX")"
user="$(id -un)"
fails=0
pids=()
stop_all() {
  # Daemons write their pid files; stop them all, then make sure none is left.
  for f in "$work"/run/*.pid; do
    [ -f "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null
  done
  for f in "$work"/run/*.pid; do
    [ -f "$f" ] || continue
    local pid; pid="$(cat "$f")"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap stop_all EXIT

expect() {  # expect <what> <file> <fixed string>
  if grep -qF -- "$3" "$2"; then echo "ok: $1"; else echo "FAIL: $1: '$3' not in:"; sed -n 1,40p "$2"; fails=$((fails + 1)); fi
}

mkdir -p "$work"/{munge,run,log,state,spool,dev,bin}
chmod 700 "$work/munge"

# Free TCP ports on 127.0.0.1 for slurmctld, slurmd's default and the three nodes.
read -r p_ctld p_d p1 p2 p3 < <(python3 - <<'EOF'
import socket
socks = []
for _ in range(5):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
)

# munge: a key of our own and a daemon on our own socket.
mungekey --create --keyfile="$work/munge/munge.key" >/dev/null 2>&1 || { echo "FAIL: mungekey"; exit 1; }
munged --socket="$work/munge/sock" --key-file="$work/munge/munge.key" --pid-file="$work/run/munged.pid" \
  --log-file="$work/log/munged.log" --seed-file="$work/munge/seed" --force || { echo "FAIL: munged did not start"; exit 1; }

nodes=(gpu-h01 gpu-a01 gpu-b01)
ports=("$p1" "$p2" "$p3")
# node: gres type, count, fake GPU name, CC, driver version, CUDA version (cuDriverGetVersion)
declare -A gres=([gpu-h01]="h100:4" [gpu-a01]="a100:2" [gpu-b01]="rtx5090:1")
declare -A gname=([gpu-h01]="NVIDIA H100 80GB HBM3" [gpu-a01]="NVIDIA A100-SXM4-80GB" [gpu-b01]="NVIDIA GeForce RTX 5090")
declare -A gcc=([gpu-h01]=9.0 [gpu-a01]=8.0 [gpu-b01]=12.0)
declare -A gdrv=([gpu-h01]=580.65.06 [gpu-a01]=550.54.14 [gpu-b01]=570.86.15)
declare -A gcuda=([gpu-h01]=13000 [gpu-a01]=12040 [gpu-b01]=12080)

{
  echo "ClusterName=agtest"
  echo "SlurmctldHost=localhost(127.0.0.1)"
  echo "SlurmctldPort=$p_ctld"
  echo "SlurmdPort=$p_d"
  echo "AuthType=auth/munge"
  echo "AuthInfo=socket=$work/munge/sock"
  echo "CredType=cred/munge"
  echo "SlurmUser=$user"
  echo "SlurmdUser=$user"
  echo "StateSaveLocation=$work/state"
  echo "SlurmdSpoolDir=$work/spool/%n"
  echo "SlurmctldPidFile=$work/run/slurmctld.pid"
  echo "SlurmdPidFile=$work/run/slurmd-%n.pid"
  echo "SlurmctldLogFile=$work/log/slurmctld.log"
  echo "SlurmdLogFile=$work/log/slurmd-%n.log"
  echo "ProctrackType=proctrack/pgid"
  echo "TaskPlugin=task/none"
  echo "MpiDefault=none"
  echo "SchedulerType=sched/builtin"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_Core"
  echo "ReturnToService=2"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "GresTypes=gpu"
  for i in 0 1 2; do
    n=${nodes[$i]}
    echo "NodeName=$n NodeAddr=127.0.0.1 NodeHostname=$(hostname) Port=${ports[$i]} CPUs=1 RealMemory=100 Gres=gpu:${gres[$n]}"
  done
  echo "PartitionName=main Nodes=ALL Default=YES MaxTime=5 State=UP"
} > "$work/slurm.conf"
: > "$work/gres.conf"
for n in "${nodes[@]}"; do
  mkdir -p "$work/spool/$n" "$work/bin/$n"
  count=${gres[$n]#*:}
  for ((d = 0; d < count; d++)); do : > "$work/dev/$n-$d"; done
  echo "NodeName=$n Name=gpu Type=${gres[$n]%%:*} File=$work/dev/$n-[0-$((count - 1))]" >> "$work/gres.conf"
  # The node's nvidia-smi: the one query the doctor makes, answered for this node's GPUs.
  cat > "$work/bin/$n/nvidia-smi" <<EOF
#!/bin/sh
case "\$*" in
  "--query-gpu=index,name,pci.bus_id,compute_cap,driver_version --format=csv,noheader")
    i=0; while [ \$i -lt $count ]; do echo "\$i, ${gname[$n]}, 00000000:0\$((i + 1)):00.0, ${gcc[$n]}, ${gdrv[$n]}"; i=\$((i + 1)); done ;;
  *) echo "fake nvidia-smi: unsupported: \$*" >&2; exit 2 ;;
esac
EOF
  chmod +x "$work/bin/$n/nvidia-smi"
done
export SLURM_CONF="$work/slurm.conf"

slurmctld -f "$SLURM_CONF" -c || { echo "FAIL: slurmctld did not start"; cat "$work/log/slurmctld.log"; exit 1; }
for n in "${nodes[@]}"; do
  slurmd -f "$SLURM_CONF" -N "$n" || { echo "FAIL: slurmd -N $n did not start"; cat "$work/log/slurmd-$n.log"; exit 1; }
done
# Wait (bounded) until the three nodes are idle.
up=0
for _ in $(seq 300); do
  up=$(sinfo -h -N -o "%N %T" 2>/dev/null | grep -c " idle$")
  [ "$up" = 3 ] && break
  sleep 0.2
done
if [ "$up" != 3 ]; then
  echo "FAIL: the cluster did not come up ($up of 3 nodes idle)"; sinfo -N 2>&1; tail -5 "$work"/log/*.log; exit 1
fi
echo "ok: slurm cluster up: $(sinfo -h -N -o '%N:%G' | tr '\n' ' ')"

# The job step each node runs: its fake GPUs and driver, then the node report.
uuid_base=$((RANDOM % 200))
cat > "$work/bin/node-report.sh" <<EOF
#!/usr/bin/env bash
n="\$SLURMD_NODENAME"
case "\$n" in
$(i=0; for n in "${nodes[@]}"; do
  # distinct first UUID bytes per node (independent random picks collided ~1.5% of runs)
  echo "  $n) export FAKE_CUDA_NAME='${gname[$n]}' FAKE_CUDA_CC=${gcc[$n]} FAKE_CUDA_COUNT=${gres[$n]#*:} FAKE_CUDA_DRIVER=${gcuda[$n]} FAKE_CUDA_UUID_SEED=$(( (uuid_base + i * 61) % 200 + 1 )) ;;"
  i=$((i + 1))
done)
  *) echo "node-report: unknown node \$n" >&2; exit 2 ;;
esac
export ARCHGUARD_LIBCUDA="$fake_libcuda" PATH="$work/bin/\$n:\$PATH"
exec "$tool" doctor --json --no-smoke
EOF
chmod +x "$work/bin/node-report.sh"

cd "$work"
# --label: srun cuts each task's output into 1 KiB pieces and interleaves them; labelled, the
# merge puts each task's pieces back together.
timeout 120 srun --label --nodes=3 --ntasks-per-node=1 "$work/bin/node-report.sh" > reports.txt 2> srun.err
rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: srun exited $rc"; cat srun.err; tail -5 log/*.log; fails=$((fails + 1)); fi
timeout 60 "$tool" fleet merge - --report fleet.json --csv-file fleet.csv < reports.txt > merge.txt 2>&1
rc=$?
[ $rc -eq 0 ] && echo "ok: fleet merge exits 0" || { echo "FAIL: fleet merge exited $rc"; cat merge.txt; fails=$((fails + 1)); }
expect "three nodes, seven GPUs" merge.txt "fleet: 3 nodes, 7 GPUs in 3 groups (3 inputs from -)"
expect "the H100 node and its driver" merge.txt "NVIDIA H100 80GB HBM3 (CC 9.0), driver 580.65.06 (CUDA 13.0, PTX ISA 9.0): 4 GPUs on 1 node: gpu-h01"
expect "the A100 node" merge.txt "NVIDIA A100-SXM4-80GB (CC 8.0), driver 550.54.14 (CUDA 12.4, PTX ISA 8.4): 2 GPUs on 1 node: gpu-a01"
expect "the RTX 5090 node" merge.txt "NVIDIA GeForce RTX 5090 (CC 12.0), driver 570.86.15 (CUDA 12.8, PTX ISA 8.7): 1 GPU on 1 node: gpu-b01"
python3 - fleet.json <<'EOF' || fails=$((fails + 1))
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "archguard.fleet/1", d["schema"]
names = [n["name"] for n in d["nodes"]]
assert names == ["gpu-a01", "gpu-b01", "gpu-h01"], names
uuids = [g["uuid"] for n in d["nodes"] for g in n["gpus"]]
assert len(uuids) == 7 and all(u.startswith("GPU-") for u in uuids), uuids
assert not d["problems"], d["problems"]
print("ok: fleet report: 3 nodes, 7 GPUs with UUIDs, no problems")
EOF
[ "$(grep -c ', 9.0$' fleet.csv)" = 4 ] && [ "$(grep -c ', 8.0$' fleet.csv)" = 2 ] && echo "ok: fleet CSV, one line per GPU" \
  || { echo "FAIL: fleet CSV"; cat fleet.csv; fails=$((fails + 1)); }

# One file per node (srun --output=DIR/%N-%t.json), merged as a directory.
mkdir -p per-node
timeout 120 srun --nodes=3 --ntasks-per-node=1 --output="$work/per-node/%N-%t.json" "$work/bin/node-report.sh" 2>> srun.err
"$tool" fleet merge per-node > dir.txt 2>&1
[ $? -eq 0 ] && echo "ok: merge of a directory of per-node reports exits 0" || { echo "FAIL: directory merge"; cat dir.txt; fails=$((fails + 1)); }
expect "directory of per-node files" dir.txt "fleet: 3 nodes, 7 GPUs in 3 groups (3 inputs from per-node)"
# Without --label the pieces of several nodes may interleave: then it is said, never merged wrong.
timeout 120 srun --nodes=3 --ntasks-per-node=1 "$work/bin/node-report.sh" > plain.txt 2>> srun.err
"$tool" fleet merge - < plain.txt > plain-merge.txt 2>&1
prc=$?
if [ $prc -eq 0 ]; then expect "unlabelled output that did not interleave" plain-merge.txt "fleet: 3 nodes, 7 GPUs"
else expect "interleaved output is named" plain-merge.txt "run srun with --label"; fi

# deploy/slurm/fleet-report.sbatch as a user submits it: archguard on PATH (here a wrapper that
# gives each node its fake GPUs before it runs the real tool).
mkdir -p "$work/bin/wrap"
cat > "$work/bin/wrap/archguard" <<EOF2
#!/usr/bin/env bash
[ "\$1" = doctor ] && exec "$work/bin/node-report.sh"
exec "$tool" "\$@"
EOF2
chmod +x "$work/bin/wrap/archguard"
PATH="$work/bin/wrap:$PATH" timeout 120 sbatch --wait --nodes=3 --output="$work/sbatch.log" "$src_dir/deploy/slurm/fleet-report.sbatch" "$work/sbatch-out" > /dev/null 2>&1
brc=$?
[ $brc -eq 0 ] && echo "ok: sbatch --wait fleet-report.sbatch exits 0" || { echo "FAIL: sbatch exited $brc"; cat "$work/sbatch.log"; fails=$((fails + 1)); }
[ "$(ls "$work/sbatch-out/reports" 2>/dev/null | wc -l)" = 3 ] && echo "ok: one report file per node" || { echo "FAIL: reports of the batch job"; ls -l "$work/sbatch-out/reports"; fails=$((fails + 1)); }
grep -c ', ' "$work/sbatch-out/fleet.csv" 2>/dev/null | grep -qx 8 && echo "ok: the batch job's fleet CSV: a header and 7 GPUs" || { echo "FAIL: batch fleet CSV"; cat "$work/sbatch-out/fleet.csv"; fails=$((fails + 1)); }

# A node reported twice (a rerun appended to the same file) is named, not merged silently.
cat reports.txt reports.txt | "$tool" fleet merge - > dup.txt 2>&1
[ $? -eq 1 ] && echo "ok: duplicates exit 1" || { echo "FAIL: duplicates did not exit 1"; fails=$((fails + 1)); }
expect "duplicate named" dup.txt "node gpu-a01 is reported again"

# What Slurm knows without a job: GRES types through the architecture table.
timeout 60 "$tool" fleet slurm > slurm.txt 2>&1
expect "fleet slurm reads scontrol" slurm.txt "fleet: 3 nodes, 7 GPUs in 3 groups"
expect "gres type h100" slurm.txt "h100 (CC 9.0), driver unknown: 4 GPUs on 1 node: gpu-h01"
expect "gres type rtx5090" slurm.txt "rtx5090 (CC 12.0), driver unknown: 1 GPU on 1 node: gpu-b01"

# A build for sm_90 only, and one with compute_90 PTX only, judged on the fleet.
printf '__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }\nint main() { return 0; }\n' > k.cu
nvcc -gencode arch=compute_90,code=sm_90 k.cu -o sm90 >/dev/null 2>&1 && nvcc -gencode arch=compute_90,code=compute_90 k.cu -o ptx90 >/dev/null 2>&1 \
  || { echo "FAIL: nvcc"; exit 1; }
"$tool" check sm90 --fleet fleet.json > check.txt 2>&1
[ $? -eq 1 ] && echo "ok: check --fleet exits 1 (some nodes fail)" || { echo "FAIL: check --fleet exit code"; cat check.txt; fails=$((fails + 1)); }
expect "per group: H100 runs" check.txt "NVIDIA H100 80GB HBM3 (CC 9.0, 4 GPUs on gpu-h01, driver 580.65.06): runs natively"
expect "per group: A100 fails" check.txt "NVIDIA A100-SXM4-80GB (CC 8.0, 2 GPUs on gpu-a01, driver 550.54.14): fails with 209"
expect "fleet line" check.txt "fleet: runs on 1 of 3 GPU groups (1 of 3 nodes)"
expect "fix, CMake form" check.txt 'CMake: "80-real;120" in CMAKE_CUDA_ARCHITECTURES'
expect "fix, nvcc form" check.txt "nvcc: -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_120,code=[sm_120,compute_120]"
"$tool" check ptx90 --fleet fleet.json > check-ptx.txt 2>&1
expect "PTX 9.0 JITs on the H100 (driver of CUDA 13.0)" check-ptx.txt "(CC 9.0, 4 GPUs on gpu-h01, driver 580.65.06): runs after a JIT"
expect "PTX 9.0 is too new for the RTX 5090's driver (570: ISA 8.7)" check-ptx.txt "(CC 12.0, 1 GPU on gpu-b01, driver 570.86.15): fails with 222"
"$tool" check sm90 --fleet fleet.json --json > check.json 2>/dev/null
python3 - check.json <<'EOF' || fails=$((fails + 1))
import json, sys
d = json.load(open(sys.argv[1]))
f = d["fleet"]
assert (f["groups"], f["groups_run"], f["nodes"], f["nodes_run"]) == (3, 1, 3, 1), f
assert f["failing_nodes"] == ["gpu-a01", "gpu-b01"], f["failing_nodes"]
assert f["fix"]["cmake"] == "80-real;120", f["fix"]
print("ok: check --fleet --json: groups, nodes and the fix")
EOF
# The same fleet as a CSV for the policy: the build's targets cover every GPU of the fleet.
sms=75,80,86,87,88,89,90,100,103,110,120,121
"$tool" arch plan --policy=fleet:fleet.csv --fleet-base="$work" --nvcc-release=13.0 --nvcc-sass=$sms --nvcc-ptx=$sms > plan.txt 2>&1
expect "ARCH_POLICY=fleet: takes the merged CSV" plan.txt "mode=fleet"
expect "the plan builds SASS for every GPU of the fleet" plan.txt "sass=80;90;120"

stop_all
trap - EXIT
left=$(pgrep -f "$work" 2>/dev/null | wc -l)
[ "$left" = 0 ] && echo "ok: nothing left running" || { echo "FAIL: $left processes left"; fails=$((fails + 1)); }
[ $fails -eq 0 ] && echo "slurm_fleet: all passed" || { echo "slurm_fleet: $fails failed"; exit 1; }
