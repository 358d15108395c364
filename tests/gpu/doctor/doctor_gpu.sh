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

# CUDA_FORCE_PTX_JIT=1: the smoke fatbin carries the oldest PTX, so the smoke test still passes
# (through a JIT), and nothing tells the user to update the driver.
out=$(CUDA_FORCE_PTX_JIT=1 "$ag" doctor --json)
rc=$?
python3 - "$out" "$rc" <<'PY' || exit 1
import json, sys
r, rc = json.loads(sys.argv[1]), int(sys.argv[2])
smoke = [s for s in r["steps"] if s["name"] == "smoke test"][0]
assert smoke["status"] == "pass", smoke
assert rc != 1, f"doctor under CUDA_FORCE_PTX_JIT=1 exited {rc}"
assert "compute_" in r["timings"][0]["image"], r["timings"]
assert not any("driver" in f["text"] and "update" in f["text"] for f in r["fixes"]), r["fixes"]
print("doctor: smoke test passes under CUDA_FORCE_PTX_JIT=1, image", r["timings"][0]["image"])
PY

# A CUDA_VISIBLE_DEVICES that names no GPU: steps 1 and 4 both fail on it, the smoke test is
# skipped, the fix is to unset it.
out=$(CUDA_VISIBLE_DEVICES=bogus "$ag" doctor --json)
rc=$?
python3 - "$out" "$rc" <<'PY' || exit 1
import json, sys
r, rc = json.loads(sys.argv[1]), int(sys.argv[2])
status = {s["number"]: s["status"] for s in r["steps"]}
assert rc == 1 and status[1] == "fail" and status[4] == "fail", (rc, status)
assert any("CUDA_VISIBLE_DEVICES" in f["text"] for f in r["fixes"]), r["fixes"]
print("doctor: CUDA_VISIBLE_DEVICES=bogus fails in steps 1 and 4")
PY
