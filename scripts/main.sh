#!/usr/bin/env bash
# README command 1: set up, build the samples under the default architecture policy, verify each
# sample binary with `archguard verify`, and print the coverage report. It builds only that: the
# tool, the kernels and the samples (ARCHGUARD_BUILD_TESTS=OFF; scripts/test.sh turns tests on).
#   ARCH_POLICY=<policy>  overrides the default (auto: SASS for the GPUs here + PTX of the lowest
#                         architecture nvcc supports; all-major when no GPU is visible)
#   BUILD_DIR=<dir>       default build/default (the "default" preset)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh
export PATH="$PATH:/usr/local/cuda/bin"
build="${BUILD_DIR:-build/default}"
policy="${ARCH_POLICY:-auto}"
jobs="$(nproc)"

echo "== configure ($build, ARCH_POLICY=$policy)"
cmake --preset default -B "$build" -DARCHGUARD_BUILD_SAMPLES=ON -DARCHGUARD_BUILD_TESTS=OFF "-DARCH_POLICY=$policy"
echo "== build"
cmake --build "$build" -j "$jobs"
ag="$build/bin/archguard"

echo "== the quickstart project (standalone, configured against cmake/Modules)"
cmake "-DSOURCE=$here/samples/quickstart" "-DBINARY=$here/$build/samples/quickstart" \
      "-DMODULES=$here/cmake/Modules" "-DARCHGUARD=$here/$ag" \
      "-DCUDA_COMPILER=$(command -v nvcc)" -DGENERATOR=Ninja -P samples/quickstart/run.cmake

# The targets the policy asked for, in CMake form (the policy engine in script mode).
require="$(cmake "-DARCH_POLICY=$policy" -DFORMAT=cmake -DQUIET=ON -P cmake/Modules/CudaArchGuardPolicy.cmake 2>/dev/null | tail -n1)"
echo "== verify the sample binaries against the policy: $require"
policy_built=("$build/samples/quickstart/quickstart" "$build/samples/no-kernel-image/no_kernel_image_fixed"
              "$build/samples/arch-specific/arch_specific" "$build/kernels/libarchguard_kernels.a")
deliberately_wrong=("$build/samples/no-kernel-image/no_kernel_image_broken" "$build/samples/jit-fallback/jit_fallback")
status=0
for b in "${policy_built[@]}"; do
  if "$ag" verify "$b" --require "$require"; then echo "verify ok: $b"; else echo "verify FAILED: $b"; status=1; fi
done
# Built for one architecture on purpose (no-kernel-image: sm_80 SASS only; jit-fallback: sm_75
# SASS only, no PTX): verify must refuse them, and says why (the first reason line, shortened).
for b in "${deliberately_wrong[@]}"; do
  if why="$("$ag" verify "$b" --require "$require" 2>&1)"; then
    echo "verify unexpectedly passed: $b (built for a wrong architecture on purpose)"; status=1
  else
    reason="$(printf '%s\n' "$why" | grep -m1 'translation unit' | sed 's/^[^:]*: //; s/; kernels:.*//')"
    echo "verify refuses $b, as intended (built for one architecture on purpose): ${reason:-$(printf '%s\n' "$why" | tail -n1)}"
  fi
done

echo "== coverage report"
"$ag" inspect --summary "${policy_built[@]}" "${deliberately_wrong[@]}"
echo "== archguard"
"$ag" --version
"$ag" arch list
exit "$status"
