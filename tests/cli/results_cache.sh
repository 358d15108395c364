#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The results cache (issue 25): a second `check`/`doctor` of an unchanged library neither parses,
# searches, decodes nor judges and prints the same; another GPU is judged anew without decoding; --no-cache and ARCHGUARD_CACHE_DISABLE bypass it; a file
# changed in place (even with its modification time put back) is read and decoded again; a
# cache directory that cannot be used is a warning, never a failure.
# Usage: results_cache.sh ARCHGUARD [LIBRARY]. Skips (77) without a toolkit library.
set -u
ag=$1
lib=${2:-$(ls /usr/local/cuda/lib64/libcurand.so.* 2>/dev/null | head -1)}
[[ -n $lib && -f $lib ]] || { echo "skip: no libcurand in /usr/local/cuda/lib64"; exit 77; }
tmp=$(mktemp -d)
trap 'chmod -R u+rwx "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
export ARCHGUARD_CACHE_DIR=$tmp/cache ARCHGUARD_RESULTS_CACHE_STATS=1
stat_of() { grep -o '[0-9]* hits, [0-9]* misses, [0-9]* stored, [0-9]* searches skipped' "$1"; }
known_of() { grep -o '[0-9]* judgements known' "$1"; }

"$ag" check --cc 7.0 "$lib" > "$tmp/1.out" 2> "$tmp/1.err"; rc1=$?
"$ag" check --cc 7.0 "$lib" > "$tmp/2.out" 2> "$tmp/2.err"; rc2=$?
ARCHGUARD_RESULTS_CACHE_STATS=0 "$ag" check --cc 7.0 --no-cache "$lib" > "$tmp/3.out" 2> "$tmp/3.err"; rc3=$?
first=$(stat_of "$tmp/1.err"); second=$(stat_of "$tmp/2.err")
[[ $first =~ ([0-9]+)\ stored && ${BASH_REMATCH[1]} -gt 0 ]] && ok "first run stores what it decoded ($first)" || bad "first run: '$first'"
# The second run takes the library's verdict and judgement on 7.0 from their record: it neither
# decodes nor reads a kernel list (0 hits).
[[ $second =~ ^0\ hits,\ 0\ misses,\ 0\ stored,\ ([0-9]+) && ${BASH_REMATCH[1]} -gt 0 ]] &&
  ok "second run decodes and searches nothing ($second)" || bad "second run: '$second'"
[[ $(known_of "$tmp/2.err") =~ ^[1-9][0-9]*\ judgements ]] && ok "second run reads the judgement ($(known_of "$tmp/2.err"))" ||
  bad "judgements known: '$(known_of "$tmp/2.err")'"
# The library is one object: the second run takes what the first read of it from its record and
# parses none of its headers.
[[ $(grep -o '[0-9]* files known' "$tmp/2.err") == "1 files known" ]] && ok "second run reads the file from its facts" ||
  bad "files known: '$(grep -o '[0-9]* files known' "$tmp/2.err")'"
[[ $rc1 -eq $rc2 && $rc1 -eq $rc3 ]] && ok "same exit code ($rc1)" || bad "exit codes $rc1 $rc2 $rc3"
cmp -s "$tmp/1.out" "$tmp/2.out" && cmp -s "$tmp/1.out" "$tmp/3.out" && ok "same output with, from and without the cache" || bad "outputs differ"
[[ ! -s $tmp/3.err ]] && ok "--no-cache: nothing on stderr" || { bad "--no-cache stderr"; cat "$tmp/3.err"; }
# --json lists every kernel (another judgement, kept beside the first): judged, then read back.
"$ag" check --cc 7.0 --json "$lib" > "$tmp/j1.out" 2>/dev/null
"$ag" check --cc 7.0 --json "$lib" > "$tmp/j2.out" 2> "$tmp/j2.err"
"$ag" check --cc 7.0 --json --no-cache "$lib" > "$tmp/j3.out" 2>/dev/null
[[ $(known_of "$tmp/j2.err") =~ ^[1-9] ]] && ok "--json reads its judgement" || bad "--json: $(known_of "$tmp/j2.err")"
cmp -s "$tmp/j1.out" "$tmp/j3.out" && cmp -s "$tmp/j2.out" "$tmp/j3.out" && ok "same JSON filling, from and without the cache" ||
  bad "JSON differs"

# Another GPU is another judgement: judged anew from the kernel lists kept, nothing decoded,
# the same output as without the cache.
"$ag" check --cc 8.0 "$lib" > "$tmp/80.out" 2> "$tmp/80.err"
ARCHGUARD_RESULTS_CACHE_STATS=0 "$ag" check --cc 8.0 --no-cache "$lib" > "$tmp/80n.out" 2>/dev/null
[[ $(stat_of "$tmp/80.err") =~ ^[0-9]+\ hits,\ 0\ misses && $(known_of "$tmp/80.err") == "0 judgements known" ]] &&
  ok "another GPU is judged anew, nothing decoded ($(stat_of "$tmp/80.err"))" || bad "cc 8.0: $(stat_of "$tmp/80.err"), $(known_of "$tmp/80.err")"
