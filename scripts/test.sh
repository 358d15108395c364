#!/usr/bin/env bash
# README command 2: set up, build, and run every test that needs no GPU (GPU tests skip
# cleanly here); then the sanitizer build of the unit, CLI and fuzz-corpus tests.
# ARCHGUARD_WERROR=ON (CI) builds with warnings as errors. The cross builds of toolchains/ (ctest
# label "cross") need scripts/setup-cross.sh; ARCHGUARD_SKIP_CROSS=1 leaves it out (they then skip).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
# Each stage runs whatever happened to the one before: a failing stage is reported, the others
# still run and report theirs, and the script exits non-zero at the end if any failed.
failed=()
stage() {  # stage NAME COMMAND...
  local name=$1; shift
  local t0=$SECONDS
  if "$@"; then
    echo "test.sh: stage '$name' passed ($((SECONDS - t0)) s)"
  else
    echo "test.sh: stage '$name' FAILED (exit $?, $((SECONDS - t0)) s)"
    failed+=("$name")
    return 1
  fi
}
stage setup bash scripts/setup.sh --tests || { echo "test.sh: setup failed, nothing can be built"; exit 1; }
[ "${ARCHGUARD_SKIP_CROSS:-0}" = 1 ] || stage "cross toolchains" bash scripts/setup-cross.sh
# The toolkit matrix (tests/toolkits): CUDA 11.8 and the newest 13.x, cached in .tools/.
# ARCHGUARD_SKIP_TOOLKITS=1 leaves them out (their tests then skip).
[ "${ARCHGUARD_SKIP_TOOLKITS:-0}" = 1 ] || stage "toolkit matrix" bash -c 'bash scripts/setup-toolkits.sh >/dev/null'
export PATH="$PATH:/usr/local/cuda/bin"
jobs="$(nproc)"
preset=default
[ "${ARCHGUARD_WERROR:-OFF}" = ON ] && preset=ci

if stage "build ($preset)" bash -c "cmake --preset '$preset' -DARCHGUARD_BUILD_TESTS=ON >/dev/null && cmake --build --preset '$preset' -j '$jobs'"; then
  stage "tests ($preset)" ctest --preset "$preset" -j "$jobs"
fi

if [ "${ARCHGUARD_SKIP_SANITIZERS:-0}" != 1 ]; then
  if stage "build (asan)" bash -c "cmake --preset asan >/dev/null && cmake --build --preset asan -j '$jobs'"; then
    stage "tests (asan)" ctest --preset asan -j "$jobs"
  fi
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "test.sh: FAILED stages: ${failed[*]}"
  exit 1
fi
echo "test.sh: all tests passed"
