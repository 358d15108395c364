#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds and runs bench_jit; writes the figures as JSON beside the table it prints.
# Usage: bench/bench_jit.sh [BUILD_DIR] [--gpu] [--reps N]
# On a GPU machine, `bench_jit --gpu` measures a cache hit to a loaded module (exit 77 without one).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build/bench}"
shift || true
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DARCHGUARD_BUILD_SAMPLES=OFF >/dev/null
fi
cmake --build "$build" --target bench_jit -j2 >/dev/null
"$build/bin/bench_jit" --json "$build/bench_jit.json" "$@"
echo "json: $build/bench_jit.json"
