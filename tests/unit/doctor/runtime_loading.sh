#!/bin/sh
# archguard doctor on a program that dlopen()s: static analysis cannot see what it loads, so the
# summary says so and names `archguard run`, while the exit code and the verdict stay those of a
# program that loads nothing (a note must not turn a working install into a problem).
# Usage: runtime_loading.sh <archguard> <dlopen program> <plain program> [<fake libcuda>]
# With the fake libcuda (tests/unit/device/fake_libcuda.cpp, one cc 9.0 device) nothing else is
# wrong on any machine, so the summary line itself is checked.
set -u
ag=$1 loader=$2 plain=$3 fake=${4:-}
if [ -n "$fake" ]; then
  ARCHGUARD_LIBCUDA=$fake FAKE_CUDA_CC=9.0
  export ARCHGUARD_LIBCUDA FAKE_CUDA_CC
fi
for f in "$loader" "$plain"; do
  if [ ! -x "$f" ]; then echo "fixture $f is missing (built with test_doctor)"; exit 1; fi
done
out_loader=$("$ag" doctor --no-smoke "$loader"); rc_loader=$?
out_plain=$("$ag" doctor --no-smoke "$plain"); rc_plain=$?
if [ "$rc_loader" -ne "$rc_plain" ]; then
  echo "exit code $rc_loader for the dlopen program, $rc_plain for the plain one"; echo "$out_loader"; exit 1
fi
verdict() { printf '%s\n' "$1" | grep '^verdict:'; }
if [ "$(verdict "$out_loader")" != "$(verdict "$out_plain")" ]; then
  echo "the verdict differs:"; verdict "$out_loader"; verdict "$out_plain"; exit 1
fi
# Where the plain program's report ends in "nothing to fix", this one says what it did not see.
if [ -n "$fake" ]; then
  case "$out_plain" in
    *"nothing to fix"*) ;;
    *) echo "with the fake driver the plain program's report should end in nothing to fix:"; echo "$out_plain"; exit 1 ;;
  esac
fi
case "$out_plain" in
  *"nothing to fix"*)
    case "$out_loader" in
      *"nothing to fix in what the files show; $loader loads device code at run time: run \`archguard run -- $loader [its arguments]\` to watch it"*) ;;
      *) echo "the summary does not name archguard run:"; echo "$out_loader"; exit 1 ;;
    esac ;;
esac
case "$out_loader" in
  *"imports dlopen: device code it loads at run time is not judged here; run \`archguard run -- $loader [its arguments]\`"*) ;;
  *) echo "step 3 does not say what it cannot see:"; echo "$out_loader"; exit 1 ;;
esac
case "$out_plain" in
  *"archguard run"*) echo "the plain program is said to load code at run time:"; echo "$out_plain"; exit 1 ;;
esac
json=$("$ag" doctor --no-smoke --json "$loader"); rc_json=$?
if [ "$rc_json" -ne "$rc_loader" ]; then echo "--json exits $rc_json, the table $rc_loader"; exit 1; fi
for want in '"runtime_loading":[' '"imports":[' '"dlopen"' "\"command\":\"archguard run -- $loader [its arguments]\""; do
  case "$json" in
    *"$want"*) ;;
    *) echo "missing $want in:"; echo "$json"; exit 1 ;;
  esac
done
json_plain=$("$ag" doctor --no-smoke --json "$plain")
case "$json_plain" in
  *'"runtime_loading":[]'*) ;;
  *) echo "the plain program has runtime_loading entries:"; echo "$json_plain"; exit 1 ;;
esac
echo "doctor on a dlopen program: exit $rc_loader as for a plain one, names archguard run"
