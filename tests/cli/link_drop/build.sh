#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the link_drop programs into DIR: app (-rdc, device-linked for sm_90, libold.a built for
# sm_80 only), gated (sm_80 + sm_90, one kernel left out of sm_80). Usage: build.sh NVCC SRC DIR
set -eu
nvcc=$1 src=$2 out=$3
"$nvcc" -rdc=true -c -gencode arch=compute_80,code=sm_80 "$src/old_lib.cu" -o "$out/old_lib.o" &
"$nvcc" -rdc=true -c -gencode arch=compute_90,code=sm_90 "$src/new_part.cu" -o "$out/new_part.o" &
"$nvcc" -rdc=true -c -gencode arch=compute_90,code=sm_90 "$src/main.cu" -o "$out/main.o"
wait
ar rcs "$out/libold.a" "$out/old_lib.o"
"$nvcc" -gencode arch=compute_90,code=sm_90 "$out/main.o" "$out/new_part.o" "$out/libold.a" -o "$out/app"
"$nvcc" -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 "$src/gated.cu" -o "$out/gated"
