#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two archguard runs must list the same device code: `inspect --json` of each shared library of
# a CUDA toolkit (every fatbin, embedded ones included, with offsets, sizes and images), its
# messages and its exit status, byte for byte. Run by hand before and after a change to the
# reader made for speed, with the binary built before it as OLD (docs/benchmarks-inspect.md);
# run by CTest (cli_inspect_threads) with one binary on 1 and on 8 threads.
#
# Usage: tests/cli/compare_inspect.sh OLD NEW [library dir]   (default /usr/local/cuda/lib64)
#   OLD_ARGS, NEW_ARGS  extra inspect options of each side, e.g. NEW_ARGS="--threads 8"
# Exit status: 0 all identical, 1 some output differs, 2 bad usage, 77 no library to compare.
set -u
old=${1:-}
new=${2:-}
dir=${3:-/usr/local/cuda/lib64}
[[ -x $old && -x $new ]] || { echo "usage: compare_inspect.sh OLD NEW [library dir]" >&2; exit 2; }
# Each file once (lib64 holds the same library under several symbolic links).
mapfile -t files < <(find -L "$dir" -maxdepth 1 -name 'lib*.so*' -type f 2>/dev/null | xargs -r realpath | sort -u)
[[ ${#files[@]} -gt 0 ]] || { echo "skip: no lib*.so* under $dir"; exit 77; }
read -r -a old_args <<< "${OLD_ARGS:-}"
read -r -a new_args <<< "${NEW_ARGS:-}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
differ=0
fatbins=0
embedded=0
for f in "${files[@]}"; do
  "$old" inspect --json "${old_args[@]}" "$f" > "$tmp/old" 2> "$tmp/old.err"
  rc_old=$?
  "$new" inspect --json "${new_args[@]}" "$f" > "$tmp/new" 2> "$tmp/new.err"
  rc_new=$?
  # Fatbin counts of the file, to show that the comparison covered something.
  read -r n e < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
objs = [o for i in d.get("inputs", []) for o in i.get("objects", [])]
print(sum(len(o["fatbins"]) for o in objs), sum(o["fatbin_counts"]["embedded"] for o in objs))' "$tmp/old" 2>/dev/null || echo "? ?")
  if [[ $rc_old -ne $rc_new ]] || ! cmp -s "$tmp/old" "$tmp/new" || ! cmp -s "$tmp/old.err" "$tmp/new.err"; then
    echo "DIFFERS: $f (exit $rc_old vs $rc_new)"
    diff "$tmp/old" "$tmp/new" | head -20
    diff "$tmp/old.err" "$tmp/new.err" | head -5
    differ=$((differ + 1))
  else
    echo "same: $f: $n fatbins, $e embedded (exit $rc_old)"
    [[ $n == "?" ]] || { fatbins=$((fatbins + n)); embedded=$((embedded + e)); }
  fi
done
echo "compare_inspect: ${#files[@]} libraries, $differ differ; identical ones hold $fatbins fatbins, $embedded of them embedded"
[[ $differ -eq 0 ]]
