#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every C/C++/CUDA source git tracks is formatted as .clang-format says, by clang-format 14 (other
# versions format some constructs differently: the check needs the one the tree was formatted
# with). Names each file that is not, with the first lines clang-format would change; the fix is
# `clang-format-14 -i <file>`. Skipped (77) without clang-format 14 or outside a git checkout.
# Usage: check_format.sh <source dir>
set -u
src=${1:?usage: check_format.sh <source dir>}
cf=
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null 2>&1 && "$c" --version 2>/dev/null | grep -q "version 14\."; then cf=$c; break; fi
done
[ -n "$cf" ] || { echo "SKIPPED: missing clang-format 14 (apt-get install clang-format-14)"; exit 77; }
git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "SKIPPED: $src is not a git checkout"; exit 77; }
bad=0 n=0
while IFS= read -r -d '' f; do
  [ -f "$src/$f" ] || continue
  n=$((n + 1))
  if ! out=$("$cf" --style=file "$src/$f" | diff -u --label "$f" --label "$f (formatted)" "$src/$f" -); then
    echo "check_format: $f is not formatted as .clang-format says:"
    printf '%s\n' "$out" | head -n 12
    bad=$((bad + 1))
  fi
done < <(git -C "$src" ls-files -z -- '*.c' '*.h' '*.cpp' '*.hpp' '*.cu' '*.cuh' ':!:tests/fuzz/corpus*' ':!:tests/data/*')
echo "check_format: $n files, $bad not formatted ($cf)"
[ "$bad" -eq 0 ]
