#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Real CMake CUDA projects nobody here wrote, with the module added the documented way
# (list(APPEND CMAKE_MODULE_PATH ...) + include(CudaArchGuard) right after the project enables
# CUDA, in a copy of its sdist under the tool dir; the sdist itself is never modified):
#   LightGBM (PyPI sdist): CUDA sources in an OBJECT library, linked into lib_lightgbm.so.
# For each: configure under two policies (an explicit ARCH_POLICY, which must WARN because the
# project sets its own list, and the same with ARCH_POLICY_OVERRIDE=ON, which must win), then
# build the deliverable alone (--target) under one architecture and check that the verify step
# ran on it. Downloads are cached in $ARCHGUARD_TOOLS (default <repo>/.tools)/real-projects.
# Usage: scripts/real-projects.sh [cmake]      Results: a summary on stdout, logs in the cache.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cmake=${1:-cmake}
cache=${ARCHGUARD_TOOLS:-$repo/.tools}/real-projects
mkdir -p "$cache"
arch=${REAL_ARCH:-80}
say() { echo "real-projects: $*"; }

fetch_sdist() {  # <name> <version> -> path of the tarball (cached)
  local tgz
  tgz=$(ls "$cache/$1-$2.tar.gz" 2>/dev/null || true)
  if [ -z "$tgz" ]; then
    # The sdist's address from PyPI's simple index (pip download would build its metadata
    # first); its sha256 from the same link is checked.
    local link url sum
    link=$(curl -fsSL "https://pypi.org/simple/$1/" | grep -o "href=\"[^\"]*/$1-$2\.tar\.gz#sha256=[0-9a-f]*\"" | head -1) || true
    url=${link#href=\"}; url=${url%%#*}; sum=${link##*sha256=}; sum=${sum%\"}
    if [ -n "$url" ] && curl -fsSL "$url" -o "$cache/$1-$2.tar.gz.part" &&
       echo "$sum  $cache/$1-$2.tar.gz.part" | sha256sum -c --quiet; then
      mv "$cache/$1-$2.tar.gz.part" "$cache/$1-$2.tar.gz"
    fi
    tgz=$(ls "$cache/$1-$2.tar.gz" 2>/dev/null || true)
    [ -n "$tgz" ] || { say "cannot download $1 $2 from PyPI"; return 1; }
  fi
  echo "$tgz"
}

# <name> <source dir> <deliverable target> <expected file regex> <extra configure args...>
run_project() {
  local name=$1 src=$2 target=$3 file_re=$4; shift 4
  local b=$cache/build-$name log=$cache/$name.log t0 t1
  : > "$log"
  # 1. explicit policy, the project's own list kept: a WARNING naming it.
  rm -rf "$b"
  if "$cmake" -S "$src" -B "$b" -G Ninja -DARCH_POLICY="$arch" "$@" >>"$log" 2>&1 &&
     grep -q "ARCH_POLICY=$arch is not applied" "$log"; then
    say "$name: explicit ARCH_POLICY=$arch with the project's own list: WARNING given"
  else
    say "$name: FAILED: no warning for the ignored ARCH_POLICY (log: $log)"; return 1
  fi
  # 2. the override wins; build the deliverable alone and see the verify step run on it.
  "$cmake" -S "$src" -B "$b" -DARCH_POLICY_OVERRIDE=ON >>"$log" 2>&1
  t0=$(date +%s)
  if "$cmake" --build "$b" --target "$target" >>"$log" 2>&1 &&
     grep -Eq "target '$target' holds $arch \\(1 file" "$log" && grep -Eq "$file_re" "$log"; then
    t1=$(date +%s)
    say "$name: --target $target built for $arch and verified on its file ($((t1 - t0)) s)"
  else
    say "$name: FAILED: --target $target did not build or was not verified (log: $log)"; return 1
  fi
}

status=0
# --- LightGBM ---------------------------------------------------------------------------------
lgbm_version=${LIGHTGBM_VERSION:-4.7.0}
if tgz=$(fetch_sdist lightgbm "$lgbm_version"); then
  src=$cache/src/lightgbm-$lgbm_version
  rm -rf "$src"; mkdir -p "$src"
  tar -xzf "$tgz" -C "$src" --strip-components=1
  # The documented way: module path + include right after the project enables CUDA.
  sed -i "/enable_language(CUDA)/a\\  list(APPEND CMAKE_MODULE_PATH \"$repo/cmake/Modules\")\\n  include(CudaArchGuard)" "$src/CMakeLists.txt"
  grep -q "include(CudaArchGuard)" "$src/CMakeLists.txt" || { say "lightgbm: no enable_language(CUDA) found"; exit 1; }
  # LightGBM 4.7 with CUDA needs NCCL; CUDA 13 installs ship it under the toolkit root.
  nccl_root=${NCCL_ROOT:-$(dirname "$(dirname "$(command -v nvcc)")")}
  run_project lightgbm "$src" _lightgbm "lib_lightgbm" -DUSE_CUDA=ON -DBUILD_CLI=OFF -DNCCL_ROOT="$nccl_root" -DBUILD_WITH_SHARED_NCCL=ON || status=1
else
  status=1
fi
exit $status
