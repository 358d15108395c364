#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Real CMake CUDA projects nobody here wrote, with the module added the documented way
# (list(APPEND CMAKE_MODULE_PATH ...) + include(CudaArchGuard) right after the project enables
# CUDA, in a copy of its sdist under the tool dir; the sdist itself is never modified):
#   lightgbm (LightGBM's PyPI sdist): CUDA sources in an OBJECT library, linked into lib_lightgbm.so.
#   ggml (llama.cpp's ggml as vendored in the llama-cpp-python sdist): the CUDA backend
#     libggml-cuda.so, built in a subdirectory that computes its own list before enable_language.
#   xgboost (its PyPI sdist's cpp_src/): 65 .cu files in the OBJECT library objxgboost, linked into
#     libxgboost.so; the project computes its list *after* enable_language(CUDA), so after the
#     include: the end-of-configure summary must say what each target really builds.
# For each: configure with the project's own list (no ARCH_POLICY: no warning), then under two
# policies (an explicit ARCH_POLICY, which must WARN naming the project's file:line, and the same
# with ARCH_POLICY_OVERRIDE=ON, which must win), then build the deliverable alone (--target)
# under one architecture and check that the verify step ran on it. Downloads are cached in
# $ARCHGUARD_TOOLS (default <repo>/.tools)/real-projects.
# Usage: [REAL_PROJECTS="lightgbm ggml xgboost"] [REAL_CONFIGURE_ONLY=1] scripts/real-projects.sh [cmake]
# Results: a summary on stdout (with wall times), logs in the cache.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cmake=${1:-cmake}
cache=${ARCHGUARD_TOOLS:-$repo/.tools}/real-projects
mkdir -p "$cache"
arch=${REAL_ARCH:-80}
jobs=${REAL_JOBS:-$(nproc)}  # ninja's default is CPUs + 2
say() { echo "real-projects: $*"; }
flat() { tr '\n' ' ' | tr -s ' '; }  # CMake wraps long messages: compare them on one line

fetch_sdist() {  # <name> <version> [<file stem>] -> path of the tarball (cached)
  local tgz stem=${3:-$1}
  tgz=$(ls "$cache/$stem-$2.tar.gz" 2>/dev/null || true)
  if [ -z "$tgz" ]; then
    # The sdist's address from PyPI's simple index (pip download would build its metadata
    # first); its sha256 from the same link is checked.
    local link url sum
    link=$(curl -fsSL "https://pypi.org/simple/$1/" | grep -o "href=\"[^\"]*/$stem-$2\.tar\.gz#sha256=[0-9a-f]*\"" | head -1) || true
    url=${link#href=\"}; url=${url%%#*}; sum=${link##*sha256=}; sum=${sum%\"}
    if [ -n "$url" ] && curl -fsSL "$url" -o "$cache/$stem-$2.tar.gz.part" &&
       echo "$sum  $cache/$stem-$2.tar.gz.part" | sha256sum -c --quiet; then
      mv "$cache/$stem-$2.tar.gz.part" "$cache/$stem-$2.tar.gz"
    fi
    tgz=$(ls "$cache/$stem-$2.tar.gz" 2>/dev/null || true)
    [ -n "$tgz" ] || { say "cannot download $1 $2 from PyPI"; return 1; }
  fi
  echo "$tgz"
}

# <name> <source dir> <deliverable target> <expected file regex> <where regex> <extra configure args...>
# <where regex>: the project's file:line the WARNING of step 2 must name.
run_project() {
  local name=$1 src=$2 target=$3 file_re=$4 where_re=$5; shift 5
  local b=$cache/build-$name log=$cache/$name.log t0 t1
  : > "$log"
  # 1. the project's own list, no ARCH_POLICY: respected, no warning.
  rm -rf "$b"
  t0=$(date +%s)
  if "$cmake" -S "$src" -B "$b" -G Ninja "$@" >>"$log" 2>&1 &&
     grep -q "respecting CMAKE_CUDA_ARCHITECTURES=" "$log" && ! grep -q "is not applied" "$log"; then
    t1=$(date +%s)
    say "$name: the project's own list, no ARCH_POLICY: respected, no warning ($((t1 - t0)) s)"
  else
    say "$name: FAILED: the project's own list was not respected quietly (log: $log)"; return 1
  fi
  # 2. explicit policy, the project's own list kept: a WARNING naming the project's file:line.
  local mark
  mark=$(wc -l < "$log")
  if "$cmake" -S "$src" -B "$b" -DARCH_POLICY="$arch" >>"$log" 2>&1 &&
     tail -n +"$mark" "$log" | flat | grep -Eq "ARCH_POLICY=$arch is not applied: .*$where_re"; then
    say "$name: explicit ARCH_POLICY=$arch with the project's own list: WARNING naming the places: $(tail -n +"$mark" "$log" | flat | grep -Eo "set at [^)]*")"
  else
    say "$name: FAILED: no warning naming $where_re for the ignored ARCH_POLICY (log: $log)"; return 1
  fi
  # 3. the override wins; build the deliverable alone and see the verify step run on it.
  mark=$(wc -l < "$log")
  if "$cmake" -S "$src" -B "$b" -DARCH_POLICY_OVERRIDE=ON >>"$log" 2>&1 &&
     tail -n +"$mark" "$log" | grep -q "ARCH_POLICY=$arch (ARCH_POLICY_OVERRIDE=ON: replaces"; then
    say "$name: ARCH_POLICY=$arch with ARCH_POLICY_OVERRIDE=ON: the policy wins"
  else
    say "$name: FAILED: ARCH_POLICY_OVERRIDE=ON did not make the policy win (log: $log)"; return 1
  fi
  build_verified "$name" "$b" "$target" "$file_re" "$log"
}

