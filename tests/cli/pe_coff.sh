#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Windows binaries (issue 26): a PE DLL and EXE whose .nv_fatb holds an nvcc fatbin (sm_80 +
# compute_80), named directly, inside a wheel and in a directory: inspect lists them (and the
# cuobjdump-style listing), check judges them like the ELF library they stand for, a truncated
# one is an error naming the section and the offset. Usage: pe_coff.sh ARCHGUARD SRC_DIR.
# Skips (77) without nvcc.
set -u
ag=$1 src=$2
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x $nvcc ]] || { echo "skip: no nvcc"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '__global__ void win_kernel(float* x) { x[threadIdx.x] *= 2.0f; }\n' > "$tmp/k.cu"
"$nvcc" -fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_80,code=compute_80 "$tmp/k.cu" -o "$tmp/k.fatbin" ||
  { echo "FAIL: nvcc"; exit 1; }
python3 "$src/make_pe.py" "$tmp/k.fatbin" "$tmp/kern.dll"
python3 "$src/make_pe.py" "$tmp/k.fatbin" "$tmp/app.exe" --exe
python3 "$src/make_pe.py" "$tmp/k.fatbin" "$tmp/bad.dll" --truncate
mkdir -p "$tmp/pkg/win" && cp "$tmp/kern.dll" "$tmp/pkg/win/kern.pyd"
(cd "$tmp/pkg" && python3 -c "import zipfile; z=zipfile.ZipFile('../w-1.0-py3-none-win_amd64.whl','w'); z.write('win/kern.pyd'); z.close()")
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
"$ag" inspect "$tmp/kern.dll" > "$tmp/i" 2>&1 || fail "inspect kern.dll exits non-zero"
grep -q 'kern.dll  (windows dll, x86-64)' "$tmp/i" || fail "inspect: not read as a windows dll"
grep -q 'fatbin 0  .nv_fatb at 0x400' "$tmp/i" && grep -q 'sass   sm_80' "$tmp/i" && grep -q 'ptx    compute_80' "$tmp/i" || fail "inspect: the images"
"$ag" inspect "$tmp/app.exe" | grep -q '(windows executable, x86-64)' || fail "inspect: app.exe"
"$ag" inspect --list-like-cuobjdump "$tmp/kern.dll" > "$tmp/l" 2>&1
grep -qx 'ELF file    1: kern.1.sm_80.cubin' "$tmp/l" && grep -qx 'PTX file    1: kern.1.sm_80.ptx' "$tmp/l" || fail "cuobjdump-style listing"
"$ag" check --cc 9.0 "$tmp/kern.dll" > "$tmp/c90" 2>&1 || fail "check --cc 9.0 exits non-zero"
grep -q 'runs after a JIT of compute_80' "$tmp/c90" || fail "check --cc 9.0: not a JIT"
"$ag" check --cc 7.5 "$tmp/kern.dll" > "$tmp/c75" 2>&1; [[ $? -eq 1 ]] || fail "check --cc 7.5 does not exit 1"
grep -q 'fails with 209' "$tmp/c75" || fail "check --cc 7.5: no 209"
"$ag" check --json --cc 8.0 "$tmp/kern.dll" | python3 -c "
import json, sys; o = json.load(sys.stdin)['devices'][0]['objects'][0]
assert o['kind'] == 'shared-library' and o['tier'] == 'all-run', o" || fail "check --json: kind and tier"
"$ag" inspect --summary "$tmp/w-1.0-py3-none-win_amd64.whl" 2>&1 | grep -q 'win/kern.pyd  (windows dll' || fail "a .pyd in a wheel is skipped"
"$ag" check --cc 7.5 "$tmp/pkg" > "$tmp/dir" 2>&1; [[ $? -eq 1 ]] || fail "check of a directory with a .pyd does not fail on 7.5"
grep -q 'kern.pyd: fails with 209' "$tmp/dir" || fail "directory: the .pyd is not judged"
"$ag" inspect "$tmp/bad.dll" > "$tmp/bad" 2>&1; [[ $? -eq 2 ]] || fail "a truncated dll does not exit 2"
grep -q 'bad.dll: pe section .nv_fatb at 0x' "$tmp/bad" && grep -q 'runs past the end of the file' "$tmp/bad" || fail "truncated: the error"
for f in i l c90 c75 dir bad; do echo "--- $f"; head -8 "$tmp/$f"; done | cut -c1-200
echo "$fails failure(s)"
[[ $fails -eq 0 ]]
