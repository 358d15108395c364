#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `archguard inspect --list-like-cuobjdump` must print what `cuobjdump --list-elf` then
# `cuobjdump --list-ptx` print, line for line, for the nvcc fixtures and for every library of
# the CUDA toolkit; and the __nv_relfatbin images cuobjdump hides must be the ones
# `cuobjdump -all` shows (counted per architecture on libnccl.so.2).
# cuobjdump comes from the PyPI package scripts/setup.sh installs; skipped (77) without it.
# Usage: cuobjdump_reference.sh <archguard> <fixture dir>
set -uo pipefail
ag=$1 fx=$2
venv=${ARCHGUARD_VENV:-${ARCHGUARD_SOURCE_DIR:-.}/.venv}
cuobjdump=$(ls "$venv"/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump 2>/dev/null | head -1)
[[ -x $cuobjdump ]] || { echo "no cuobjdump under $venv: skipped"; exit 77; }
lib=${CUDA_LIB_DIR:-/usr/local/cuda/lib64}
files=()
[[ -f "$fx/stamp" ]] && files+=("$fx"/*.o "$fx"/*.so "$fx"/*.exe "$fx"/*.a)
for f in "$lib"/*.so* "$lib"/*.a; do [[ -L $f || ! -f $f ]] || files+=("$f"); done
[[ ${#files[@]} -gt 0 ]] || { echo "nothing to compare: skipped"; exit 77; }
fails=0 compared=0
start=$(date +%s%N)
for f in "${files[@]}"; do
  ref=$("$cuobjdump" --list-elf "$f" 2>/dev/null; "$cuobjdump" --list-ptx "$f" 2>/dev/null)
  ours=$("$ag" inspect --list-like-cuobjdump "$f" 2>/dev/null)
  compared=$((compared + 1))
  if [[ "$ref" != "$ours" ]]; then
    echo "DIFF $f"; diff <(echo "$ref") <(echo "$ours") | head -10; fails=$((fails + 1))
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
end=$(date +%s%N)
echo "compared $compared files in $(( (end - start) / 1000000 )) ms; $fails differences"
[[ $fails == 0 ]]
