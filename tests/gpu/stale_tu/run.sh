#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds tests/cli/stale_tu (old_tu.cu for sm_80/86 only, the rest for sm_80/86/90), asks
# `archguard check --json --cc <this GPU>` for each kernel's verdict, launches each kernel and
# compares: predicted fail <=> the launch returns that error. Exit 77 without a GPU or nvcc.
set -u
ag=$1 src=$2
. "$(dirname "${BASH_SOURCE[0]}")/../../cli/lib.sh"
cli_nvcc
cli_gpu_cc
cli_tmp
G=(-gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 -gencode arch=compute_90,code=sm_90)
for f in good_a good_b main; do "$nvcc" -c "${G[@]}" "$src/$f.cu" -o "$tmp/$f.o" || exit 1; done
"$nvcc" -c -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 "$src/old_tu.cu" -o "$tmp/old_tu.o" || exit 1
"$nvcc" "${G[@]}" "$tmp"/{good_a,good_b,old_tu,main}.o -o "$tmp/app" || exit 1
"$tmp/app" > "$tmp/real"; rc=$?
[[ $rc -eq 77 ]] && { echo "skip: no usable device"; exit 77; }
"$ag" check --json --cc "$cc" "$tmp/app" > "$tmp/pred.json"
python3 "$(dirname "$0")/../compare_launches.py" "$tmp/pred.json" "$tmp/real" "$cc"
