#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# archguard doctor on a Jetson, as far as it can be tested without one: a stand-in libcuda that
# reports one integrated CC 8.7 device (Orin), no nvidia-smi and no NVML on PATH. Doctor must read
# the GPU from the driver, mark it integrated (Tegra), treat the missing nvidia-smi as a skipped
# cross-check, and judge an RTX 30xx build (sm_86) as 209 on the board, with the Tegra reason and
# the fix; the board's own build (sm_87) passes.
#   doctor_tegra.sh <archguard> <fake libcuda> <nvcc> <workdir>
set -euo pipefail
archguard="$1"; fake="$2"; nvcc="$3"; work="$4"
rm -rf "$work"; mkdir -p "$work/bin"
printf '__global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }\n' > "$work/k.cu"
"$nvcc" -c -gencode arch=compute_86,code=sm_86 "$work/k.cu" -o "$work/rtx30.o"
"$nvcc" -c -gencode arch=compute_87,code=sm_87 "$work/k.cu" -o "$work/orin.o"

run() {  # a PATH with no nvidia-smi, the fake driver, no NVML
  env -i PATH="$work/bin:/usr/bin:/bin" HOME="$work" ARCHGUARD_LIBCUDA="$fake" ARCHGUARD_LIBNVML="$work/none.so" \
    FAKE_CUDA_CC=8.7 FAKE_CUDA_INTEGRATED=1 "$archguard" doctor --no-smoke "$@"
}
fail() { echo "doctor_tegra: $*"; echo "--- output:"; echo "$out"; exit 1; }

set +e
out="$(run "$work/rtx30.o" 2>&1)"; rc=$?
set -e
[ "$rc" = 1 ] || fail "doctor on the sm_86 object exited $rc, expected 1 (a step failed)"
grep -q "compute capability 8.7" <<<"$out" || fail "step 1 did not read CC 8.7 from the driver"
grep -q "integrated (tegra: no sass minor-version compatibility)" <<<"$out" || fail "step 1 did not mark the GPU integrated"
# (Where the machine has NVML, as on a GPU host, NVML answers for its own GPU instead.)
if ! /sbin/ldconfig -p 2>/dev/null | grep -q "libnvidia-ml.so.1"; then
  grep -qi "neither nvidia-smi nor NVML answered" <<<"$out" || fail "the missing nvidia-smi is not reported as a skipped cross-check"
fi
grep -q "209" <<<"$out" || fail "step 3 did not predict 209 for sm_86 on the Tegra part"
grep -q "cc 8.7 is a tegra part (no minor-version compatibility)" <<<"$out" || fail "step 3 does not give the Tegra reason"
grep -q "fix: rebuild with sass sm_87" <<<"$out" || fail "step 3 does not name the fix"

set +e
out="$(run "$work/orin.o" 2>&1)"; rc=$?
set -e
[ "$rc" = 0 ] || fail "doctor on the sm_87 object exited $rc, expected 0"
echo "doctor_tegra: ok (integrated 8.7 read from the driver; sm_86 -> 209 with the tegra reason; sm_87 passes)"
