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
rm -rf "$out"/*.o "$out"/*.so "$out"/*.a "$out"/*.exe "$out"/*.cubin "$out"/*.ptx "$out"/*.ltoir "$out"/*.fatbin "$out/tu" "$out/stamp"
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
# 14-17 standalone device code: cubins (ELF ABI v8 e_flags; "a" only in .nv.compat), PTX, LTO-IR
run -cubin "$k" -o sm80.cubin -arch=sm_80
run -cubin "$k" -o sm90a.cubin -arch=sm_90a
run -ptx "$k" -o sm86.ptx -arch=sm_86
run -dlto --ltoir "$k" -o lto90.ltoir -arch=lto_90
# 18 a fatbin whose only image defines no kernel (a device function only)
printf '__device__ int fixture_helper(int x) { return x + 1; }\n' > nokernel.cu
run -fatbin nokernel.cu -o nokernel.fatbin -arch=sm_80
# 19 three translation units, one of them built for sm_80 only (a stale hard-coded -arch)
mkdir -p tu
for t in new_tu other_tu old_tu; do
  printf '__global__ void %s_kernel(int* p) { p[0] = 1; }\nvoid %s_launch(int* p) { %s_kernel<<<1, 1>>>(p); }\n' "$t" "$t" "$t" > "tu/$t.cu"
done
printf 'void new_tu_launch(int*); void other_tu_launch(int*); void old_tu_launch(int*);\n'\
'int main(int argc, char**) { if (argc > 5) { new_tu_launch(0); other_tu_launch(0); old_tu_launch(0); } return 0; }\n' > tu/main.cu
run -c tu/new_tu.cu -o tu/new_tu.o -gencode arch=compute_90,code=[sm_90,compute_90] -gencode arch=compute_80,code=sm_80
run -c tu/other_tu.cu -o tu/other_tu.o -gencode arch=compute_90,code=[sm_90,compute_90] -gencode arch=compute_80,code=sm_80
run -c tu/old_tu.cu -o tu/old_tu.o -gencode arch=compute_80,code=sm_80
run tu/new_tu.o tu/other_tu.o tu/old_tu.o tu/main.cu -o multi_tu.exe -arch=sm_80
cp multi_tu.exe multi_tu_stripped.exe && strip multi_tu_stripped.exe
# The same with 70,000 more local symbols (an assembler file of labels in .data): a symbol table
# of more than 65,536 entries is read on a thread of its own while the fatbins are parsed.
{
  echo '.file "many_symbols.s"'
  echo '.data'
  for ((i = 0; i < 70000; ++i)); do echo "archguard_local_$i: .byte 0"; done
} > tu/many_symbols.s
cc -c tu/many_symbols.s -o tu/many_symbols.o
run tu/new_tu.o tu/other_tu.o tu/old_tu.o tu/main.cu tu/many_symbols.o -o multi_tu_big_symtab.exe -arch=sm_80
# 20 fatbins kept as plain data, as cuFFT keeps ~24,000 in .ldata: one in .rodata, one in a
# custom section, and two near misses (the magic followed by a header that does not hold up)
run -fatbin "$k" -o embed.fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
{
  echo '/* generated from embed.fatbin by make_fixtures.sh */'
  echo '__attribute__((aligned(8), used)) const unsigned char embedded_rodata[] = {'
  od -An -v -tx1 embed.fatbin | sed -E 's/ ([0-9a-f]{2})/0x\1,/g'
  echo '};'
  echo '__attribute__((aligned(8), used, section(".fixture_fatbins"))) const unsigned char embedded_custom[] = {'
  od -An -v -tx1 embed.fatbin | sed -E 's/ ([0-9a-f]{2})/0x\1,/g'
  echo '};'
  echo '/* magic, version 1, header 16, size claiming far past the section */'
  echo '__attribute__((aligned(8), used)) const unsigned char near_miss_size[] = {0x50,0xed,0x55,0xba,1,0,16,0,0xff,0xff,0,0,0,0,0,0};'
  echo '/* magic and a valid header, then an entry of unknown kind 0x33 */'
  echo '__attribute__((aligned(8), used)) const unsigned char near_miss_entry[] = {0x50,0xed,0x55,0xba,1,0,16,0,0x48,0,0,0,0,0,0,0,'
  echo '  0x33,0,1,1,0x40,0,0,0,8,0,0,0,0,0,0,0, 0,0,0,0,0,0,0,0,0,0,0,0,80,0,0,0, 0,0,0,0,0,0,0,0,0x11,0,0,0,0,0,0,0,'
  echo '  0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0, 1,2,3,4,5,6,7,8};'
  echo 'const unsigned char* fixture_embedded(int i) { return i == 0 ? embedded_rodata : i == 1 ? embedded_custom : i == 2 ? near_miss_size : near_miss_entry; }'
} > embed.c
run -shared -Xcompiler -fPIC embed.c -o libembedded.so
echo "$digest" > stamp