# <name> <build dir> <deliverable target> <expected file regex> <log>: build the deliverable alone
# and see the verify step run on its file, for $arch only.
build_verified() {
  local name=$1 b=$2 target=$3 file_re=$4 log=$5 t0 t1
  if [ "${REAL_CONFIGURE_ONLY:-0}" = 1 ]; then
    say "$name: --target $target not built (REAL_CONFIGURE_ONLY=1)"; return 0
  fi
  t0=$(date +%s)
  if nice -n "${REAL_NICE:-19}" "$cmake" --build "$b" --parallel "$jobs" --target "$target" >>"$log" 2>&1 &&
     grep -Eq "target '$target' holds $arch \\(1 file" "$log" && grep -Eq "$file_re" "$log"; then
    t1=$(date +%s)
    say "$name: --target $target built for $arch and verified on its file ($((t1 - t0)) s wall)"
  else
    say "$name: FAILED: --target $target did not build or was not verified (log: $log)"; return 1
  fi
}

# <name> <source dir> <deliverable target> <expected file regex> <where regex> <extra configure args...>
# For a project that sets its list *after* include(CudaArchGuard) (xgboost computes it in a
# function called after enable_language(CUDA)): without ARCH_POLICY and with an explicit one, the
# end-of-configure summary must report the list each target really builds and where it was
# changed, and warn; with ARCH_POLICY_OVERRIDE=ON the policy must replace it on every target.
run_project_after() {
  local name=$1 src=$2 target=$3 file_re=$4 where_re=$5; shift 5
  local b=$cache/build-$name log=$cache/$name.log mark built
  : > "$log"
  rm -rf "$b"
  if "$cmake" -S "$src" -B "$b" -G Ninja "$@" >>"$log" 2>&1 &&
     built=$(flat < "$log" | grep -Eo "built, per target: .* $target: [^ ]+ \\(CMAKE_CUDA_ARCHITECTURES changed after include\\(CudaArchGuard\\), at $where_re") &&
     flat < "$log" | grep -Eq "the project changes CMAKE_CUDA_ARCHITECTURES after include\\(CudaArchGuard\\) \\(at $where_re"; then
    say "$name: the project's list, set after the include: the summary names it per target, with a WARNING: ${built##*$target: }"
  else
    say "$name: FAILED: the summary did not name the list set after the include (log: $log)"; return 1
  fi
  mark=$(wc -l < "$log")
  if "$cmake" -S "$src" -B "$b" -DARCH_POLICY="$arch" >>"$log" 2>&1 &&
     tail -n +"$mark" "$log" | flat | grep -Eq "build that list, not ARCH_POLICY=$arch's $arch "; then
    say "$name: explicit ARCH_POLICY=$arch: WARNING that $target builds the project's list instead"
  else
    say "$name: FAILED: no warning that ARCH_POLICY=$arch is not what $target builds (log: $log)"; return 1
  fi
  mark=$(wc -l < "$log")
  if "$cmake" -S "$src" -B "$b" -DARCH_POLICY_OVERRIDE=ON >>"$log" 2>&1 &&
     tail -n +"$mark" "$log" | flat | grep -Eq " $target: $arch \\(ARCH_POLICY_OVERRIDE=ON, in place of "; then
    say "$name: ARCH_POLICY=$arch with ARCH_POLICY_OVERRIDE=ON: the summary says $target builds $arch"
  else
    say "$name: FAILED: ARCH_POLICY_OVERRIDE=ON did not make the policy win on $target (log: $log)"; return 1
  fi
  build_verified "$name" "$b" "$target" "$file_re" "$log"
}

