#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A stand-in for nvcc of a given CUDA release, for the policy scenarios (no compiling).
# Usage: fake-nvcc.sh <release> <nvcc arguments>. Answers --version, --list-gpu-code,
# --list-gpu-arch, --help (the --gpu-architecture paragraph) and --dryrun; anything else fails,
# so a compiled probe "finds no GPU". The lists are test fixtures written from each release's
# documented targets. Pseudo releases: "empty" (lists nothing), anything unknown (--version fails).
set -u
release=$1; shift
version=$release
case "$release" in
  11.8) sms="35 37 50 52 53 60 61 62 70 72 75 80 86 87 89 90"; var=""; def=52 ;;
  12.4) sms="50 52 53 60 61 62 70 72 75 80 86 87 89 90"; var="90a"; def=52 ;;
  12.8) sms="50 52 53 60 61 62 70 72 75 80 86 87 89 90 100 101 120"; var="90a 100a 101a 120a"; def=52 ;;
  12.9) sms="50 52 53 60 61 62 70 72 75 80 86 87 89 90 100 101 103 120 121"
        var="90a 100a 100f 101a 101f 103a 103f 120a 120f 121a 121f"; def=52 ;;
  13.0) sms="75 80 86 87 88 89 90 100 110 103 120 121"
        var="90a 100a 100f 103a 103f 110a 110f 120a 120f 121a 121f"; def=75 ;;
  # 13.9: a future release listing sm_109 (and 109a), which the table does not know.
  13.9) sms="75 80 86 87 88 89 90 100 103 107 109 110 120 121"
        var="90a 100a 100f 103a 103f 107a 107f 109a 110a 110f 120a 120f 121a 121f"; def=75 ;;
  empty) sms=""; var=""; def=75; version=13.0 ;;   # answers --version but lists no GPU code
  *) echo "fake-nvcc: unknown release $release" >&2; exit 2 ;;   # e.g. "broken": --version fails
esac
case "${1:-}" in
  --version)
    echo "nvcc: NVIDIA (R) Cuda compiler driver"
    echo "Cuda compilation tools, release $version, V$version.0" ;;
  --list-gpu-code) for s in $sms; do echo "sm_$s"; done ;;
  --list-gpu-arch) for s in $sms; do echo "compute_$s"; done ;;
  --help)
    echo "--gpu-architecture <arch>                           (-arch)"
    echo "        Specify the name of the class of NVIDIA 'virtual' GPU architecture."
    printf "        Allowed values for this option:  'all','all-major',"
    for s in $sms $var; do printf "'compute_%s','sm_%s'," "$s" "$s"; done
    echo "'native'."
    echo
    echo "--gpu-code <code>,...                               (-code)" ;;
  --dryrun)
    # nvcc 11.x/12.x warn on every compile for targets they call deprecated (this wording).
    case "$release" in 11.*) dep=52 ;; 12.*) dep=75 ;; *) dep=0 ;; esac
    for a in "$@"; do
      case "$a" in -arch=sm_*)
        n=${a#-arch=sm_}; n=${n%[af]}
        [ "$n" -lt "$dep" ] && echo "nvcc warning : Support for offline compilation for architectures prior to '<compute_$dep>' is deprecated and will be removed in a future release (Use -Wno-deprecated-gpu-targets to suppress warning)." >&2 ;;
      esac
    done
    echo "#\$ cicc --c++17 -arch compute_$def -o x.ptx" >&2 ;;
  *) echo "fake-nvcc $release: cannot compile (test stand-in)" >&2; exit 1 ;;
esac
