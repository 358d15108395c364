#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One toolkit of the matrix:
#   matrix.sh <archguard> <nvcc> <work dir> <list policy> [native:<gpus dir>|-] [ptx-driver:<driver>|-]
# For ARCH_POLICY all-major, all and <list policy>: configure and build tests/toolkits/project
# (one kernel file of kernels/) with that nvcc; the module's verify step (archguard verify)
# must pass; `archguard inspect` must read the executable; its PTX ISA must be the table's for
# this nvcc's release. With native:<dir>, also a build for the fake nvidia-smi in <dir> whose
# GPU this nvcc does not know: the policy clamps to its highest PTX with a warning, and
# `archguard check` of the build predicts the JIT on that GPU. With ptx-driver:<driver>, a
# PTX-only build checked on CC 9.0 with that driver must be predicted to fail with 222 (the
# driver predates the release's PTX ISA). A toolkit that still lists architectures CUDA 13
# removed (sm_35-sm_72) also builds `all` with ARCH_MIN=7.5, which must drop them.
# Exits 77 (skip) when the toolkit is not installed (scripts/setup-toolkits.sh installs it).
set -euo pipefail
archguard=$(realpath "$1") nvcc=$(realpath -s "$2") work=$3 list=$4 native=${5:--} ptxdriver=${6:--}
[ "$native" != - ] || native=""
[ "$ptxdriver" != - ] || ptxdriver=""
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
table="$root/cmake/Modules/CudaArchGuard/architectures.txt"
[ -x "$nvcc" ] || { echo "matrix: $nvcc is not installed; run scripts/setup-toolkits.sh"; exit 77; }
fail() { echo "matrix: FAILED: $*" >&2; exit 1; }

release="$("$nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
isa="$(awk -F'|' -v r="$release" '$1=="release" && $2==r {print $3}' "$table")"
[ -n "$isa" ] || fail "architectures.txt has no 'release|$release|...' row for $nvcc"
opts=(-DCMAKE_CUDA_COMPILER="$nvcc" -DCudaArchGuard_EXECUTABLE="$archguard"
      -DCAG_MODULE_DIR="$root/cmake/Modules" -DCAG_KERNELS_DIR="$root/kernels" -DCMAKE_BUILD_TYPE=Release)
if [ "${release%%.*}" -lt 12 ]; then
  # CUDA 11.8 rejects gcc > 11; clang 14 is a host compiler it supports. Its cudart comes as a
  # shared library only (see scripts/setup-toolkits.sh).
  opts+=(-DCMAKE_CUDA_HOST_COMPILER=clang++-14 "-DCMAKE_CUDA_FLAGS=-cudart=shared" -DCMAKE_CUDA_RUNTIME_LIBRARY=Shared)
fi
echo "matrix: nvcc $release ($nvcc): table PTX ISA $isa"

build_one() {  # build_one <name> <policy> [extra cmake args]: configure, build, inspect
  local name=$1 policy=$2; shift 2
  local b="$work/$name"
  rm -rf "$b"; mkdir -p "$work"
  local t0=$(date +%s)
  cmake -S "$here/project" -B "$b" "${opts[@]}" "-DARCH_POLICY=$policy" "$@" > "$b.configure.log" 2>&1 ||
    { cat "$b.configure.log"; fail "$name: configure"; }
  grep -A6 "CudaArchGuard: ARCH_POLICY" "$b.configure.log" | grep -v "toolkit:\|GPUs: none" | sed "s/^/  /"
  cmake --build "$b" > "$b.build.log" 2>&1 || { cat "$b.build.log"; fail "$name: build (or its verify step)"; }
  grep -q "verifying app\|archguard verify\|verify: ok" "$b.build.log" || { cat "$b.build.log"; fail "$name: no verify step ran"; }
  "$archguard" inspect "$b/app" > "$b.inspect.log" 2>&1 || { cat "$b.inspect.log"; fail "$name: archguard inspect"; }
  "$archguard" inspect --json "$b/app" > "$b.inspect.json" 2>/dev/null || fail "$name: archguard inspect --json"
  local isas
  isas="$(grep -o '"ptx_isa": *"[0-9.]*"' "$b.inspect.json" | grep -o '[0-9]*\.[0-9]*' | sort -u | tr '\n' ' ')"
  [ -n "$isas" ] || { cat "$b.inspect.log"; fail "$name: no PTX image found by archguard inspect"; }
  [ "$isas" = "$isa " ] || fail "$name: the binary's PTX ISA is '$isas', the table says $isa for CUDA $release"
  echo "matrix: $name ok ($(( $(date +%s) - t0 )) s): PTX ISA $isa; $(grep -c . "$b.inspect.log") lines of inspect"
}

build_one all-major all-major
build_one all all
build_one list "$list"
if [ -n "$native" ]; then
  smi="${native#native:}/nvidia-smi"
  build_one native native "-DCudaArchGuard_NVIDIA_SMI=$smi"
  tr '\n' ' ' < "$work/native.configure.log" | tr -s ' ' | grep -q "is newer than CUDA $release supports" ||
    fail "native: no warning that a GPU is newer than CUDA $release"
  # The first GPU nvcc does not know: the highest CC nvidia-smi reports.
  cc="$("$smi" --query-gpu=index,uuid,name,compute_cap --format=csv,noheader | awk -F', ' '{print $4}' | sort -V | tail -1)"
  out="$("$archguard" check "$work/native/app" --cc "$cc" 2>&1)" || true
  echo "$out" | sed 's/^/  /'
  grep -qi "jit" <<< "$out" || fail "native: archguard check --cc $cc does not predict the JIT"
fi
if [ -n "$ptxdriver" ]; then
  driver="${ptxdriver#ptx-driver:}"
  lowest="$("$nvcc" --list-gpu-arch | sed -n 's/^compute_\([0-9]*\)$/\1/p' | sort -n | head -1)"
  # Straight nvcc: the module's verify step cannot require PTX only (reported separately).
  "$nvcc" -gencode "arch=compute_$lowest,code=compute_$lowest" -I"$root/kernels" "$here/project/app.cu" \
    -o "$work/ptx-only.app" || fail "ptx-only: nvcc"
  "$archguard" inspect "$work/ptx-only.app" | grep -q "compute_$lowest .*$isa" || fail "ptx-only: no compute_$lowest with PTX ISA $isa"
  out="$("$archguard" check "$work/ptx-only.app" --cc 9.0 --driver "$driver" 2>&1)" && fail "ptx-only: check passed with driver $driver"
  echo "$out" | sed 's/^/  /'
  grep -q "222" <<< "$out" || fail "ptx-only: archguard check --driver $driver does not predict 222 for PTX ISA $isa"
fi
if "$nvcc" --list-gpu-code | grep -qx "sm_35\|sm_50"; then
  build_one all-min75 all -DARCH_MIN=7.5
  sass="$(grep -m1 "SASS:" "$work/all-min75.configure.log")"
  grep -qE " (3|5|6)[0-9] | 7[02] " <<< "$sass" && fail "all-min75: ARCH_MIN=7.5 kept an older architecture: $sass"
  grep -qE "sm_(3|5|6)[0-9]|sm_7[02]" "$work/all-min75.inspect.log" && fail "all-min75: the binary still holds SASS below 7.5"
fi
echo "matrix: nvcc $release passed"
