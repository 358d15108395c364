#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The results cache on a static library (its members judged as one object): a second `check` and
# `doctor` read the judgement from its record and print what --no-cache prints; another GPU is
# judged from the kept kernel lists, nothing decoded, even where two members have images at the
# same offset with the same headers but other kernels; an archive rewritten with another member
# is judged anew.
# Usage: results_cache_archive.sh ARCHGUARD FIXTURES. Skips (77) without the nvcc fixtures.
set -u
ag=${1:?archguard}
fixtures=${2:?fixture dir}
[[ -f $fixtures/compress-none.o && -f $fixtures/plain.o && -f $fixtures/ptxonly.o ]] ||
  { echo "skip: no fixtures in $fixtures"; exit 77; }
source "$(dirname "$0")/lib.sh"
cli_tmp
cli_count_failures
export ARCHGUARD_CACHE_DIR=$tmp/cache ARCHGUARD_RESULTS_CACHE_STATS=1
stat_of() { grep -o '[0-9]* hits, [0-9]* misses, [0-9]* stored' "$1"; }
known_of() { grep -o '[0-9]* judgements known' "$1"; }
# The same object twice with one kernel renamed (same length): the members' fatbins and images
# sit at the same offsets with the same headers (uncompressed), only the names differ.
renamed() { LC_ALL=C sed "s/fixture_fill/$2/g" "$fixtures/compress-none.o" > "$1"; }
cp "$fixtures/compress-none.o" "$tmp/a.o"
renamed "$tmp/b.o" fixture_FILL
[[ $(stat -c %s "$tmp/a.o") == $(stat -c %s "$tmp/b.o") ]] && ! cmp -s "$tmp/a.o" "$tmp/b.o" ||
  fail "the renamed copy is not the same size with other bytes"
"$ag" inspect --kernels "$tmp/b.o" 2>/dev/null | grep -q fixture_FILL || fail "inspect --kernels b.o names no fixture_FILL"
mkdir "$tmp/lib"
ar rcs "$tmp/lib/libk.a" "$tmp/a.o" "$tmp/b.o" "$fixtures/plain.o" "$fixtures/ptxonly.o"
lib=$tmp/lib/libk.a
sleep 2.2 # a file changed in the last two seconds has no identity yet: read anew each time

# run NAME ARGS...: archguard ARGS with the cache (NAME.out, NAME.err, NAME.rc), and without it
# (NAME.ref.out, NAME.ref.rc); fails unless both print the same and exit alike. What doctor says
# of the moment is left out: the time it took ("(12 ms)"), the space free on a file system.
untimed() { sed -E -e '/^\([0-9.]+ m?s\)$/d' -e 's/[0-9]+ MiB free/N MiB free/'; }
run() {
  local name=$1
  shift
  "$ag" "$@" 2> "$tmp/$name.err" | untimed > "$tmp/$name.out"
  echo "${PIPESTATUS[0]}" > "$tmp/$name.rc"
  ARCHGUARD_RESULTS_CACHE_STATS=0 "$ag" "$@" --no-cache 2>/dev/null | untimed > "$tmp/$name.ref.out"
  echo "${PIPESTATUS[0]}" > "$tmp/$name.ref.rc"
  if cmp -s "$tmp/$name.out" "$tmp/$name.ref.out" && cmp -s "$tmp/$name.rc" "$tmp/$name.ref.rc"; then
    echo "ok: $name: the same output and exit code ($(cat "$tmp/$name.rc")) as --no-cache"
  else
    fail "$name: output or exit code differs from --no-cache"
    diff "$tmp/$name.ref.out" "$tmp/$name.out" | head -20
  fi
}

run cold check --no-deps --cc 7.5 "$lib"
grep -q 'static' "$tmp/cold.out" || fail "cold: not judged as one static library: $(head -5 "$tmp/cold.out")"
[[ $(stat_of "$tmp/cold.err") =~ ^0\ hits,\ [1-9][0-9]*\ misses,\ [1-9][0-9]*\ stored ]] &&
  echo "ok: the first check decodes and stores ($(stat_of "$tmp/cold.err"))" || fail "cold: $(stat_of "$tmp/cold.err")"
run hit check --no-deps --cc 7.5 "$lib"
[[ $(known_of "$tmp/hit.err") == "1 judgements known" && $(stat_of "$tmp/hit.err") =~ ^0\ hits,\ 0\ misses ]] &&
  echo "ok: the second check reads the library's judgement ($(known_of "$tmp/hit.err"), $(stat_of "$tmp/hit.err"))" ||
  fail "second check: $(known_of "$tmp/hit.err"), $(stat_of "$tmp/hit.err")"
cmp -s "$tmp/cold.out" "$tmp/hit.out" || fail "the second check prints otherwise than the first"
# --json lists every kernel with its unit: another judgement, then read back.
run json1 check --no-deps --cc 7.5 --json "$lib"
run json2 check --no-deps --cc 7.5 --json "$lib"
[[ $(known_of "$tmp/json2.err") == "1 judgements known" ]] && echo "ok: --json reads its judgement" ||
  fail "--json: $(known_of "$tmp/json2.err")"
for k in fixture_fill fixture_FILL; do
  grep -q "\"$k\"" "$tmp/json1.out" || fail "--json names no kernel $k"
done

# Another GPU: judged anew from the kernel lists kept, nothing decoded. a.o and b.o have images
# at the same offsets with the same headers: each keeps its own list (keyed by the offset alone,
# one member's list would stand for both, and the kernels named would differ from --no-cache).
run other check --no-deps --cc 7.0 --json "$lib"
[[ $(known_of "$tmp/other.err") == "0 judgements known" && $(stat_of "$tmp/other.err") =~ ^[1-9][0-9]*\ hits,\ 0\ misses ]] &&
  echo "ok: another GPU is judged from the kept lists ($(stat_of "$tmp/other.err"))" ||
  fail "cc 7.0: $(known_of "$tmp/other.err"), $(stat_of "$tmp/other.err")"
for k in fixture_fill fixture_FILL; do
  grep -q "\"$k\"" "$tmp/other.out" || fail "cc 7.0: no kernel $k"
done

# doctor judges the library as check does, and reads its judgement the second time.
run doctor1 doctor --no-smoke --cc 7.5 "$lib"
run doctor2 doctor --no-smoke --cc 7.5 "$lib"
[[ $(known_of "$tmp/doctor2.err") =~ ^[1-9] && $(stat_of "$tmp/doctor2.err") =~ ^0\ hits,\ 0\ misses ]] &&
  echo "ok: doctor reads the judgement ($(known_of "$tmp/doctor2.err"))" ||
  fail "doctor: $(known_of "$tmp/doctor2.err"), $(stat_of "$tmp/doctor2.err")"

# The archive rewritten with another member in b.o's place: another identity, judged anew.
renamed "$tmp/b.o" fixture_Fill
rm "$lib"
ar rcs "$lib" "$tmp/a.o" "$tmp/b.o" "$fixtures/plain.o" "$fixtures/ptxonly.o"
sleep 2.2
run changed check --no-deps --cc 7.5 --json "$lib"
[[ $(known_of "$tmp/changed.err") == "0 judgements known" ]] && echo "ok: the rewritten archive is judged anew" ||
  fail "rewritten archive: $(known_of "$tmp/changed.err")"
grep -q '"fixture_Fill"' "$tmp/changed.out" && ! grep -q '"fixture_FILL"' "$tmp/changed.out" ||
  fail "rewritten archive: the kernels of the old member"
echo "results_cache_archive: $fails failed"
[[ $fails -eq 0 ]]
