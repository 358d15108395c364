#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The reader's benchmark suite: every figure beside its anchor, measured in the same call, the
# commands interleaved round by round (load from other processes hits both sides alike), wall
# time from bash's microsecond clock, CPU time and peak memory from GNU time -v, medians.
# Method and figures: docs/benchmarks-inspect.md. Sections of --suite:
#   inspect    `inspect` of libcublasLt, libcufft and libnccl (the toolkit's lib64 and the
#              nvidia-* wheels of the Python environments) against cuobjdump --list-elf +
#              --list-ptx, and against the C floor (bench/floor: the same headers and regions
#              read, nothing else); the floor's entry count must equal inspect's
#   kernels    `inspect --kernels` of libcublasLt against cuobjdump --dump-elf-symbols and the
#              decoding floor (every image decompressed, its kernels counted; needs libzstd and
#              liblz4 headers); the kernel counts must agree
#   dir        `check --no-deps`, `doctor --no-smoke --no-deps` and `inspect --kernels` of a
#              directory of 1 and N copies (real copies: a directory's hardlinks are read once)
#              of a large library, 100 with --hundred; the floor on the same files; peak memory
#              as N grows
#   cache      the second run of the same check/doctor (a cache hit) against --no-cache; "n/a"
#              when the binary has no --no-cache
#   wheel      `inspect` of a wheel with device code (the first *.whl in .tools/bench-cache,
#              --fetch-wheel puts cupy-cuda12x there; else a deflated zip of a toolkit library)
#              against one inflate pass: libdeflate (bench/floor/inflate_floor.c: every member
#              in one shot, its CRC-32 checked; needs libdeflate headers), python3 zipfile
#              reading every member, unzip -p
#
# Usage: bench/bench_inspect.sh [library] [repetitions]    one library, as before (inspect rows)
#        bench/bench_inspect.sh --suite [options]          every section
#        bench/bench_inspect.sh --smoke [options]          1 repetition, tiny inputs: proves the
#                                                          script works (exit 77: a tool missing)
# Options: --reps N (default 5; --smoke 1)  --copies N (default 10)  --hundred (also 100 copies)
#          --sections LIST (comma-separated, default inspect,kernels,dir,cache,wheel)
#          --archguard PATH  --fetch-wheel (pip download cupy-cuda12x into the cache, then run)
# Environment:
#   ARCHGUARD      the archguard binary (default: build/default/bin/archguard, ci, then dev)
#   CUOBJDUMP      cuobjdump (default: the one scripts/setup.sh installs into $ARCHGUARD_VENV/.venv)
#   GNU_TIME       GNU time (default /usr/bin/time)      CC  the C compiler for the floor (cc)
#   ARCHGUARD_OLD  optional: another archguard binary (the one before a change), measured in the
#                  same rounds of the inspect section; its row and the ratios are added
#   LIBS           the libraries of the inspect section (space-separated paths)
#   KERNELS_LIB    the library of the kernels section     COPY_LIB  the library copied (dir)
#   WHEEL          the wheel of the wheel section         BENCH_CACHE  (default .tools/bench-cache)
#   CUDA_LIB_DIR   the toolkit's libraries (default /usr/local/cuda/lib64)
#   BENCH_TMP      where the copies go (default $TMPDIR or /tmp; N x the library's size)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
me="bench_inspect"
mode=legacy reps="" copies=10 hundred=0 sections="inspect,kernels,dir,cache,wheel" fetch=0 ag=${ARCHGUARD:-}
positional=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --suite) mode=suite ;;
    --smoke) mode=smoke ;;
    --reps) reps=$2; shift ;;
    --copies) copies=$2; shift ;;
    --hundred) hundred=1 ;;
    --sections) sections=$2; shift ;;
    --archguard) ag=$2; shift ;;
    --fetch-wheel) fetch=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "$me: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) positional+=("$1") ;;
  esac
  shift
