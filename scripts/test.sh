#!/usr/bin/env bash
# README command 2: set up, build, and run every test that needs no GPU (GPU tests skip
# cleanly here); then the sanitizer build of the unit, CLI and fuzz-corpus tests.
# ARCHGUARD_WERROR=ON (CI) builds with warnings as errors.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh --tests
export PATH="$PATH:/usr/local/cuda/bin"
jobs="$(nproc)"
preset=default
[ "${ARCHGUARD_WERROR:-OFF}" = ON ] && preset=ci

cmake --preset "$preset" -DARCHGUARD_BUILD_TESTS=ON >/dev/null
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" -j "$jobs"

if [ "${ARCHGUARD_SKIP_SANITIZERS:-0}" != 1 ]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"
fi
echo "test.sh: all tests passed"
