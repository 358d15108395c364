#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Which values of CUDA_FORCE_PTX_JIT does the driver treat as set? A probe built with SASS for
# this GPU and no PTX runs when the switch is off and fails with 209 when it is on (the driver
# ignores the SASS and finds no PTX). archguard's rule (docs/troubleshooting.md): on when set,
# not empty and not "0". The test fails when the driver turns the switch on for a value
# archguard reads as off (a diagnosis would miss it); the other way round (archguard reports a
# value the driver ignores) is the documented, conservative side and is only printed.
# Usage: driver_switches.sh NVCC PROBE_CU KERNELS_DIR WORK_DIR. Exits 77 without a GPU.
set -u
nvcc=$1 probe=$2 kernels=$3 work=$4
command -v nvidia-smi > /dev/null || { echo "skip: no nvidia-smi"; exit 77; }
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -n1 | tr -d ' .')
[[ $cc =~ ^[0-9]+$ ]] || { echo "skip: no GPU"; exit 77; }
mkdir -p "$work"
exe="$work/probe_sm$cc"
"$nvcc" -std=c++17 -O2 -I"$kernels" -gencode "arch=compute_$cc,code=sm_$cc" "$probe" -o "$exe" ||
  { echo "FAIL: nvcc could not build the probe for sm_$cc"; exit 1; }
# archguard's rule, written out here on purpose (the test holds the rule, not the code, against the driver).
archguard_on() { [[ -n $1 && $1 != 0 ]]; }
missed=0
printf '%-8s %-8s %-8s %s\n' value driver archguard probe
for v in 1 2 yes true on -1 0 00 '' ' '; do
  out=$(env CUDA_FORCE_PTX_JIT="$v" CUDA_CACHE_DISABLE=1 "$exe" 2>&1)
  rc=$?
  [[ $rc -eq 77 ]] && { echo "skip: $out"; exit 77; }
  if [[ $out == *"code=209"* ]]; then driver=on
  elif [[ $rc -eq 0 ]]; then driver=off
  else echo "FAIL: CUDA_FORCE_PTX_JIT='$v': unexpected probe result: $out"; exit 1; fi
  if archguard_on "$v"; then ours=on; else ours=off; fi
  printf '%-8s %-8s %-8s %s\n' "'$v'" "$driver" "$ours" "$out"
  [[ $driver == on && $ours == off ]] && missed=$((missed + 1))
done
if [[ $missed -gt 0 ]]; then
  echo "FAIL: the driver turns CUDA_FORCE_PTX_JIT on for $missed value(s) archguard reads as off"
  exit 1
fi
echo "ok: every value the driver treats as on, archguard reads as on"