# <name> <build dir> <deliverable target> <object path> <expected message regex>
# The failing case: one object of the deliverable compiled for 75 instead of $arch, as a source
# file with its own -gencode options would be. Its FLAGS in the generated build.ninja are
# edited, so ninja recompiles it (the command changed) and relinks the deliverable; the verify
# step must stop the build naming that object's translation unit. A reconfigure then
# regenerates build.ninja and the next build puts the object back.
break_one() {
  local name=$1 b=$2 target=$3 obj=$4 msg_re=$5 log=$cache/$1-break.log t0 t1
  local from="compute_$arch,code=[compute_$arch,sm_$arch]" to="compute_75,code=[compute_75,sm_75]"
  : > "$log"
  awk -v obj="build $obj:" -v from="$from" -v to="$to" '
    index($0, obj) == 1 { inside = 1 }
    inside && /^$/ { inside = 0 }
    inside && /^  FLAGS = / { n = index($0, from); if (n) { $0 = substr($0, 1, n - 1) to substr($0, n + length(from)); done = 1 } }
    { print }
    END { if (!done) exit 1 }' "$b/build.ninja" > "$b/build.ninja.broken" ||
    { say "$name: FAILED: no FLAGS with $from for $obj in $b/build.ninja"; return 1; }
  mv "$b/build.ninja.broken" "$b/build.ninja"
  t0=$(date +%s)
  if nice -n "${REAL_NICE:-19}" "$cmake" --build "$b" --parallel "$jobs" --target "$target" >>"$log" 2>&1; then
    say "$name: FAILED: --target $target built with $obj compiled for 75 only (log: $log)"; return 1
  fi
  t1=$(date +%s)
  if ! flat < "$log" | grep -Eq "$msg_re"; then
    say "$name: FAILED: the build failed, but not naming $obj at the verify step (log: $log)"; return 1
  fi
  say "$name: $obj built for 75 only: the verify step of $target stops the build, naming it ($((t1 - t0)) s wall)"
  # Regenerate build.ninja and rebuild: the object is compiled for $arch again and the build passes.
  if ! { "$cmake" "$b" && nice -n "${REAL_NICE:-19}" "$cmake" --build "$b" --parallel "$jobs" --target "$target"; } >>"$log" 2>&1; then
    say "$name: FAILED: rebuilding $target after the failing case (log: $log)"; return 1
  fi
}

# unpack_sdist <name> <version> [<file stem>]: src, the sdist (fetch_sdist) unpacked afresh into
# $cache/src/<name>-<version>; fails when it cannot be fetched, exits when it cannot be unpacked.
unpack_sdist() {
  local tgz
  tgz=$(fetch_sdist "$@") || return 1
  src=$cache/src/$1-$2
  { rm -rf "$src" && mkdir -p "$src" && tar -xzf "$tgz" -C "$src" --strip-components=1; } || exit 1
}
# add_module <name> <CMakeLists.txt> <sed address> <indent> [<where>]: the module path and
# include(CudaArchGuard) inserted (indented) after the line the address finds, which enables CUDA;
# without one, says "<name>: no enable_language(CUDA) found<where>" and exits.
add_module() {
  sed -i "$3a\\$4list(APPEND CMAKE_MODULE_PATH \"$repo/cmake/Modules\")\\n$4include(CudaArchGuard)" "$2"
  grep -q "include(CudaArchGuard)" "$2" || { say "$1: no enable_language(CUDA) found${5:-}"; exit 1; }
}

