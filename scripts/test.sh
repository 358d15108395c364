#!/usr/bin/env bash
# README command 2: set up, build, and run every test that needs no GPU (GPU tests skip
# cleanly here); then the sanitizer build of the unit, CLI and fuzz-corpus tests.
# ARCHGUARD_WERROR=ON (CI) builds with warnings as errors. The cross builds of toolchains/ (ctest
# label "cross") need scripts/setup-cross.sh; ARCHGUARD_SKIP_CROSS=1 leaves it out (they then skip).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh --tests
[ "${ARCHGUARD_SKIP_CROSS:-0}" = 1 ] || bash scripts/setup-cross.sh
# The toolkit matrix (tests/toolkits): CUDA 11.8 and the newest 13.x, cached in .tools/.
# ARCHGUARD_SKIP_TOOLKITS=1 leaves them out (their tests then skip).
[ "${ARCHGUARD_SKIP_TOOLKITS:-0}" = 1 ] || bash scripts/setup-toolkits.sh >/dev/null
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
