#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# archguard-verify (the module's dependency-free verify tool) gives archguard verify's verdict:
# the same exit code and the same findings on every nvcc-built fixture, under requirements that
# pass and that fail, and on a static library of them (ar); the same canonical form of every
# token list of the shared corpus (arch normalize, which the CMake module asks for nvcc flag
# syntax); and a clear error, not a crash, on inputs that are not files. Skips (77) without the
# fixtures.
set -u
archguard=${1:?archguard}; verifier=${2:?archguard-verify}; fixtures=${3:?fixture dir}; corpus=${4:?tokens corpus}
fail=0
# arch normalize: output and exit code, line by line of the corpus.
normalized=0
while IFS='|' read -r dialect input _; do
  [[ -z $dialect || $dialect == \#* ]] && continue
  for format in cmake codes gencode torch tf; do
    a=$("$archguard" arch normalize --format "$format" "$input" 2>&1); ra=$?
    b=$("$verifier" arch normalize --format "$format" "$input" 2>&1); rb=$?
    a=${a#archguard: }; b=${b#archguard-verify: }
    if [ $ra -ne $rb ] || [ "$a" != "$b" ]; then
      echo "DISAGREE: arch normalize --format $format '$input': archguard exit $ra '$a', archguard-verify exit $rb '$b'"
      fail=1
    else
      normalized=$((normalized + 1))
    fi
  done
done < "$corpus"
echo "$normalized token lists normalized alike (5 formats)"
[ $normalized -gt 250 ] || { echo "only $normalized agreeing answers from the corpus"; exit 1; }
# Not a file: exit 2 with the path and why (it used to abort on a directory).
for bad in "$fixtures" /nonexistent/archguard-input /dev/null; do
  out=$("$verifier" "$bad" --require 80-real 2>&1); rc=$?
  if [ $rc -ne 2 ] || ! grep -qF "archguard-verify: error: $bad: " <<<"$out"; then
    echo "BAD INPUT: archguard-verify $bad: exit $rc: $out"
    fail=1
  fi
done
[ -f "$fixtures/plain.o" ] || { echo "no fixtures in $fixtures"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ar rcs "$tmp/libmixed.a" "$fixtures/plain.o" "$fixtures/ptxonly.o" "$fixtures/specific.o"
files=()
for f in "$fixtures"/*.o "$fixtures"/*.so "$fixtures"/*.exe "$tmp/libmixed.a"; do [ -f "$f" ] && files+=("$f"); done
checked=0; failing=0
for f in "${files[@]}"; do
  for req in "80-real" "80-real;90" "90-real" "75-virtual" "80-real;90-real;100-real" "90a-real"; do
    for ptx in "" none highest; do
      args=(verify "$f" --require "$req"); [ -n "$ptx" ] && args+=(--ptx "$ptx")
      # The verifier decodes no compressed payload, so it names no kernels of compressed images
      # (docs/policy.md): the findings are compared without the kernel list archguard adds.
      # A kernel-less fatbin is known as such only once decoded: its count is left out too.
      norm() { sed -E -e 's/; kernels: .*; (add |enable )/; \1/' -e 's/, [0-9]+ without kernels$//'; }
      a=$("$archguard" "${args[@]}" -q 2>/dev/null); ra=$?; a=$(norm <<<"$a")
      b=$("$verifier" "${args[@]}" -q 2>/dev/null); rb=$?; b=$(norm <<<"$b")
      checked=$((checked + 1)); [ $ra -eq 1 ] && failing=$((failing + 1))
      if [ $ra -ne $rb ] || [ "$a" != "$b" ]; then
        echo "DISAGREE: ${args[*]}: archguard exit $ra, archguard-verify exit $rb"
        diff <(echo "$a") <(echo "$b") | head -5
        fail=1
      fi
    done
  done
done
echo "$checked verdicts compared on ${#files[@]} files ($failing failing ones)"
# A comparison that only ever passes proves nothing.
[ $failing -gt 0 ] || { echo "no failing verdict among the cases"; exit 1; }
exit $fail
