#!/bin/sh
# archguard doctor on a machine without a CUDA driver: it must not crash, must say so plainly,
# must still run steps 2-4, and must exit 3 (tools/archguard/cli.hpp).
set -u
ag=$1
out=$("$ag" doctor --json)
rc=$?
if [ "$rc" -ne 3 ]; then echo "expected exit 3 without a driver, got $rc"; echo "$out"; exit 1; fi
for want in '"driver_found":false' '"name":"versions"' '"name":"environment"' '"name":"binaries"' \
            '"no cuda driver found' '"exit_code":3'; do
  case "$out" in
    *"$want"*) ;;
    *) echo "missing $want in:"; echo "$out"; exit 1 ;;
  esac
done
text=$("$ag" doctor)
rc=$?
if [ "$rc" -ne 3 ]; then echo "expected exit 3 from the table form, got $rc"; exit 1; fi
case "$text" in
  *"no CUDA driver found"*) ;;
  *) echo "the table does not say that no driver was found:"; echo "$text"; exit 1 ;;
esac
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || { echo "the node report is not one line (srun interleaves lines of several nodes)"; exit 1; }
echo "doctor without a driver: exit 3, steps 2-4 ran, one line of JSON"
