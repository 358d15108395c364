#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The package verdicts of docs/verdicts.md ("Packages"): downloads public wheels from PyPI (cached
# in $ARCHGUARD_TOOLS, default <repo>/.tools/unit-wheels; about 620 MB, flashinfer-cubin is 460 MB)
# and prints, per wheel and compute capability, `archguard check --cc X --no-deps` as a table row:
# the exit status, the package's verdict and the groups that explain it.
# Usage: bench/packages/package_verdicts.sh ARCHGUARD [WHEEL_SPEC...]   (python3 with pip needed)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
ag=${1:?usage: package_verdicts.sh ARCHGUARD [WHEEL_SPEC...]}; shift
cache=${ARCHGUARD_TOOLS:-$repo/.tools}/unit-wheels
mkdir -p "$cache"
specs=("$@")
[[ ${#specs[@]} -gt 0 ]] || specs=(torchao==0.18.0 flashinfer-cubin==0.6.13 bitsandbytes==0.42.0 bitsandbytes==0.50.2 ctranslate2==4.8.5)
ccs=${CCS:-"7.5 8.0 8.6 8.9 9.0 10.0 10.3 12.0"}
py=${PYTHON:-python3}
for spec in "${specs[@]}"; do
  name=${spec%%==*}; ver=${spec#*==}
  stem=$(echo "$name" | tr - _)
  whl=$(ls "$cache/$stem-$ver-"*.whl 2>/dev/null | head -1 || true)
  if [[ -z $whl ]]; then
    "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$cache" "$spec" >&2 ||
      "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --python-version 3.11 -d "$cache" "$spec" >&2
    whl=$(ls "$cache/$stem-$ver-"*.whl | head -1)
  fi
  for cc in $ccs; do
    "$py" - "$ag" "$whl" "$cc" "$spec" <<'PY'
import json, subprocess, sys
ag, whl, cc, spec = sys.argv[1:]
p = subprocess.run([ag, "check", "--json", "--no-deps", "--cc", cc, whl], capture_output=True, text=True)
dev = json.loads(p.stdout)["devices"][0]
objs = [o for o in dev["objects"] if o["device_code"]]
if dev["packages"]:
    pk = dev["packages"][0]
    why = pk["summary"] + ("; " + " | ".join(pk["groups"]) if pk["groups"] else "")
else:
    why = "; ".join("%s: %s" % (o["object"].rsplit("/", 1)[-1], o["tier"]) for o in objs) or "no device code"
print("| %s | %s | %d | %s |" % (spec, cc, p.returncode, why.replace("|", "/")))
PY
  done
done
