#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Kubernetes manifests of deploy/kubernetes, validated offline and strictly (unknown fields
# rejected) against the API schema of several Kubernetes releases with kubernetes-validate (PyPI:
# it carries the schemas). The GPU Feature Discovery test data is validated as v1 Node objects
# too, so that the label reader is tested on documents of the real format. The validator is
# installed once into .tools/k8s-venv; skips (77) when it cannot be installed (offline).
# Usage: validate_kubernetes.sh <source dir>
set -uo pipefail
src="$1"
venv="$src/.tools/k8s-venv"
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  python3 -m venv "$venv" >/dev/null 2>&1 || { echo "SKIP: no python3 venv"; exit 77; }
  "$venv/bin/pip" install -q --disable-pip-version-check --cache-dir "$src/.tools/pip-cache" "kubernetes-validate==1.37.0" >/dev/null 2>&1 \
    || { rm -rf "$venv"; echo "SKIP: kubernetes-validate cannot be installed (offline?)"; exit 77; }
fi
kv="$venv/bin/kubernetes-validate"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0
for version in 1.29.0 1.33.0 1.37.0; do
  for f in "$src"/deploy/kubernetes/*.yaml; do
    if out=$("$kv" --strict -k "$version" "$f" 2>&1) && ! grep -q "WARN\|ERROR\|INVALID" <<<"$out"; then
      echo "ok: $(basename "$f") is valid for Kubernetes $version"
    else
      echo "FAIL: $(basename "$f") for Kubernetes $version:"; echo "$out"; fails=$((fails + 1))
    fi
  done
done
# The kubectl get nodes -o json fixture: each item a valid v1 Node.
python3 - "$src/tests/data/fleet/kubernetes/nodes.json" "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["kind"] == "List" and doc["apiVersion"] == "v1"
for i, item in enumerate(doc["items"]):
    json.dump(item, open(f"{sys.argv[2]}/node-{i}.json", "w"))
PY
for f in "$tmp"/node-*.json; do
  if out=$("$kv" --strict "$f" 2>&1) && ! grep -q "WARN\|ERROR\|INVALID" <<<"$out"; then echo "ok: fixture $(basename "$f") is a valid v1 Node"
  else echo "FAIL: fixture $(basename "$f"):"; echo "$out"; fails=$((fails + 1)); fi
done
# The node-report DaemonSet must select the nodes GPU Feature Discovery labels and tolerate the GPU taint.
grep -q 'nvidia.com/gpu.present: "true"' "$src/deploy/kubernetes/node-report-daemonset.yaml" && grep -q "key: nvidia.com/gpu" "$src/deploy/kubernetes/node-report-daemonset.yaml" \
  && echo "ok: the DaemonSet selects GPU nodes and tolerates nvidia.com/gpu" || { echo "FAIL: selector or toleration"; fails=$((fails + 1)); }
[ $fails -eq 0 ] && echo "validate_kubernetes: all passed" || { echo "validate_kubernetes: $fails failed"; exit 1; }
