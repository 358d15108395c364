#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds tests/cli/link_drop's programs for this GPU: app (-rdc, device-linked for this GPU's
# architecture, with an -rdc member built for an older one only) and gated (this architecture
# and the next, the kernel left out of this one's image), asks `archguard check --json --cc
# <this GPU>` for each kernel's verdict, launches each kernel and compares the error numbers.
# Exit 77 without a GPU or nvcc.
set -u
ag=$1 src=$2
. "$(dirname "${BASH_SOURCE[0]}")/../../cli/lib.sh"
cli_nvcc
cli_gpu_cc
sm=${cc/./}
old=80; [[ $sm -le 80 ]] && old=75
next=$((sm + 10)); [[ $sm -eq 90 ]] && next=100
cli_tmp
"$nvcc" -rdc=true -c -gencode arch=compute_$old,code=sm_$old "$src/old_lib.cu" -o "$tmp/old_lib.o" || exit 1
"$nvcc" -rdc=true -c -gencode arch=compute_$sm,code=sm_$sm "$src/new_part.cu" -o "$tmp/new_part.o" || exit 1
"$nvcc" -rdc=true -c -gencode arch=compute_$sm,code=sm_$sm "$src/main.cu" -o "$tmp/main.o" || exit 1
ar rcs "$tmp/libold.a" "$tmp/old_lib.o"
"$nvcc" -gencode arch=compute_$sm,code=sm_$sm "$tmp/main.o" "$tmp/new_part.o" "$tmp/libold.a" -o "$tmp/app" || exit 1
"$nvcc" -DGATE=$((next * 10)) -gencode arch=compute_$sm,code=sm_$sm -gencode arch=compute_$next,code=sm_$next \
  "$src/gated.cu" -o "$tmp/gated" || exit 1
bad=0
for prog in app gated; do
  "$tmp/$prog" > "$tmp/$prog.real"; rc=$?
  [[ $rc -eq 77 ]] && { echo "skip: no usable device"; exit 77; }
  "$ag" check --json --cc "$cc" "$tmp/$prog" > "$tmp/$prog.json"
  python3 "$(dirname "$0")/../compare_launches.py" "$tmp/$prog.json" "$tmp/$prog.real" "$cc" "$prog" || bad=1
done
exit $bad
