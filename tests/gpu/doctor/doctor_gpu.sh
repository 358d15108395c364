#!/bin/sh
# archguard doctor on a machine with a GPU: must pass every step that can pass here, and must
# find the deliberately broken sample. Exit 77 (skipped) when there is no driver.
# Usage: doctor_gpu.sh <archguard> [<binary built for a wrong arch>]
set -u
ag=$1 broken=${2:-}
out=$("$ag" doctor --json)
rc=$?
if [ "$rc" -eq 3 ]; then echo "no CUDA driver: skipped"; exit 77; fi
printf '%s\n' "$out"
if [ "$rc" -ne 0 ]; then echo "doctor exited $rc on this GPU machine (expected 0)"; exit 1; fi
python3 - "$out" <<'PY' || exit 1
import json, sys
r = json.loads(sys.argv[1])
smoke = [s for s in r["steps"] if s["name"] == "smoke test"][0]
assert smoke["status"] == "pass", smoke
assert r["timings"] and r["timings"][0]["first_launch_ms"] > 0, r["timings"]
print("doctor: smoke test passed on", ", ".join(d["name"] + " (" + d["cc"] + ")" for d in r["devices"]))
PY
if [ -n "$broken" ] && [ -x "$broken" ]; then
  out=$("$ag" doctor --json --no-smoke "$broken")
  rc=$?
  if [ "$rc" -ne 1 ]; then echo "doctor on $broken exited $rc (expected 1)"; printf '%s\n' "$out"; exit 1; fi
  case "$out" in
    *ag_saxpy*) echo "doctor names ag_saxpy in $broken" ;;
    *) echo "doctor does not name the kernel ag_saxpy:"; printf '%s\n' "$out"; exit 1 ;;
  esac
fi
