#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# driver_oracle.py, the GPU run's fatbin-by-fatbin comparison of archguard check with the real
# driver, held against a fake libcuda (tests/unit/device/fake_libcuda.cpp) so that it is known
# to catch both kinds of error before it is trusted on a GPU: a driver that loads what was
# predicted to fail (false alarm), a driver that refuses what was predicted to run (missed), and
# a driver that agrees. Skips (77) without python3 or the fixtures.
set -u
archguard=${1:?archguard}; fake=${2:?fake libcuda}; fixtures=${3:?fixture dir}
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "no python3"; exit 77; }
[ -f "$fixtures/libplain.so" ] || { echo "no fixtures in $fixtures"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ln -s "$(realpath "$fake")" "$tmp/libcuda.so.1"
fail=0
# expect <exit> <regex> <env...>: runs the oracle on libplain.so under the fake driver.
expect() {
  local want=$1 regex=$2 out rc
  shift 2
  out=$(env LD_LIBRARY_PATH="$tmp" "$@" python3 "$here/driver_oracle.py" "$archguard" "$fixtures/libplain.so" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE "$regex" <<<"$out"; then
    echo "FAILED: $* (exit $rc, wanted $want, /$regex/):"; echo "$out" | head -20; fail=1
  else
    echo "ok: $* -> exit $rc"
  fi
}
# libplain.so holds sm_80, sm_90 SASS and compute_90 PTX: it runs on 9.0 and fails on 7.5.
expect 0 "loaded [1-9][0-9]* fatbins .* 0 missed failures, 0 false alarms" FAKE_CUDA_CC=9.0
expect 1 "FALSE ALARM .*libplain.so: fatbin .*predicted 209, the driver loads it" FAKE_CUDA_CC=7.5
expect 1 "MISSED .*libplain.so: fatbin .*predicted native, the driver says 209" FAKE_CUDA_CC=9.0 FAKE_CUDA_REJECT_LOADS=1000
expect 77 "no usable GPU" FAKE_CUDA_INIT_ERROR=100
exit $fail
