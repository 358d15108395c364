#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Embedded fatbins and standalone device-code files on a real GPU: for each case, build it with
# nvcc, let `archguard check --cc <the GPU's capability>` predict the load, then load and launch
# it with the driver API (loader.cu) and compare. Exit 0 when every prediction held, 1 when one
# did not, 77 without a GPU.
# Usage: embedded_gpu.sh <archguard> <nvcc> <kernel source> <work dir>
set -uo pipefail
ag=$1 nvcc=$2 src=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
[[ -n $cc ]] || { echo "no GPU: skipped"; exit 77; }
cudalib=$(dirname "$nvcc")/../lib64
mkdir -p "$work" && cd "$work" || exit 1
fails=0
# loader <name> <blob fatbin>: the loader with that fatbin compiled in as data
loader() {
  od -An -v -tx1 "$2" | sed -E 's/ ([0-9a-f]{2})/0x\1,/g' > blob.inc
  "$nvcc" -O2 -I. "$here/loader.cu" -o "$1" -L"$cudalib/stubs" -lcuda || return 1
}
# compare <case> <file to predict> <loader> [file to load]
compare() {
  local name=$1 predicted=$2 prog=$3 load=${4:-}
  local verdict outcome result
  verdict=$("$ag" check --cc "$cc" --json "$predicted" 2>/dev/null)
  outcome=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); o=[x for x in d["devices"][0]["objects"] if x.get("device_code")][0]; print(o["outcome"], o["cuda_error"])' "$verdict" 2>/dev/null)
  result=$("./$prog" $load | sed -nE 's/^result (-?[0-9]+).*/\1/p')
  # native/jit <-> the launch ran (0); fail <-> the load or launch failed
  local ok=0
  case "$outcome" in
    native*|jit*) [[ $result == 0 ]] && ok=1 ;;
    fail*) [[ -n $result && $result != 0 ]] && ok=1 ;;
  esac
  if [[ $ok == 1 ]]; then
    echo "held: $name on CC $cc: predicted '$outcome', launch result $result"
  else
    echo "MISMATCH: $name on CC $cc: predicted '${outcome:-nothing}', launch result ${result:-none}"; fails=$((fails + 1))
  fi
}
# Embedded fatbins: the program holds the fatbin as data; archguard must find it there, and its
# bytes must be those of the fatbin nvcc wrote. The prediction is made on the fatbin found.
for c in "sm90|-gencode arch=compute_90,code=sm_90" "sm80|-gencode arch=compute_80,code=sm_80" \
         "ptx80|-gencode arch=compute_80,code=compute_80" "sm100|-gencode arch=compute_100,code=sm_100"; do
  name=${c%%|*} flags=${c#*|}
  # shellcheck disable=SC2086
  "$nvcc" -fatbin $flags "$src" -o "emb_$name.fatbin" || { echo "FAIL: nvcc $name"; fails=$((fails + 1)); continue; }
  loader "load_$name" "emb_$name.fatbin" || { echo "FAIL: building the loader for $name"; fails=$((fails + 1)); continue; }
  python3 - "$ag" "load_$name" "emb_$name.fatbin" "found_$name.fatbin" <<'PY' || { echo "FAIL: embedded fatbin of load_$name not found"; fails=$((fails + 1)); continue; }
import json, subprocess, sys
ag, exe, original, out = sys.argv[1:]
doc = json.loads(subprocess.run([ag, "inspect", "--json", exe], capture_output=True, text=True).stdout)
fbs = [f for f in doc["inputs"][0]["objects"][0]["fatbins"] if f["section"] == "embedded"]
assert len(fbs) == 1 and fbs[0]["section_name"] == ".rodata", fbs
data = open(exe, "rb").read()[fbs[0]["offset"]:fbs[0]["offset"] + fbs[0]["size"]]
assert data == open(original, "rb").read()[:len(data)], "the embedded fatbin found differs from nvcc's"
open(out, "wb").write(data)
PY
  compare "embedded $name" "found_$name.fatbin" "load_$name"
done
# Standalone files, loaded from disk by the same program.
"$nvcc" -cubin -arch=sm_90 "$src" -o sm90.cubin && compare "standalone sm_90 cubin" sm90.cubin load_sm90 sm90.cubin
"$nvcc" -cubin -arch=sm_90a "$src" -o sm90a.cubin && compare "standalone sm_90a cubin" sm90a.cubin load_sm90 sm90a.cubin
"$nvcc" -cubin -arch=sm_80 "$src" -o sm80.cubin && compare "standalone sm_80 cubin" sm80.cubin load_sm90 sm80.cubin
"$nvcc" -ptx -arch=sm_80 "$src" -o sm80.ptx && compare "standalone compute_80 ptx" sm80.ptx load_sm90 sm80.ptx
"$nvcc" -ptx -arch=sm_100 "$src" -o sm100.ptx && compare "standalone compute_100 ptx" sm100.ptx load_sm90 sm100.ptx
echo "$fails mismatches"
[[ $fails == 0 ]]
