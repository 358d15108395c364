#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian package and the .tar.gz of the install tree (cpack, cmake/Packaging.cmake), made
# from this build: the .deb's dependencies are the shared libraries the tool really loads
# (dpkg-shlibdeps), and unpacked with dpkg-deb -x into a temporary root (no dpkg -i, nothing of
# the machine touched) it runs: archguard --version, the man page, the completion, and a CMake
# project finding the package through CMAKE_PREFIX_PATH=<root>/usr. The archive holds the same tree.
# Usage: deb.sh BUILD_DIR CMAKE [SOURCE_DIR]
set -u
build=$(cd "${1:?usage: deb.sh BUILD_DIR CMAKE [SOURCE_DIR]}" && pwd)
cmake=${2:?usage: deb.sh BUILD_DIR CMAKE [SOURCE_DIR]}
src=${3:-}
cpack="$(dirname "$cmake")/cpack"
[[ -x $cpack ]] || cpack=cpack
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
command -v dpkg-deb >/dev/null && command -v dpkg-shlibdeps >/dev/null ||
  { echo "SKIPPED: dpkg-deb and dpkg-shlibdeps (dpkg-dev) are needed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$cpack" --config "$build/CPackConfig.cmake" -G "DEB;TGZ" -B "$tmp/out" >"$tmp/cpack.log" 2>&1 ||
  { tail -20 "$tmp/cpack.log"; fail "cpack -G DEB;TGZ"; }
deb=$(ls "$tmp"/out/cudaarchguard_*.deb 2>/dev/null | head -1)
tgz=$(ls "$tmp"/out/cudaarchguard-*.tar.gz 2>/dev/null | head -1)
[[ -n $deb && -n $tgz ]] || { ls "$tmp/out"; echo "$fails failure(s): no .deb or .tar.gz"; exit 1; }
echo "deb: $(basename "$deb") $(($(stat -c %s "$deb") / 1024)) KiB; tgz: $(basename "$tgz") $(($(stat -c %s "$tgz") / 1024)) KiB"

depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for lib in libc6 libstdc++6 libarchive13 libzstd1 liblz4-1 libdeflate0 libssl3; do
  [[ $depends == *"$lib"* ]] || fail "Depends lacks $lib"
done
[[ $(dpkg-deb -f "$deb" Package) == cudaarchguard ]] || fail "package name"

root=$tmp/root
dpkg-deb -x "$deb" "$root" || fail "dpkg-deb -x"
"$root/usr/bin/archguard" --version >"$tmp/version" 2>&1 || fail "archguard --version from the .deb exits $?"
grep -q '^commit ' "$tmp/version" || { cat "$tmp/version"; fail "archguard --version names no commit"; }
[[ -x $root/usr/bin/archguard-verify ]] || fail "no archguard-verify"
[[ -f $root/usr/share/man/man1/archguard.1 ]] || fail "no man page"
[[ -f $root/usr/share/bash-completion/completions/archguard ]] || fail "no bash completion"
[[ -f $root/usr/share/zsh/site-functions/_archguard ]] || fail "no zsh completion"
# nothing in the package keeps debug information
if command -v readelf >/dev/null; then
  for f in "$root"/usr/bin/archguard "$root"/usr/lib/*/libarchguard_jit.a "$root"/usr/lib/libarchguard_jit.a; do
    [[ -e $f ]] || continue
    readelf -S "$f" 2>/dev/null | grep -q '\.debug_info' && fail "$(basename "$f") keeps debug information"
  done
fi

# A CMake project finds the package under <root>/usr: the modules, the tool, the version.
mkdir -p "$tmp/proj"
cat >"$tmp/proj/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(deb_consumer LANGUAGES NONE)
find_package(CudaArchGuard 0.1 REQUIRED)
message(STATUS "deb: dir=${CudaArchGuard_DIR}")
message(STATUS "deb: modules=${CudaArchGuard_MODULE_DIR}")
message(STATUS "deb: exe=${CudaArchGuard_EXECUTABLE}")
include(CudaArchGuardTable)
EOF
"$cmake" -S "$tmp/proj" -B "$tmp/proj/build" "-DCMAKE_PREFIX_PATH=$root/usr" >"$tmp/cfg.log" 2>&1 ||
  { cat "$tmp/cfg.log"; fail "find_package(CudaArchGuard) with CMAKE_PREFIX_PATH=<root>/usr"; }
grep -q "deb: dir=$root/usr/lib" "$tmp/cfg.log" || fail "CudaArchGuard_DIR is not in the unpacked root"
grep -q "deb: exe=$root/usr/bin/archguard" "$tmp/cfg.log" || fail "CudaArchGuard_EXECUTABLE is not the package's tool"

# The static libraries of the package link into a consumer built with the compiler's default
# C++ standard (tests/consumer/libraries: no CMAKE_CXX_STANDARD of its own).
if [[ -n $src && -d $src/tests/consumer/libraries ]]; then
  "$cmake" -S "$src/tests/consumer/libraries" -B "$tmp/libs" "-DCMAKE_PREFIX_PATH=$root/usr" >"$tmp/libs.log" 2>&1 &&
    "$cmake" --build "$tmp/libs" >>"$tmp/libs.log" 2>&1 && "$tmp/libs/app" >>"$tmp/libs.log" 2>&1 ||
    { tail -20 "$tmp/libs.log"; fail "tests/consumer/libraries against the .deb's libraries"; }
fi

mkdir -p "$tmp/tgz"
tar -xzf "$tgz" -C "$tmp/tgz" || fail "tar -xzf"
top=$(ls "$tmp/tgz")
"$tmp/tgz/$top/bin/archguard" --version >/dev/null 2>&1 || fail "archguard from the .tar.gz"
[[ -f $tmp/tgz/$top/lib/cmake/CudaArchGuard/CudaArchGuardConfig.cmake || -n $(ls "$tmp/tgz/$top"/lib/*/cmake/CudaArchGuard/CudaArchGuardConfig.cmake 2>/dev/null) ]] ||
  fail "the .tar.gz lacks the CMake package"
echo "$fails failure(s)"
[[ $fails -eq 0 ]]
