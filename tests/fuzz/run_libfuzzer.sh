#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets with clang-14 and fuzzes each for a fixed time, starting from the
# committed corpora (never written to: new inputs go to the build tree).
# Usage: run_libfuzzer.sh <source dir> <build dir> [seconds per target] [targets...]
# Exit 77 without clang. Extra libFuzzer flags: FUZZ_FLAGS (e.g. "-jobs=1 -workers=1").
# The fatbin target reads inputs up to 1 MiB (archives whose members inflate past the CLI's
# budgets need room) with the CLI's limits, so the RSS limit is that of a real run.
set -euo pipefail
src=$1 build=$2 seconds=${3:-20}
shift $(( $# < 3 ? $# : 3 ))
targets=("$@"); [[ ${#targets[@]} -gt 0 ]] || targets=(fatbin fleet tokens)
clang=$(command -v clang++-14 || command -v clang++ || true)
[[ -n $clang ]] || { echo "no clang++: skipped"; exit 77; }
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$src/tests/fuzz/libfuzzer" -B "$build" "${gen[@]}" "${launcher[@]}" -DCMAKE_CXX_COMPILER="$clang" \
      -DARCHGUARD_SOURCE_DIR="$src" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}"
for t in "${targets[@]}"; do
  case $t in
    fatbin) seeds=("$src/tests/data/malformed" "$src/tests/fuzz/corpus"); max_len=1048576 ;;
    fleet) seeds=("$src/tests/data/fleet" "$src/tests/cmake/data"); max_len=4096 ;;
    tokens) seeds=("$src/tests/fuzz/corpus-tokens"); max_len=512 ;;
    *) echo "unknown target $t"; exit 2 ;;
  esac
  mkdir -p "$build/corpus-$t"
  echo "== fuzz_$t: $seconds s"
  # shellcheck disable=SC2086
  "$build/fuzz_$t" -artifact_prefix="$build/$t-" -max_total_time="$seconds" -max_len=$max_len \
      -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 ${FUZZ_FLAGS:-} \
      "$build/corpus-$t" "${seeds[@]}"
done
