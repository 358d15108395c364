#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The gencode dialect is what nvcc accepts: compile a kernel with the flags the policy engine
# prints for a list with plain, a and f targets, with the real nvcc. Skips (77) without nvcc.
set -eu
cmake=${1:?cmake}; modules=${2:?module dir}; nvcc=${3:-}
[ -x "$nvcc" ] || { echo "no nvcc"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
flags=$("$cmake" -DARCH_POLICY="80;90a;100f;120" -DFORMAT=gencode -DNVCC="$nvcc" -DQUIET=ON -P "$modules/CudaArchGuardPolicy.cmake")
echo "flags: $flags"
printf '__global__ void k(float* p) { p[threadIdx.x] += 1.0f; }\n' > "$tmp/k.cu"
# shellcheck disable=SC2086  # the flags are words
"$nvcc" -c $flags "$tmp/k.cu" -o "$tmp/k.o"
echo "nvcc accepted them"
