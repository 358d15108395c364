# SPDX-License-Identifier: Apache-2.0
# Sourced by the GPU scripts (gpu-validate.sh, and the others through lib/gpu-common.sh): when the
# GPU machine lacks the build dependencies (CLI11, nlohmann-json, Catch2, libarchive, zstd, lz4, libdeflate,
# OpenSSL headers), take them from the Debian packages in $DEBS (default .gpu-carry/debs),
# unpacked under /tmp (never into /). Sets `extra` (arguments for cmake) and `deps_note` (one
# line for the summary).
deps=/tmp/archguard-deps
missing=0
missing_list=""
for h in /usr/include/CLI/CLI.hpp /usr/include/nlohmann/json.hpp /usr/include/catch2/catch.hpp \
         /usr/include/archive.h /usr/include/zstd.h /usr/include/lz4.h /usr/include/openssl/sha.h /usr/include/libdeflate.h; do
  [ -f "$h" ] || { missing=1; missing_list="$missing_list $h"; }
done
debs_dir="${DEBS:-.gpu-carry/debs}"
extra=()
deps_note="build dependencies: all on the machine"
if [ "$missing" = 1 ] && ls "$debs_dir"/*.deb >/dev/null 2>&1; then
  rm -rf "$deps" && mkdir -p "$deps"
  for d in "$debs_dir"/*.deb; do dpkg -x "$d" "$deps"; done
  for pc in "$deps"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$deps"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s|^prefix=/usr|prefix=$deps/usr|" "$pc"
  done
  export PKG_CONFIG_PATH="$deps/usr/lib/x86_64-linux-gnu/pkgconfig:$deps/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export CMAKE_PREFIX_PATH="$deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$deps/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  extra=(-DOPENSSL_ROOT_DIR="$deps/usr")
  deps_note="build dependencies taken from $debs_dir ($(ls "$debs_dir" | wc -l) Debian 12 packages, unpacked in $deps)"
elif [ "$missing" = 1 ]; then
  deps_note="missing on this machine:$missing_list"
fi
