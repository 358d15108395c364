#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Benchmarks for the CMake module (method and figures: docs/benchmarks-cmake.md).
#  1. configure time of a small CUDA project: plain CMake with the same architecture list as the
#     module's (-DCMAKE_CUDA_ARCHITECTURES=<list>), include(CudaArchGuard) with the tool, and
#     find_package(CudaArchGuard) from an install prefix; first configure (fresh build dir) and
#     re-configure, interleaved in the same run (plain, include, find_package, plain, ...), medians,
#     overheads and ratios against plain;
#  1b. include(CudaArchGuard) without the tool: the first fresh build tree builds archguard-verify
#     into the per-user cache (a fresh XDG_CACHE_HOME), a second fresh tree must not;
#  2. wall time of an all-major build of a handful of kernels: the module's explicit list with
#     nvcc --threads against CMAKE_CUDA_ARCHITECTURES=all-major, interleaved, medians.
# Usage: bench/bench_configure.sh [runs (default 7)] [build runs (default 3)]
# Env: CMAKE (default cmake), JOBS (default: the number of CPUs), NVCC (default nvcc),
#      BUILD (the archguard build tree to install from, default build/default), PREFIX (an install
#      prefix to use instead), ONLY=configure (sections 1 and 1b alone).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-7}; bruns=${2:-3}; cmake=${CMAKE:-cmake}; jobs=${JOBS:-$(nproc)}; nvcc=${NVCC:-nvcc}
work=$(mktemp -d /tmp/cag-bench.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

make_project() {  # <dir> <how: plain|include|find_package> <kernels>
  local d=$1 how=$2 n=$3
  mkdir -p "$d"
  {
    echo 'cmake_minimum_required(VERSION 3.18)'
    echo 'project(bench LANGUAGES CXX CUDA)'
    case $how in
      include) echo "list(APPEND CMAKE_MODULE_PATH \"$here/cmake/Modules\")"; echo 'include(CudaArchGuard)' ;;
      find_package) echo 'find_package(CudaArchGuard REQUIRED)' ;;
    esac
    printf 'add_executable(app'
    for i in $(seq 1 "$n"); do printf ' k%d.cu' "$i"; done
    echo ' main.cu)'
  } > "$d/CMakeLists.txt"
  for i in $(seq 1 "$n"); do
    cat > "$d/k$i.cu" <<CU
__global__ void saxpy$i(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < 32; ++k) if (i < n) y[i] = a * x[i] + y[i] * ${i}.0f + k;
}
__global__ void reduce$i(const float* x, float* out, int n) {
  __shared__ float s[256];
  int t = threadIdx.x; float v = 0.f;
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) v += x[i] * ${i}.0f;
  s[t] = v; __syncthreads();
  for (int w = 128; w > 0; w >>= 1) { if (t < w) s[t] += s[t + w]; __syncthreads(); }
  if (t == 0) atomicAdd(out, s[0]);
}
CU
  done
  echo 'int main() { return 0; }' > "$d/main.cu"
}

now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", a - b }'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", a / b }'; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# ---- 1. configure time --------------------------------------------------------------------------
prefix=${PREFIX:-}
if [ -z "$prefix" ]; then
  prefix="$work/prefix"
  "$cmake" --install "${BUILD:-$here/build/default}" --prefix "$prefix" >/dev/null
fi
tool="$prefix/bin/archguard"
[ -x "$tool" ] || { echo "bench_configure: no archguard tool in $prefix/bin" >&2; exit 2; }
# The same list for plain CMake: what the module makes of all-major with this nvcc.
list=$("$cmake" -DARCH_POLICY=all-major -DFORMAT=cmake -DQUIET=ON "-DARCHGUARD=$tool" \
       -P "$here/cmake/Modules/CudaArchGuardPolicy.cmake")
export XDG_CACHE_HOME="$work/xdg"  # nothing from the user's own caches
make_project "$work/plain" plain 2
make_project "$work/include" include 2
make_project "$work/find_package" find_package 2
declare -A opts=(
  [plain]="-DCMAKE_CUDA_ARCHITECTURES=$list"
  [include]="-DARCH_POLICY=all-major -DCudaArchGuard_EXECUTABLE=$tool"
  [find_package]="-DARCH_POLICY=all-major -DCMAKE_PREFIX_PATH=$prefix"
)
variants="plain include find_package"
for v in $variants; do : > "$work/first-$v"; : > "$work/re-$v"; done
for r in $(seq 1 "$runs"); do
  for v in $variants; do
    rm -rf "$work/b-$v"
    # shellcheck disable=SC2086  # the options are separate words
    t0=$(now); "$cmake" -S "$work/$v" -B "$work/b-$v" -G Ninja ${opts[$v]} >/dev/null 2>&1; t1=$(now)
    sub "$t1" "$t0" >> "$work/first-$v"
    t0=$(now); "$cmake" -S "$work/$v" -B "$work/b-$v" >/dev/null 2>&1; t1=$(now)
    sub "$t1" "$t0" >> "$work/re-$v"
  done
