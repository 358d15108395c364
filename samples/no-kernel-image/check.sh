#!/bin/sh
# What `archguard check` predicts for both builds on an H200 (compute capability 9.0), with no
# GPU needed: the broken build fails with 209, the fixed one runs natively; and what
# `archguard doctor --cc 9.0` says about the broken one (the kernel, the rebuild fix).
# Usage: check.sh <archguard> <broken> <fixed>
set -u
archguard=$1 broken=$2 fixed=$3
"$archguard" check --cc 9.0 "$broken"
rc=$?
if [ "$rc" -ne 1 ]; then
  echo "check.sh: expected 'archguard check --cc 9.0' to predict a failure (exit 1) for $broken, got exit $rc" >&2
  exit 1
fi
"$archguard" check --cc 9.0 "$fixed"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "check.sh: expected 'archguard check --cc 9.0' to pass (exit 0) for $fixed, got exit $rc" >&2
  exit 1
fi
out=$("$archguard" doctor --no-smoke --cc 9.0 "$broken")
rc=$?
case "$rc" in 1|3) ;; *) echo "check.sh: archguard doctor exited $rc (expected 1, or 3 without a driver)" >&2; exit 1 ;; esac
for want in "ag_saxpy" "error 209" "CMAKE_CUDA_ARCHITECTURES" "\"9.0+PTX\" to TORCH_CUDA_ARCH_LIST" "-gencode=arch=compute_90,code=[sm_90,compute_90]"; do
  case "$out" in
    *"$want"*) ;;
    *) echo "check.sh: archguard doctor --cc 9.0 does not say '$want':" >&2; echo "$out" >&2; exit 1 ;;
  esac
done
echo "check.sh: archguard check predicts 209 for the broken build and a native run for the fixed one;"
echo "check.sh: archguard doctor --cc 9.0 names ag_saxpy and gives the rebuild fix"
