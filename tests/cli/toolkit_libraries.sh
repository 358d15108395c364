#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Acceptance (issue 9): `archguard check F --cc X` on every shared library of the CUDA toolkit
# that carries device code predicts no failure on the GPUs NVIDIA supports with it. NVIDIA's
# libraries pick kernels per GPU, so many of their kernels have no image for a given GPU; the
# judgement must read them as "built for other GPUs", never as a failure. One invocation per
# compute capability over all files (about 2 s each on 2 cores).
# Usage: toolkit_libraries.sh ARCHGUARD [CUDA_ROOT]. Skips (77) without a toolkit.
set -u
ag=$1
root=${2:-${CUDA_HOME:-/usr/local/cuda}}
[[ -d $root ]] || { echo "skip: no CUDA toolkit at $root"; exit 77; }
# Each file once (the toolkit links lib64, lib and targets/*/lib to one another).
mapfile -t files < <(find -L "$root/" -name '*.so*' -type f 2>/dev/null | xargs -r realpath | sort -u)
[[ ${#files[@]} -gt 0 ]] || { echo "skip: no shared libraries under $root"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
with_code=0
for cc in 7.5 8.0 8.6 8.9 9.0 10.0 12.0; do
  "$ag" check --cc "$cc" "${files[@]}" > "$tmp/out" 2> "$tmp/err"
  rc=$?
  # The verdict lines (not indented); inputs without device code say so.
  grep -v '^ \|^details:$' "$tmp/out" | grep -v ': no device code' > "$tmp/verdicts"
  n=$(wc -l < "$tmp/verdicts")
  [[ $cc == 9.0 ]] && with_code=$n
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: check --cc $cc exits $rc on the toolkit's libraries:"
    grep -E 'fails with|some kernels have no image' "$tmp/out" | cut -c1-400
    cat "$tmp/err"
    fails=$((fails + 1))
  else
    echo "ok: --cc $cc: $n libraries with device code, no failure predicted"
  fi
done
# Doctor step 3 on the same libraries for the same GPUs (one run, every --cc): no FAIL, no
# rebuild advice for NVIDIA's libraries. No driver is needed (exit 3 says there is none).
ccs=()
for cc in 7.5 8.0 8.6 8.9 9.0 10.0 12.0; do ccs+=(--cc "$cc"); done
ARCHGUARD_LIBCUDA=/nonexistent/libcuda.so.1 "$ag" doctor --no-smoke "${ccs[@]}" "${files[@]}" > "$tmp/doctor" 2>&1
sed -n '/^\[3\]/,/^\[4\]/p' "$tmp/doctor" > "$tmp/step3"
n=$(grep -c 'for cc .* (--cc)' "$tmp/step3")
if [[ $n -lt 7 ]]; then
  echo "FAIL: doctor step 3 judged $n (library, cc) pairs"; head -5 "$tmp/step3"; fails=$((fails + 1))
elif grep -qE '^ *FAIL|fix: rebuild' "$tmp/step3"; then
  echo "FAIL: doctor step 3 fails or advises a rebuild for NVIDIA's libraries:"
  grep -E '^ *FAIL|fix: rebuild' -B1 "$tmp/step3" | cut -c1-400
  fails=$((fails + 1))
else
  echo "ok: doctor step 3: $n (library, cc) verdicts, no FAIL, no rebuild advice"
fi
# The judgement must have looked at kernels: cuBLASLt carries kernels for other GPUs on every
# one of these GPUs, and says so rather than staying silent.
if [[ -f $root/lib64/libcublasLt.so.13 ]] || ls "$root"/lib64/libcublasLt.so.* > /dev/null 2>&1; then
  lt=$(ls "$root"/lib64/libcublasLt.so.* | head -1)
  "$ag" check --cc 9.0 "$lt" > "$tmp/lt"
  if grep -qE 'of [0-9]+ kernels are built for other GPUs only' "$tmp/lt"; then
    echo "ok: libcublasLt: $(grep -oE '[0-9]+ of [0-9]+ kernels are built for other GPUs only' "$tmp/lt")"
  else
    echo "FAIL: libcublasLt at 9.0: no per-kernel reading"; head -3 "$tmp/lt"; fails=$((fails + 1))
  fi
fi
[[ $with_code -gt 0 ]] || { echo "FAIL: no toolkit library with device code found under $root"; fails=$((fails + 1)); }
echo "$fails failure(s)"
[[ $fails -eq 0 ]]
