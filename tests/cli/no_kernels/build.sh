#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the shared libraries of no_kernels.sh: build.sh NVCC SOURCE_DIR OUT_DIR.
set -eu
nvcc=$1 src=$2 out=$3
both=(-gencode arch=compute_90,code=sm_90 -gencode arch=compute_100,code=sm_100)
new=(-gencode arch=compute_100,code=sm_100)
"$nvcc" -c -Xcompiler -fPIC "${both[@]}" "$src/both.cu" -o "$out/both.o" &
"$nvcc" -c -Xcompiler -fPIC "${new[@]}" "$src/again_new.cu" -o "$out/again_new.o" &
wait
"$nvcc" -c -Xcompiler -fPIC "${new[@]}" "$src/only_new.cu" -o "$out/only_new.o" &
"$nvcc" -c -Xcompiler -fPIC "${new[@]}" "$src/stub.cu" -o "$out/stub.o" &
wait
"$nvcc" -shared "$out/both.o" "$out/again_new.o" -o "$out/libsame.so"
"$nvcc" -shared "$out/both.o" "$out/only_new.o" -o "$out/libmissing.so"
"$nvcc" -shared "$out/stub.o" -o "$out/libstub.so"
"$nvcc" -shared "$out/both.o" -o "$out/liball.so"
