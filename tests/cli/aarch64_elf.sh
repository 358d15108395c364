#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The reader on aarch64 ELF files: the .nv_fatbin section of an nvcc-built x86-64 object is
# carried into an aarch64 (EM_AARCH64) relocatable object and a shared object made by GNU
# binutils for aarch64; archguard must list exactly the same images from both.
# Usage: aarch64_elf.sh <archguard> <fixture dir>
set -uo pipefail
ag=$1 fx=$2
[[ -f "$fx/stamp" ]] || { echo "no nvcc fixtures: skipped"; exit 77; }
objcopy_arm=$(command -v aarch64-linux-gnu-objcopy) || { echo "aarch64-linux-gnu-objcopy not installed: skipped"; exit 77; }
ld_arm=$(command -v aarch64-linux-gnu-ld) || { echo "aarch64-linux-gnu-ld not installed: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

objcopy -O binary --only-section=.nv_fatbin "$fx/plain.o" "$tmp/nv_fatbin.bin" || exit 1
[[ -s "$tmp/nv_fatbin.bin" ]] || { echo "FAIL: plain.o has no .nv_fatbin section"; exit 1; }
(cd "$tmp" && "$objcopy_arm" -I binary -O elf64-littleaarch64 -B aarch64 \
   --rename-section .data=.nv_fatbin,alloc,load,readonly,data,contents nv_fatbin.bin arm64.o) || exit 1
"$ld_arm" -shared -o "$tmp/libarm64.so" "$tmp/arm64.o" || exit 1
file_type=$(od -An -tx2 -j18 -N2 "$tmp/arm64.o" | tr -d ' ')
[[ $file_type == 00b7 ]] || { echo "FAIL: e_machine 0x$file_type is not EM_AARCH64 (0xb7)"; exit 1; }

# Image lists without the file-name column: kind, arch and sizes must agree.
listing() { "$ag" inspect --json "$1" | python3 -c '
import json, sys
doc = json.load(sys.stdin)
rows = []
def walk(o):
    if isinstance(o, dict):
        if "kind" in o and "arch" in o:
            rows.append((o["kind"], o["arch"], o.get("stored_size"), o.get("uncompressed_size")))
        for v in o.values(): walk(v)
    elif isinstance(o, list):
        for v in o: walk(v)
walk(doc)
for r in sorted(map(str, rows)): print(r)
print(len(rows), "images")'; }

listing "$fx/plain.o" > "$tmp/x86.txt" || { echo "FAIL: inspect plain.o"; exit 1; }
for f in arm64.o libarm64.so; do
  if ! listing "$tmp/$f" > "$tmp/$f.txt"; then
    echo "FAIL: inspect $f"; "$ag" inspect "$tmp/$f"; fails=$((fails + 1)); continue
  fi
  if diff -u "$tmp/x86.txt" "$tmp/$f.txt"; then
    echo "ok: $f lists the same $(tail -1 "$tmp/x86.txt")"
  else
    echo "FAIL: $f lists other images than the x86-64 object"; fails=$((fails + 1))
  fi
done
grep -q '^0 images' "$tmp/x86.txt" && { echo "FAIL: the fixture lists no images"; fails=$((fails + 1)); }
exit $((fails > 0))
