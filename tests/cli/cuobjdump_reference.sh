#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `archguard inspect --list-like-cuobjdump` must print what `cuobjdump --list-elf` then
# `cuobjdump --list-ptx` print, line for line, for the nvcc fixtures and for every library of
# the CUDA toolkit; and the __nv_relfatbin images cuobjdump hides must be the ones
# `cuobjdump -all` shows (counted per architecture on libnccl.so.2). cuobjdump does not see
# fatbins embedded as data (cuFFT's .ldata, cuBLASLt's .cask_resource): for those, a sample
# of each library's embedded fatbins is cut out into fatbin files, which both must list alike.
# cuobjdump comes from the PyPI package scripts/setup.sh installs; skipped (77) without it.
# Usage: cuobjdump_reference.sh <archguard> <fixture dir>
set -uo pipefail
ag=$1 fx=$2
venv=${ARCHGUARD_VENV:-${ARCHGUARD_SOURCE_DIR:-.}/.venv}
cuobjdump=$(ls "$venv"/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump 2>/dev/null | head -1)
[[ -x $cuobjdump ]] || { echo "no cuobjdump under $venv: skipped"; exit 77; }
lib=${CUDA_LIB_DIR:-/usr/local/cuda/lib64}
files=()
[[ -f "$fx/stamp" ]] && files+=("$fx"/*.o "$fx"/*.so "$fx"/*.exe "$fx"/*.a "$fx"/*.cubin "$fx"/*.ptx "$fx"/*.ltoir "$fx"/*.fatbin)
for f in "$lib"/*.so* "$lib"/*.a; do [[ -L $f || ! -f $f ]] || files+=("$f"); done
[[ ${#files[@]} -gt 0 ]] || { echo "nothing to compare: skipped"; exit 77; }
fails=0 compared=0
start=$(date +%s%N)
for f in "${files[@]}"; do
  ref=$("$cuobjdump" --list-elf "$f" 2>/dev/null; "$cuobjdump" --list-ptx "$f" 2>/dev/null)
  ours=$("$ag" inspect --list-like-cuobjdump "$f" 2>/dev/null)
  # and what cuobjdump says on stderr ("No ELF file found to extract from ...", "does not contain
  # device code")
  ref_err=$("$cuobjdump" --list-elf "$f" 2>&1 >/dev/null; "$cuobjdump" --list-ptx "$f" 2>&1 >/dev/null)
  ours_err=$("$ag" inspect --list-like-cuobjdump "$f" 2>&1 >/dev/null)
  compared=$((compared + 1))
  if [[ "$ref" != "$ours" ]]; then
    echo "DIFF $f"; diff <(echo "$ref") <(echo "$ours") | head -10; fails=$((fails + 1))
  elif [[ "$ref_err" != "$ours_err" ]]; then
    echo "DIFF (stderr) $f"; diff <(echo "$ref_err") <(echo "$ours_err") | head -10; fails=$((fails + 1))
  else
    echo "same: $f ($(grep -c 'file ' <<<"$ours") entries)"
  fi
done
# The relocatable images: cuobjdump lists them only with -all (in its own order): compare the
# multiset of architectures per kind.
nccl="$lib/libnccl.so.2"
if [[ -f $nccl ]]; then
  arches() { sed -nE 's/^(ELF|PTX) file +[0-9]+: .*\.(sm_[0-9a-z]+)\.(cubin|ptx)$/\1 \2/p' | sort | uniq -c; }
  ref=$( ("$cuobjdump" -all --list-elf "$nccl"; "$cuobjdump" -all --list-ptx "$nccl") 2>/dev/null | arches)
  ours=$("$ag" inspect --list-like-cuobjdump --all-fatbins "$nccl" 2>/dev/null | arches)
  hidden=$(( $("$ag" inspect --list-like-cuobjdump --all-fatbins "$nccl" 2>/dev/null | grep -c 'file ') - $("$ag" inspect --list-like-cuobjdump "$nccl" 2>/dev/null | grep -c 'file ') ))
  if [[ "$ref" != "$ours" || $hidden -le 0 ]]; then
    echo "DIFF $nccl -all (hidden relfatbin images: $hidden)"; diff <(echo "$ref") <(echo "$ours") | head; fails=$((fails + 1))
  else
    echo "same: $nccl -all, $hidden __nv_relfatbin images that the default listing hides"
  fi
fi
# Embedded fatbins: up to 8 per library (first, last and evenly between), cut out by offset and size.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
embedded_libs=0
for f in "${files[@]}"; do
  "$ag" inspect "$f" 2>/dev/null | python3 -c '
import re, sys
path, out = sys.argv[1], sys.argv[2]
found = [(int(m.group(2), 16), int(m.group(3), 16), m.group(1)) for m in
         (re.match(r"  fatbin \d+  (\S+) \(embedded\) at 0x([0-9a-f]+), 0x([0-9a-f]+) bytes", l) for l in sys.stdin) if m]
if not found:
    sys.exit(0)
picks = sorted({round(i * (len(found) - 1) / 7) for i in range(8)}) if len(found) > 1 else [0]
with open(path, "rb") as src:
    for n, i in enumerate(picks):
        off, size, section = found[i]
        src.seek(off)
        with open("%s/emb%d%s.fatbin" % (out, n, section), "wb") as dst:
            dst.write(src.read(size))
print("%s: %d embedded fatbins, %d cut out" % (path, len(found), len(picks)), file=sys.stderr)
' "$f" "$tmp" || { echo "FAIL: cutting embedded fatbins out of $f"; fails=$((fails + 1)); }
  cut=("$tmp"/emb*.fatbin)
  [[ -f ${cut[0]} ]] || continue
  embedded_libs=$((embedded_libs + 1))
  before=$fails
  for e in "${cut[@]}"; do
    ref=$("$cuobjdump" --list-elf "$e" 2>/dev/null; "$cuobjdump" --list-ptx "$e" 2>/dev/null)
    ours=$("$ag" inspect --list-like-cuobjdump "$e" 2>/dev/null)
    compared=$((compared + 1))
    if [[ "$ref" != "$ours" ]]; then  # LTO-IR-only fatbins (cuFFT has many) list nothing in either
      echo "DIFF embedded fatbin $(basename "$e") of $f"; diff <(echo "$ref") <(echo "$ours") | head -10; fails=$((fails + 1))
    fi
  done
  [[ $fails == "$before" ]] && echo "same: embedded fatbins of $f (${#cut[@]} cut out)"
  rm -f "$tmp"/emb*.fatbin
done
# cuFFT keeps its kernels as data: cuobjdump sees one image, archguard must find the rest.
cufft=$(ls "$lib"/libcufft.so.* 2>/dev/null | head -1)
if [[ -n $cufft ]]; then
  n=$("$ag" inspect --summary "$cufft" 2>/dev/null | sed -nE 's/.* ([0-9]+) embedded .*/\1/p')
  if [[ ${n:-0} -lt 1000 ]]; then
    echo "FAIL: $cufft: ${n:-no} embedded fatbins found (cuFFT 12 keeps about 24,000 in .ldata)"; fails=$((fails + 1))
  else
    echo "same: $cufft holds $n embedded fatbins that cuobjdump does not list"
  fi
fi
end=$(date +%s%N)
echo "libraries with embedded fatbins: $embedded_libs"
echo "compared $compared files in $(( (end - start) / 1000000 )) ms; $fails differences"
[[ $fails == 0 ]]