done
echo "configure ($runs runs interleaved, medians, seconds; $("$cmake" --version | head -1); load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "  plain CMake gets the module's list: $list"
fp=$(median < "$work/first-plain"); rp=$(median < "$work/re-plain")
printf '  %-13s first %.3f  re-configure %.3f\n' plain "$fp" "$rp"
for v in include find_package; do
  f=$(median < "$work/first-$v"); re=$(median < "$work/re-$v")
  printf '  %-13s first %.3f (%+.3f, %.2fx; goal <= +0.300)  re-configure %.3f (%+.3f, %.2fx; goal <= +0.050)\n' \
    "$v" "$f" "$(sub "$f" "$fp")" "$(div "$f" "$fp")" "$re" "$(sub "$re" "$rp")" "$(div "$re" "$rp")"
done

# ---- 1b. the verifier of a plain include() without the tool, per-user cache -----------------------
make_project "$work/notool" include 2
for t in 1 2; do
  t0=$(now)
  "$cmake" -S "$work/notool" -B "$work/nt-$t" -G Ninja -DARCH_POLICY=all-major \
           -DCudaArchGuard_CUOBJDUMP=CudaArchGuard_CUOBJDUMP-NOTFOUND > "$work/nt-$t.log" 2>&1
  t1=$(now)
  built=no; grep -q 'building the verify tool archguard-verify' "$work/nt-$t.log" && built=yes
  printf '  include() without the tool, fresh tree %d: %.3f s, archguard-verify built: %s\n' "$t" "$(sub "$t1" "$t0")" "$built"
  if [ "$t" = 2 ] && [ "$built" = yes ]; then echo "bench_configure: the second fresh tree built the verifier again" >&2; exit 1; fi
done
[ "${ONLY:-}" = configure ] && exit 0

# ---- 2. all-major build of a handful of kernels ------------------------------------------------
make_project "$work/bplain" plain 6
make_project "$work/bguard" include 6
"$cmake" -S "$work/bplain" -B "$work/bb-plain" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=all-major >/dev/null
"$cmake" -S "$work/bguard" -B "$work/bb-guard" -G Ninja -DARCH_POLICY=all-major -DCudaArchGuard_VERIFY=OFF >/dev/null
: > "$work/build-plain"; : > "$work/build-guard"
for r in $(seq 1 "$bruns"); do
  for v in plain guard; do
    "$cmake" --build "$work/bb-$v" --target clean >/dev/null
    t0=$(now); "$cmake" --build "$work/bb-$v" -j "$jobs" >/dev/null; t1=$(now)
    sub "$t1" "$t0" >> "$work/build-$v"
  done
done
bp=$(median < "$work/build-plain"); bg=$(median < "$work/build-guard")
echo "all-major build of 6 kernel files, -j$jobs on $(nproc) CPUs ($bruns runs, medians, seconds)"
printf '  CMAKE_CUDA_ARCHITECTURES=all-major %.2f  module list + --threads %.2f  ratio %.2fx (goal <= 0.60x)\n' \
  "$bp" "$bg" "$(div "$bg" "$bp")"
# Same images either way (the module's list is what -arch=all-major builds):
grep -o 'generate-code=[^ ]*\|-arch=all-major' "$work/bb-plain/build.ninja" | sort -u | head -3 | sed 's/^/  plain flags: /'
grep -o 'generate-code=[^ ]*\|--threads=[0-9]*' "$work/bb-guard/build.ninja" | sort -u | sed 's/^/  module flags: /'

# ---- 3. one file, nvcc alone: what --threads does when a core is free per architecture -------
: > "$work/one-all"; : > "$work/one-thr"
gencode=$(cmake -DARCH_POLICY=all-major -DFORMAT=gencode -DQUIET=ON -P "$here/cmake/Modules/CudaArchGuardPolicy.cmake")
for r in $(seq 1 "$bruns"); do
  t0=$(now); "$nvcc" -c "$work/bplain/k1.cu" -o "$work/one-a.o" -arch=all-major; t1=$(now); sub "$t1" "$t0" >> "$work/one-all"
  # shellcheck disable=SC2086  # the gencode flags are separate words
  t0=$(now); "$nvcc" -c "$work/bplain/k1.cu" -o "$work/one-b.o" $gencode --threads=0; t1=$(now); sub "$t1" "$t0" >> "$work/one-thr"
done
oa=$(median < "$work/one-all"); ot=$(median < "$work/one-thr")
echo "one kernel file, nvcc -arch=all-major vs the module's list + --threads=0 ($bruns runs, medians, seconds)"
printf '  -arch=all-major %.2f  list + --threads=0 %.2f  ratio %.2fx\n' "$oa" "$ot" "$(div "$ot" "$oa")"
