#!/bin/sh
# What `archguard check` predicts for both builds on an H200 (compute capability 9.0), with no
# GPU needed: the broken build fails with 209, the fixed one runs natively.
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
echo "check.sh: archguard check predicts 209 for the broken build and a native run for the fixed one"