cmp -s "$tmp/80.out" "$tmp/80n.out" && ok "another GPU: the same output as without the cache" || bad "cc 8.0: outputs differ"

# doctor reads the same records: nothing decoded.
"$ag" doctor --no-smoke --cc 7.0 "$lib" > "$tmp/d.out" 2> "$tmp/d.err"
[[ $(stat_of "$tmp/d.err") =~ ^[0-9]+\ hits,\ 0\ misses ]] && ok "doctor finds check's records" || bad "doctor: $(stat_of "$tmp/d.err")"
ARCHGUARD_CACHE_DISABLE=1 "$ag" check --cc 7.0 "$lib" > /dev/null 2> "$tmp/off.err"
[[ ! -s $tmp/off.err ]] && ok "ARCHGUARD_CACHE_DISABLE=1: no cache, nothing said" || bad "disabled: $(cat "$tmp/off.err")"

# A copy with one byte of a payload changed is not the same image: decoded again.
cp "$lib" "$tmp/lib.so"
"$ag" inspect --json "$tmp/lib.so" > "$tmp/inspect.json" 2>/dev/null
off=$(python3 -c '
import json,sys
d=json.load(open(sys.argv[1]))
for i in d["inputs"]:
    for o in i["objects"]:
        for f in o["fatbins"]:
            if f.get("device_link"): continue
            for im in f["images"]:
                if im["kind"]=="sass":
                    print(im["offset"]+im["header_size"]+im["stored_size"]//2); sys.exit()' "$tmp/inspect.json" 2>/dev/null)
if [[ -n $off ]]; then
  # A copy settles for two seconds before it has an identity (a file that just changed is
  # read anew each time): then it is cached like the original.
  sleep 2.2
  "$ag" check --cc 7.0 "$tmp/lib.so" > "$tmp/c1.out" 2> "$tmp/c1.err"
  "$ag" check --cc 7.0 "$tmp/lib.so" > /dev/null 2> "$tmp/c2.err"
  [[ $(stat_of "$tmp/c2.err") =~ ^[0-9]+\ hits,\ 0\ misses && $(known_of "$tmp/c2.err") =~ ^[1-9] ]] &&
    ok "a settled copy is cached ($(stat_of "$tmp/c2.err"))" ||
    bad "settled copy: $(stat_of "$tmp/c2.err")"
  # One byte of a payload changed in place, the modification time put back: the change time
  # moved, so it is another file. Read and decoded again, whatever the cache holds.
  touch -r "$tmp/lib.so" "$tmp/stamp"
  printf '\x01' | dd of="$tmp/lib.so" bs=1 seek="$off" conv=notrunc status=none
  touch -r "$tmp/stamp" "$tmp/lib.so"
  "$ag" check --cc 7.0 "$tmp/lib.so" > "$tmp/m.out" 2> "$tmp/m.err"
  ARCHGUARD_RESULTS_CACHE_STATS=0 "$ag" check --cc 7.0 --no-cache "$tmp/lib.so" > "$tmp/mn.out" 2>/dev/null
  [[ $(stat_of "$tmp/m.err") =~ ^0\ hits,\ [1-9][0-9]*\ misses,\ 0\ stored,\ 0\ searches ]] &&
    ok "a file changed in place is read and decoded again ($(stat_of "$tmp/m.err"))" || bad "changed payload: $(stat_of "$tmp/m.err")"
  cmp -s "$tmp/m.out" "$tmp/mn.out" && ok "the changed file: the same output as without the cache" || bad "changed file: outputs differ"
else
  echo "note: inspect --json gave no payload offset; the changed-payload case was not run"
fi

# A cache directory others may write: not used, said on stderr, the verdict unchanged.
chmod 0777 "$tmp/cache/results"
"$ag" check --cc 7.0 "$lib" > "$tmp/w.out" 2> "$tmp/w.err"; rcw=$?
grep -q "results cache not used" "$tmp/w.err" && ok "unsafe cache directory: a warning" || { bad "no warning"; cat "$tmp/w.err"; }
[[ $rcw -eq $rc1 ]] && cmp -s "$tmp/w.out" "$tmp/1.out" && ok "unsafe cache directory: same verdict" || bad "verdict changed ($rcw)"
chmod 0700 "$tmp/cache/results"
echo "results_cache: $fails failed"
[[ $fails -eq 0 ]]
