#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The test suite's one skip convention for commands (docs/testing.md): checks what a test needs
# and, when something is missing, prints "SKIPPED: <what is missing>" and exits 77, the code
# every test registers as CTest's SKIP_RETURN_CODE; otherwise it runs the test in its place.
# It stands in front of `cmake -P` tests (a CMake script cannot choose its exit code before
# CMake 3.29) and of tests whose subject is found, or not, at configure time: such a test is
# registered either way and reports "Skipped" instead of vanishing from the list.
#
# Usage: require.sh [--exe LABEL PATH]... [--file LABEL PATH]... [--cmd NAME[,NAME...]]...
#                   [--hint TEXT] -- COMMAND [ARG...]
#   --exe   LABEL PATH   PATH must be an executable file; an empty PATH or <VAR>-NOTFOUND (not
#                        found when CMake configured the tests) is missing too
#   --file  LABEL PATH   PATH must exist (file or directory)
#   --cmd   NAMES        one of the comma-separated programs must be on PATH
#   --hint  TEXT         appended to the SKIPPED line (how to get what is missing)
set -u
missing=() hint=""
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --exe)  [[ $# -ge 3 ]] || { echo "require.sh: --exe needs LABEL and PATH" >&2; exit 2; }
            if [[ -z $3 || $3 == *-NOTFOUND ]]; then missing+=("$2 (not found when CMake configured the tests)")
            elif [[ ! -f $3 || ! -x $3 ]]; then missing+=("$2 ($3)"); fi
            shift 3 ;;
    --file) [[ $# -ge 3 ]] || { echo "require.sh: --file needs LABEL and PATH" >&2; exit 2; }
            [[ -n $3 && -e $3 ]] || missing+=("$2 (${3:-not found when CMake configured the tests})")
            shift 3 ;;
    --cmd)  [[ $# -ge 2 ]] || { echo "require.sh: --cmd needs NAMES" >&2; exit 2; }
            found=0
            IFS=, read -ra names <<<"$2"
            for n in "${names[@]}"; do command -v "$n" >/dev/null 2>&1 && found=1; done
            [[ $found == 1 ]] || missing+=("${2//,/ or } on PATH")
            shift 2 ;;
    --hint) [[ $# -ge 2 ]] || { echo "require.sh: --hint needs TEXT" >&2; exit 2; }
            hint=$2; shift 2 ;;
    *)      echo "require.sh: unknown option '$1' (expected --exe, --file, --cmd, --hint or --)" >&2; exit 2 ;;
  esac
done
[[ ${1:-} == -- && $# -ge 2 ]] || { echo "require.sh: no command after --" >&2; exit 2; }
shift
if [[ ${#missing[@]} -gt 0 ]]; then
  line="SKIPPED: missing $(printf '%s, ' "${missing[@]}")"
  line=${line%, }
  [[ -n $hint ]] && line+="; $hint"
  echo "$line"
  exit 77
fi
exec "$@"
