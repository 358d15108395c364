#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the fatbin reader's test fixtures with nvcc: tiny kernels with known architecture sets.
# Usage: make_fixtures.sh <nvcc> <output dir>
# Exit 77 (skipped) when nvcc is missing. Outputs are reused while this script, the sources and
# the nvcc version are unchanged (a stamp holds their digest): nvcc is slow on small machines.
set -euo pipefail
nvcc=${1:?nvcc}
out=${2:?output dir}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "make_fixtures: no nvcc ($nvcc): skipped" >&2
  exit 77
fi
mkdir -p "$out"
digest=$( (cat "$0" "$here/fixture_kernels.cu" "$here/fixture_main.cu"; "$nvcc" --version) | sha256sum | cut -c1-16)
if [[ -f "$out/stamp" && $(cat "$out/stamp") == "$digest" ]]; then
  exit 0
fi
rm -f "$out"/*.o "$out"/*.so "$out"/*.a "$out"/*.exe "$out/stamp"
k="$here/fixture_kernels.cu"
cd "$out"
run() { echo "+ nvcc $*" >&2; "$nvcc" "$@"; }
# 1 plain: two SASS, one PTX
run -c "$k" -o plain.o -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
# 2 arch- and family-specific in one object
run -c "$k" -o specific.o -gencode arch=compute_90a,code=[sm_90a,compute_90a] \
    -gencode arch=compute_100f,code=[sm_100f,compute_100f] -gencode arch=compute_120a,code=sm_120a
# 3 PTX only
run -c "$k" -o ptxonly.o -gencode arch=compute_75,code=compute_75
# 4 -G
run -c "$k" -o debug.o -G -gencode arch=compute_80,code=sm_80
# 5-9 every --compress-mode
for mode in default size speed balance none; do
  run -c "$k" -o "compress-$mode.o" --compress-mode=$mode -gencode arch=compute_80,code=[sm_80,compute_80]
done
# 10 -rdc object with LTO-IR and SASS
run -c "$k" -o lto.o -rdc=true -gencode arch=compute_80,code=lto_80 -gencode arch=compute_90,code=sm_90
# 11 -rdc object, 12 -rdc executable (device link + relocatable fatbins kept)
run -c "$k" -o rdc.o -rdc=true -gencode arch=compute_80,code=[sm_80,compute_80]
run -rdc=true -gencode arch=compute_80,code=sm_80 rdc.o "$here/fixture_main.cu" -o rdc.exe
# 13 shared library (non-rdc: device-link fatbin first)
run -shared -Xcompiler -fPIC plain.o -o libplain.so
# static library: plain + PTX-only members (ar, no nvcc needed)
ar rcs libfixture.a plain.o ptxonly.o
echo "$digest" > stamp