done
[[ ${#positional[@]} -gt 0 && $mode != legacy ]] && { echo "$me: a library and a count go without --suite/--smoke (or use LIBS)" >&2; exit 2; }
if [[ $mode == legacy ]]; then
  sections=inspect
  reps=${positional[1]:-${reps:-5}}
elif [[ $mode == smoke ]]; then
  reps=${reps:-1}
  copies=2
  hundred=0
else
  reps=${reps:-5}
fi
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "$me: repetitions must be a positive number (got '$reps')" >&2; exit 2; }
[[ $copies =~ ^[1-9][0-9]*$ ]] || { echo "$me: --copies must be a positive number (got '$copies')" >&2; exit 2; }
# A missing tool: the smoke test skips (77), a benchmark cannot run (2).
missing() {
  if [[ $mode == smoke ]]; then echo "SKIPPED: $me --smoke: $*"; exit 77; fi
  echo "$me: $*" >&2
  exit 2
}
has() { [[ ,$sections, == *,$1,* ]]; }

for c in "$here/build/default/bin/archguard" "$here/build/ci/bin/archguard" "$here/build/dev/bin/archguard"; do
  [[ -n $ag ]] && break
  [[ -x $c ]] && ag=$c
done
venv=${ARCHGUARD_VENV:-$here/.venv}
cuobjdump=${CUOBJDUMP:-$(ls "$venv"/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump 2>/dev/null | head -1 || true)}
gnutime=${GNU_TIME:-/usr/bin/time}
cc=${CC:-cc}
libdir=${CUDA_LIB_DIR:-/usr/local/cuda/lib64}
cache=${BENCH_CACHE:-$here/.tools/bench-cache}
old=${ARCHGUARD_OLD:-}
# the binary under test is no missing tool: without it the smoke test fails
[[ -x $ag ]] || { echo "$me: no archguard binary${ag:+ at $ag} (set ARCHGUARD or pass --archguard)" >&2; exit 2; }
[[ -x $cuobjdump ]] || missing "no cuobjdump (set CUOBJDUMP or run scripts/setup.sh --tests)"
[[ -x $gnutime ]] && "$gnutime" -f %M true >/dev/null 2>&1 ||
  missing "needs GNU time ($gnutime; Debian package 'time', or set GNU_TIME)"
[[ -z $old || -x $old ]] || { echo "$me: ARCHGUARD_OLD=$old is not executable" >&2; exit 2; }

work=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/ag-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
tmp=$work/m
mkdir -p "$tmp"
# The suite's own results cache, so that the first run is a cold one and nothing of the user's
# is touched (a binary without a cache ignores it).
export XDG_CACHE_HOME=$work/xdg-cache

# ---- the floor ------------------------------------------------------------------------------
floor="" floor_dec="" floor_inflate=""
if command -v "$cc" >/dev/null 2>&1; then
  "$cc" -O2 -o "$work/inflate-floor" "$here/bench/floor/inflate_floor.c" -ldeflate 2>"$work/inflate-floor.log" &&
    floor_inflate=$work/inflate-floor
  "$cc" -O2 -o "$work/floor" "$here/bench/floor/fatbin_floor.c" 2>"$work/floor.log" && floor=$work/floor
  "$cc" -O2 -DFLOOR_DECODE -o "$work/floor-dec" "$here/bench/floor/fatbin_floor.c" -lzstd -llz4 2>>"$work/floor.log" &&
    floor_dec=$work/floor-dec
fi
[[ -n $floor ]] || { [[ $mode == smoke ]] && missing "no C compiler for the floor ($cc)"; echo "$me: no floor (cc -O2 bench/floor/fatbin_floor.c failed): its rows are left out" >&2; }

# ---- measuring ------------------------------------------------------------------------------
# measure <name> <command...>: appends "wall_s cpu_s peak_kB" to $tmp/<name>. Wall time from the
# shell's microsecond clock (GNU time prints only centiseconds), CPU (user + system) and peak RSS
# from GNU time. Output goes to /dev/null; the exit status is not judged here.
measure() {
  local name=$1 t0 t1
  shift
  t0=$EPOCHREALTIME
  "$gnutime" -f "%M %U %S" -o "$tmp/t" "$@" >/dev/null 2>&1 || true
  t1=$EPOCHREALTIME
  read -r kb us ss < <(tail -n 1 "$tmp/t")
  echo "$(awk -v a="$t0" -v b="$t1" -v u="$us" -v s="$ss" 'BEGIN {printf "%.4f %.2f", b - a, u + s}') $kb" >> "$tmp/$name"
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# med <name>: "wall cpu kB", the medians of each column
med() {
  local f=$tmp/$1
  echo "$(cut -d' ' -f1 "$f" | median) $(cut -d' ' -f2 "$f" | median) $(cut -d' ' -f3 "$f" | median)"
}
# both <out> <a> <b>: two commands that together do what one does: times add, memory is the larger
both() { paste -d' ' "$tmp/$2" "$tmp/$3" | awk '{print $1 + $4, $2 + $5, ($3 > $6 ? $3 : $6)}' > "$tmp/$1"; }
row() {  # row <name> <label>
  read -r t c m < <(med "$1")
  printf "| %-52s | %8.3f | %7.2f | %9.1f |\n" "$2" "$t" "$c" "$(awk -v m="$m" 'BEGIN {print m / 1024}')"
}
table_head() { echo; echo "| command (median of $reps) | wall s | cpu s | peak MiB |"; echo "|---|---:|---:|---:|"; }
# ratio of a to b, as "1/78" below 1 (a takes a 78th of b) and "1.45x" above
fmt_ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (a == "nan" || b == "nan" || b + 0 == 0 || a + 0 == 0) { print "n/a"; exit }
    r = a / b
    if (r >= 0.1) printf "%.2fx", r; else printf "1/%.0f", 1 / r }'
}
# "78x faster, 55x less memory": the anchor's wall time and memory over the figure's
faster() {
  read -r t c m < <(med "$1")
  read -r at ac am < <(med "$2")
  printf "%s vs %s: %sx faster, %sx less memory\n" "$3" "$4" "$(awk -v a="$at" -v b="$t" 'BEGIN {r = a / b; printf (r >= 10 ? "%.0f" : "%.2f"), r}')" \
    "$(awk -v a="$am" -v b="$m" 'BEGIN {r = a / b; printf (r >= 10 ? "%.0f" : "%.2f"), r}')"
}
ratios_head() { echo; echo "| figure | anchor | wall | cpu | peak memory |"; echo "|---|---|---:|---:|---:|"; }
# ratio <figure> <anchor> <label> <anchor label> [summary label]: a table row; with a summary
# label it is also kept for the summary at the end
ratio() {
  read -r t c m < <(med "$1")
  read -r at ac am < <(med "$2")
  local line
  line=$(printf "| %s | %s | %s | %s | %s |" "$3" "$4" "$(fmt_ratio "$t" "$at")" "$(fmt_ratio "$c" "$ac")" "$(fmt_ratio "$m" "$am")")
  echo "$line"
  [[ -z ${5:-} ]] || printf "| %s | %s | %s | %s | %s |\n" "$5" "$4" "$(fmt_ratio "$t" "$at")" "$(fmt_ratio "$c" "$ac")" "$(fmt_ratio "$m" "$am")" >> "$work/summary"
}
na_row() { echo "| $1 | $2 | n/a | n/a | n/a |"; [[ -z ${3:-} ]] || echo "| $3 | $2 | n/a | n/a | n/a |" >> "$work/summary"; }
size_of() { du -h --apparent-size "$1" | cut -f1; }
ag_entries() { "$ag" inspect "$@" 2>/dev/null | grep -oE ', [0-9]+ images?' | awk '{s += $2} END {print s + 0}'; }
ag_kernels() { "$ag" inspect --kernels "$@" 2>/dev/null | grep -c '^            kernel ' || true; }
field() { awk -v k="$1" '{for (i = 1; i < NF; ++i) if ($i == k) print $(i + 1)}'; }
fails=0
agree() {  # agree <what> <archguard's count> <floor's count>
  if [[ $2 == "$3" ]]; then echo "$1: archguard $2, floor $3: agree"
  else echo "$1: archguard $2, floor $3: DISAGREE"; fails=$((fails + 1)); fi
}

# ---- the subjects ---------------------------------------------------------------------------
find_lib() {  # the first of the names found in the toolkit's directories
  local n d
  for n in "$@"; do
    for d in "$libdir" /usr/local/cuda/lib; do
      [[ -f $d/$n ]] && { readlink -f "$d/$n"; return 0; }
    done
  done
  return 1
}
site_dirs() {
  ls -d "$venv"/lib/python3*/site-packages 2>/dev/null || true
  python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null || true
}
if [[ $mode == legacy ]]; then
  libs=("${positional[0]:-$libdir/libcublasLt.so.13}")
  [[ -f ${libs[0]} ]] || { echo "$me: no ${libs[0]}" >&2; exit 2; }
elif [[ -n ${LIBS:-} ]]; then
  read -ra libs <<<"$LIBS"
elif [[ $mode == smoke ]]; then
  libs=()
  for n in libcufftw.so.12 libcufftw.so.11 libcupti.so.13 libcupti.so.12; do l=$(find_lib "$n") && libs+=("$l"); done
else
  libs=()
  for n in libcublasLt.so.13 libcublasLt.so.12 libcufft.so.12 libcufft.so.13 libcufft.so.11 libnccl.so.2; do
    l=$(find_lib "$n") && libs+=("$l")
  done
  while read -r sp; do
    for l in "$sp"/nvidia/*/lib/libcublasLt.so.* "$sp"/nvidia/*/lib/libcufft.so.* "$sp"/nvidia/*/lib/libnccl.so.*; do
      [[ -f $l && ! -L $l ]] && libs+=("$(readlink -f "$l")")
    done
  done < <(site_dirs | sort -u)
fi
# each file once
mapfile -t libs < <(printf '%s\n' "${libs[@]}" | awk 'NF && !seen[$0]++')
[[ ${#libs[@]} -gt 0 ]] || missing "no library to read (none of the toolkit's under $libdir; set LIBS)"
# the smoke run's last library has kernels (libcupti's embedded fatbins); a suite's first is the largest
if [[ $mode == smoke ]]; then pick=${libs[-1]}; else pick=${libs[0]}; fi
kernels_lib=${KERNELS_LIB:-$pick}
copy_lib=${COPY_LIB:-$pick}

echo "archguard: $ag ($("$ag" --version 2>/dev/null | head -1))"
[[ -n $old ]] && echo "old:       $old"
echo "cuobjdump: $cuobjdump ($("$cuobjdump" --version | tail -1))"
echo "floor:     ${floor:+bench/floor/fatbin_floor.c, cc -O2}${floor_dec:+; decoding floor with libzstd + liblz4}"
echo "machine:   $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg); runs: $reps (after one warm-up each)"
: > "$work/summary"

# ---- inspect --------------------------------------------------------------------------------
inspect_section() {
  local lib=$1 k=$2 i
  echo
  echo "## inspect: $lib ($(size_of "$lib"))"
  "$ag" inspect "$lib" >/dev/null 2>&1 || true; "$cuobjdump" --list-elf "$lib" >/dev/null 2>&1 || true  # warm the page cache
  # The old binary reads as the new one does: --no-cache where it has one (a results cache hit
  # is no reading of the file).
  local old_args=()
  [[ -n $old ]] && { "$old" inspect "$lib" >/dev/null 2>&1 || true; }
  [[ -n $old ]] && "$old" inspect --no-cache "$lib" >/dev/null 2>&1 && old_args=(--no-cache)
  for ((i = 0; i < reps; ++i)); do
    measure "i$k.ag" "$ag" inspect --no-cache "$lib"  # the reader itself, searching every data section
    measure "i$k.hit" "$ag" inspect "$lib"  # the embedded finds from the results cache (the warm-up kept them)
    [[ -n $old ]] && measure "i$k.old" "$old" inspect "${old_args[@]}" "$lib"
    [[ -n $floor ]] && measure "i$k.floor" "$floor" "$lib"
    measure "i$k.ag1" "$ag" inspect --no-cache --threads 1 "$lib"
    measure "i$k.list" "$ag" inspect --list-like-cuobjdump "$lib"
    measure "i$k.elf" "$cuobjdump" --list-elf "$lib"
    measure "i$k.ptx" "$cuobjdump" --list-ptx "$lib"
    measure "i$k.json" "$ag" inspect --no-cache --json "$lib"
  done
  both "i$k.cu" "i$k.elf" "i$k.ptx"
  table_head
  row "i$k.elf" "cuobjdump --list-elf"
  row "i$k.ptx" "cuobjdump --list-ptx"
  row "i$k.cu" "cuobjdump --list-elf + --list-ptx"
  [[ -n $floor ]] && row "i$k.floor" "floor (bench/floor, 1 thread)"
  row "i$k.ag" "archguard inspect --no-cache (table)"
  row "i$k.hit" "archguard inspect (results cache)"
  [[ -n $old ]] && row "i$k.old" "ARCHGUARD_OLD inspect ${old_args[*]} (table)"
  row "i$k.ag1" "archguard inspect --no-cache --threads 1"
  row "i$k.list" "archguard inspect --list-like-cuobjdump"
  row "i$k.json" "archguard inspect --json"
  local base
  base=$(basename "$lib")
  ratios_head
  ratio "i$k.ag" "i$k.cu" "inspect" "cuobjdump elf + ptx" "inspect $base"
  ratio "i$k.list" "i$k.cu" "inspect --list-like-cuobjdump" "cuobjdump elf + ptx"
  if [[ -n $floor ]]; then
    ratio "i$k.ag" "i$k.floor" "inspect" "floor" "inspect $base"
    ratio "i$k.hit" "i$k.floor" "inspect from the results cache" "floor" "inspect (cache) $base"
    ratio "i$k.ag1" "i$k.floor" "inspect --threads 1" "floor" "inspect --threads 1 $base"
  fi
  if [[ -n $old ]]; then
    ratio "i$k.old" "i$k.cu" "ARCHGUARD_OLD inspect" "cuobjdump elf + ptx"
    ratio "i$k.ag" "i$k.old" "inspect" "ARCHGUARD_OLD inspect"
  fi
  echo
  faster "i$k.ag" "i$k.cu" "inspect (table)" "cuobjdump elf+ptx"
  faster "i$k.list" "i$k.cu" "inspect --list-like-cuobjdump" "cuobjdump elf+ptx"
  [[ -n $old ]] && faster "i$k.old" "i$k.cu" "ARCHGUARD_OLD inspect" "cuobjdump elf+ptx"
  [[ -n $floor ]] && agree "entries" "$(ag_entries "$lib")" "$("$floor" "$lib" | field entries)"
  return 0
}
if has inspect; then
  for ((n = 0; n < ${#libs[@]}; ++n)); do inspect_section "${libs[n]}" "$n"; done
fi

# ---- inspect --kernels ----------------------------------------------------------------------
if has kernels; then
  lib=$kernels_lib
  echo
  echo "## inspect --kernels: $lib ($(size_of "$lib"))"
  "$ag" inspect --kernels "$lib" >/dev/null 2>&1 || true
  for ((i = 0; i < reps; ++i)); do
    measure k.ag "$ag" inspect --kernels "$lib"
    [[ -n $floor_dec ]] && measure k.floor "$floor_dec" "$lib"
    measure k.ag1 "$ag" inspect --kernels --threads 1 "$lib"
    measure k.cu "$cuobjdump" --dump-elf-symbols "$lib"
  done
  table_head
  row k.cu "cuobjdump --dump-elf-symbols"
  [[ -n $floor_dec ]] && row k.floor "decoding floor (zstd + lz4, 1 thread)"
  row k.ag "archguard inspect --kernels"
  row k.ag1 "archguard inspect --kernels --threads 1"
  ratios_head
  ratio k.ag k.cu "inspect --kernels" "cuobjdump --dump-elf-symbols" "inspect --kernels $(basename "$lib")"
  if [[ -n $floor_dec ]]; then
    ratio k.ag k.floor "inspect --kernels" "decoding floor" "inspect --kernels $(basename "$lib")"
    ratio k.ag1 k.floor "inspect --kernels --threads 1" "decoding floor" "inspect --kernels --threads 1 $(basename "$lib")"
    echo
    agree "kernels" "$(ag_kernels "$lib")" "$("$floor_dec" "$lib" | field kernels)"
  else
    echo; echo "no decoding floor (libzstd or liblz4 headers missing: $(tail -n 1 "$work/floor.log")): anchored against cuobjdump only"
  fi
fi

# ---- a directory of copies: check, doctor, and the cache ------------------------------------
no_cache_check=0 no_cache_doctor=0
"$ag" check --help 2>/dev/null | grep -q -- '--no-cache' && no_cache_check=1
"$ag" doctor --help 2>/dev/null | grep -q -- '--no-cache' && no_cache_doctor=1
if has dir || has cache; then
  counts=(1 "$copies")
  [[ $copies == 1 ]] && counts=(1)
  [[ $hundred == 1 ]] && counts+=(100)
  max=${counts[-1]}
  bytes=$(stat -c %s "$copy_lib")
  free_kb=$(df -Pk "$work" | awk 'NR == 2 {print $4}')
  while (( max > 1 && bytes / 1024 * max * 11 / 10 > free_kb )); do  # what does not fit is left out
    echo "$me: $max copies of $(basename "$copy_lib") do not fit in $work ($((free_kb / 1048576)) GiB free): left out" >&2
    unset 'counts[-1]'
    max=${counts[-1]}
  done
  # A pool of distinct copies; the directory of N holds hardlinks to N of them (distinct files:
  # archguard reads a file once per inode, so links to one copy would be read once).
  mkdir -p "$work/pool"
  for ((c = 1; c <= max; ++c)); do cp "$copy_lib" "$work/pool/$(printf 'copy%03d' "$c")-$(basename "$copy_lib")"; done
  for n in "${counts[@]}"; do
    mkdir -p "$work/dir$n"
    ls "$work/pool" | head -n "$n" | while read -r f; do ln "$work/pool/$f" "$work/dir$n/$f"; done
  done
  cc_opt=(--cc 9.0)  # a GPU named: the same work with and without one on the machine
  check_cmd=("$ag" check --no-deps "${cc_opt[@]}")
  doctor_cmd=("$ag" doctor --no-smoke --no-deps "${cc_opt[@]}")
  check_label="archguard check --no-deps --cc 9.0" doctor_label="archguard doctor --no-smoke --no-deps --cc 9.0"
  no_cache_inspect=()
  "$ag" inspect --help 2>/dev/null | grep -q -- '--no-cache' && no_cache_inspect=(--no-cache)
  if [[ $no_cache_check == 1 ]]; then check_cmd+=(--no-cache); check_label+=" --no-cache"; fi
  if [[ $no_cache_doctor == 1 ]]; then doctor_cmd+=(--no-cache); doctor_label+=" --no-cache"; fi
fi
if has dir; then
  for n in "${counts[@]}"; do
    d=$work/dir$n
    files="$n files"; [[ $n == 1 ]] && files="1 file"
    echo
    echo "## check and doctor: a directory of $n $(basename "$copy_lib") ($(size_of "$copy_lib") each, real copies)"
    "${check_cmd[@]}" "$d" >/dev/null 2>&1 || true
    [[ -n $floor ]] && "$floor" "$d"/* >/dev/null
    for ((i = 0; i < reps; ++i)); do
      measure "d$n.check" "${check_cmd[@]}" "$d"
      [[ -n $floor ]] && measure "d$n.floor" "$floor" "$d"/*
      measure "d$n.doctor" "${doctor_cmd[@]}" "$d"
      measure "d$n.kernels" "$ag" inspect --kernels "${no_cache_inspect[@]}" "$d"
    done
    table_head
    [[ -n $floor ]] && row "d$n.floor" "floor on the $files"
    row "d$n.check" "$check_label"
    row "d$n.doctor" "$doctor_label"
    row "d$n.kernels" "archguard inspect --kernels ${no_cache_inspect[*]}"
    ratios_head
    if [[ -n $floor ]]; then
      ratio "d$n.check" "d$n.floor" "check, $files" "floor" "check --no-deps, $files"
      ratio "d$n.doctor" "d$n.floor" "doctor, $files" "floor" "doctor --no-deps, $files"
    fi
    if [[ $n != 1 ]]; then
      ratio "d$n.check" d1.check "check, $n files" "check, 1 file" "check --no-deps, $n files"
      ratio "d$n.doctor" d1.doctor "doctor, $n files" "doctor, 1 file" "doctor --no-deps, $n files"
      ratio "d$n.kernels" d1.kernels "inspect --kernels, $n files" "inspect --kernels, 1 file" "inspect --kernels, $n files"
    fi
    [[ -n $floor ]] && { echo; agree "entries" "$(ag_entries "$d")" "$("$floor" "$d"/* | field entries)"; }
  done
fi
if has cache; then
  n=${counts[-1]}
  d=$work/dir$n
  echo
  echo "## the cache: a second run of the same check and doctor, $n files"
  ratios_head
  for verb in check doctor; do
    if [[ $verb == check ]]; then on=$no_cache_check; cmd=("$ag" check --no-deps "${cc_opt[@]}")
    else on=$no_cache_doctor; cmd=("$ag" doctor --no-smoke --no-deps "${cc_opt[@]}"); fi
    if [[ $on != 1 ]]; then
      na_row "$verb, second run (cache hit)" "$verb --no-cache (not accepted by this binary)" "$verb, cache hit, $n files"
      continue
    fi
    "${cmd[@]}" "$d" >/dev/null 2>&1 || true  # fills the cache
    for ((i = 0; i < reps; ++i)); do
      measure "c.$verb.cold" "${cmd[@]}" --no-cache "$d"
      measure "c.$verb.hit" "${cmd[@]}" "$d"
    done
    ratio "c.$verb.hit" "c.$verb.cold" "$verb, second run (cache hit)" "$verb --no-cache" "$verb, cache hit, $n files"
  done
  echo
  if [[ $no_cache_check == 1 || $no_cache_doctor == 1 ]]; then
    table_head
    for verb in check doctor; do
      [[ -f $tmp/c.$verb.cold ]] || continue
      row "c.$verb.cold" "archguard $verb --no-cache"
      row "c.$verb.hit" "archguard $verb (second run: cache hit)"
    done
  fi
fi

# ---- a wheel --------------------------------------------------------------------------------
if has wheel; then
  wheel=${WHEEL:-}
  if [[ -z $wheel && $fetch == 1 && $mode != smoke ]]; then
    mkdir -p "$cache"
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
      -d "$cache" cupy-cuda12x >&2 || echo "$me: pip download cupy-cuda12x failed: a built zip stands in" >&2
  fi
  [[ -z $wheel && $mode != smoke ]] && wheel=$(ls "$cache"/*.whl 2>/dev/null | head -n 1 || true)
  if [[ -z $wheel ]]; then  # a wheel of one toolkit library, deflated by python's zipfile
    src=$pick
    [[ $mode == smoke ]] || src=$(find_lib libcufft.so.12 libcufft.so.13 libcufft.so.11 || echo "$pick")
    wheel=$work/bench_zip-0.0-py3-none-manylinux2014_x86_64.whl
    python3 - "$wheel" "$src" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    z.write(sys.argv[2], "bench_zip/lib/" + os.path.basename(sys.argv[2]))
    z.writestr("bench_zip-0.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: bench_inspect\nRoot-Is-Purelib: false\nTag: py3-none-manylinux2014_x86_64\n")
PY
    built="built by python zipfile (deflate) from $(basename "$src")"
  fi
  inflate=(python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for i in z.infolist():
    with z.open(i) as f:
        while f.read(1 << 20):
            pass' "$wheel")
  echo
  echo "## wheel: $(basename "$wheel") ($(size_of "$wheel"), ${built:-a real wheel}; $(unzip -Z1 "$wheel" 2>/dev/null | wc -l) members, $(python3 -c 'import sys, zipfile; print(sum(i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist()) >> 20)' "$wheel") MiB inflated)"
  "$ag" inspect "$wheel" >/dev/null 2>&1 || true
  for ((i = 0; i < reps; ++i)); do
    measure w.ag "$ag" inspect "$wheel"
    [[ -n $floor_inflate ]] && measure w.deflate "$floor_inflate" "$wheel"
    measure w.py "${inflate[@]}"
    measure w.unzip sh -c 'exec unzip -p "$1" > /dev/null' sh "$wheel"
  done
  table_head
  [[ -n $floor_inflate ]] && row w.deflate "libdeflate: every member in one shot (one inflate)"
  row w.py "python3 zipfile: read every member (one inflate)"
  row w.unzip "unzip -p > /dev/null (one inflate)"
  row w.ag "archguard inspect"
  ratios_head
  if [[ -n $floor_inflate ]]; then
    ratio w.ag w.deflate "inspect of the wheel" "libdeflate inflate" "inspect of a wheel"
  else
    na_row "inspect of the wheel" "libdeflate inflate (no libdeflate headers: $(tail -n 1 "$work/inflate-floor.log"))" "inspect of a wheel"
  fi
  ratio w.ag w.py "inspect of the wheel" "python3 zipfile inflate" "inspect of a wheel"
  ratio w.ag w.unzip "inspect of the wheel" "unzip -p" "inspect of a wheel"
  echo
  echo "images found in the wheel: $(ag_entries "$wheel")"
fi

# ---- summary --------------------------------------------------------------------------------
if [[ $mode != legacy ]]; then
  echo
  echo "## summary (ratios: the figure's median over its anchor's, same rounds; 1/N = N times less)"
  ratios_head
  cat "$work/summary"
fi
if [[ $fails -gt 0 ]]; then
  echo "$me: $fails count(s) of archguard and the floor disagree" >&2
  exit 1
fi
[[ $mode == smoke ]] && echo "$me --smoke: every section ran, the counts agree"
exit 0