want() { case " ${REAL_PROJECTS:-lightgbm ggml xgboost} " in *" $1 "*) return 0;; esac; return 1; }

status=0
# --- LightGBM ---------------------------------------------------------------------------------
lgbm_version=${LIGHTGBM_VERSION:-4.7.0}
if ! want lightgbm; then
  :
elif unpack_sdist lightgbm "$lgbm_version"; then
  # The documented way: module path + include right after the project enables CUDA.
  add_module lightgbm "$src/CMakeLists.txt" "/enable_language(CUDA)/" "  "
  # LightGBM 4.7 with CUDA needs NCCL; CUDA 13 installs ship it under the toolkit root.
  nccl_root=${NCCL_ROOT:-$(dirname "$(dirname "$(command -v nvcc)")")}
  run_project lightgbm "$src" _lightgbm "lib_lightgbm" "cmake/Utils\.cmake:[0-9]+" -DUSE_CUDA=ON -DBUILD_CLI=OFF -DNCCL_ROOT="$nccl_root" -DBUILD_WITH_SHARED_NCCL=ON || status=1
else
  status=1
fi
# --- ggml (llama.cpp, vendored in llama-cpp-python) -------------------------------------------
llama_version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
if ! want ggml; then
  :
elif unpack_sdist llama-cpp-python "$llama_version" llama_cpp_python; then
  # ggml-cuda's CMakeLists.txt computes its list when CMAKE_CUDA_ARCHITECTURES is not defined,
  # then enables CUDA: the module goes right after that.
  cu=$src/vendor/llama.cpp/ggml/src/ggml-cuda/CMakeLists.txt
  add_module ggml "$cu" "/^ *enable_language(CUDA)/" "    " " in $cu"
  # The fewest CUDA options: no FlashAttention kernels, no NCCL, no CUDA graphs, no -march=native
  # (GGML_NATIVE would also ask for the build host's GPUs); the llava/mtmd library is not needed.
  if ! run_project ggml "$src" ggml-cuda "libggml-cuda\\.so" "ggml/src/ggml-cuda/CMakeLists\\.txt:[0-9]+" \
    -DGGML_CUDA=ON -DGGML_NATIVE=OFF -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_GRAPHS=OFF \
    -DLLAVA_BUILD=OFF; then
    status=1
  elif [ "${REAL_BREAK:-1}" = 1 ]; then
    break_one ggml "$cache/build-ggml" ggml-cuda vendor/llama.cpp/ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/acc.cu.o \
      "target 'ggml-cuda' does not hold the architectures it must.*libggml-cuda\\.so[^ ]*: translation unit [^ ]*acc\\.cu \\(fatbin [0-9]+\\) has no SASS for sm_$arch" ||
      status=1
  fi
else
  status=1
fi
# --- xgboost ----------------------------------------------------------------------------------
xgb_version=${XGBOOST_VERSION:-3.2.0}
if ! want xgboost; then
  :
elif unpack_sdist xgboost "$xgb_version"; then
  # The PyPI sdist carries the C++ project in cpp_src/; its CMakeLists.txt enables CUDA, then
  # computes CMAKE_CUDA_ARCHITECTURES (compute_cmake_cuda_archs in cmake/Utils.cmake).
  top=$src/cpp_src/CMakeLists.txt
  add_module xgboost "$top" "/^ *enable_language(CUDA)/" "  " " in $top"
  run_project_after xgboost "$src/cpp_src" xgboost "libxgboost\\.so" "cmake/Utils\\.cmake:[0-9]+" -DUSE_CUDA=ON || status=1
else
  status=1
fi
exit $status
