#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer target with clang-14 and fuzzes the fatbin reader for a few seconds,
# starting from the committed corpora (never written to: new inputs go to the build tree).
# Usage: run_libfuzzer.sh <source dir> <build dir> [seconds]. Exit 77 without clang-14.
set -euo pipefail
src=$1 build=$2 seconds=${3:-15}
clang=$(command -v clang++-14 || command -v clang++ || true)
[[ -n $clang ]] || { echo "no clang++: skipped"; exit 77; }
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src/tests/fuzz/libfuzzer" -B "$build" "${gen[@]}" -DCMAKE_CXX_COMPILER="$clang" \
      -DARCHGUARD_SOURCE_DIR="$src" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2
mkdir -p "$build/corpus"
"$build/fuzz_fatbin" -artifact_prefix="$build/" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    "$build/corpus" "$src/tests/data/malformed" "$src/tests/fuzz/corpus"
