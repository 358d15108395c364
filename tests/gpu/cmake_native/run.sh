#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Usage: run.sh <project dir> <work dir> <module dir> <cmake>. Exit 77 when no GPU is usable.
set -uo pipefail
project=$1 work=$2 modules=$3 cmake=$4
smi=$(command -v nvidia-smi) || { echo "no nvidia-smi: skipped"; exit 77; }
caps=$("$smi" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null) || { echo "nvidia-smi failed: skipped"; exit 77; }
[ -n "$caps" ] || { echo "no GPU: skipped"; exit 77; }
want=$(echo "$caps" | sort -u | sed 's/\.//' | tr '\n' ' ' | sed 's/ $//')
cuobjdump=$(command -v cuobjdump || true)
[ -n "$cuobjdump" ] || cuobjdump=$(dirname "$(command -v nvcc)")/cuobjdump
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$cmake" -S "$project" -B "$work/b" -G Ninja -DCAG_MODULE_DIR="$modules" -DARCH_POLICY=native \
       -DCudaArchGuard_CUOBJDUMP="$cuobjdump" 2>&1) || { echo "$out"; fail "configure with ARCH_POLICY=native failed"; }
echo "$out" | grep -A12 'CudaArchGuard: ARCH_POLICY'
echo "$out" | grep -q "SASS: $want\$" || fail "expected 'SASS: $want' from nvidia-smi's '$caps'"
echo "$out" | grep -q "via nvidia-smi" || echo "$out" | grep -q "GPUs: .*(" || fail "the GPU was not named in the summary"
bout=$("$cmake" --build "$work/b" 2>&1) || { echo "$bout"; fail "build failed"; }
echo "$bout" | grep "CudaArchGuard: target 'app' holds" || fail "the verify step did not run"
"$work/b/app" || fail "the kernel did not run on this GPU"

out=$(CUDA_VISIBLE_DEVICES= "$cmake" -S "$project" -B "$work/hidden" -G Ninja -DCAG_MODULE_DIR="$modules" -DARCH_POLICY=native 2>&1) \
  && fail "CUDA_VISIBLE_DEVICES= with ARCH_POLICY=native must fail"
echo "$out" | tr '\n' ' ' | grep -q "no GPU is visible on this host" || { echo "$out"; fail "missing the no-GPU message"; }
echo "ok: native = $want, verified, ran; hidden GPUs give the no-GPU error"
