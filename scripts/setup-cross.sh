#!/usr/bin/env bash
# Installs what the cross builds of toolchains/ need on a Debian 12 x86-64 machine with the CUDA
# toolkit, without touching that toolkit:
#   - Debian's g++-aarch64-linux-gnu (host compiler and the arm64 sysroot /usr/aarch64-linux-gnu)
#     and qemu-user-static (runs the aarch64 host code);
#   - a private cross toolkit root, .tools/cuda-cross: the x86-64 nvcc of the system toolkit plus
#     the aarch64 target (targets/sbsa-linux) holding the CUDA runtime of PyPI's aarch64 wheel.
# Idempotent: a second run changes nothing. The wheel is cached in .tools/cache.
#
#   scripts/setup-cross.sh [--print-root]
#
# Environment: CUDA_HOME (default: the directory above nvcc, else /usr/local/cuda);
# ARCHGUARD_CROSS_CUDART (the nvidia-cuda-runtime version to fetch; default: see below);
# ARCHGUARD_VENV (the Python environment whose pip downloads the wheel; default .venv).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$here/scripts/lib/debs.sh"
tools="$here/.tools"
root="$tools/cuda-cross"
cache="$tools/cache"
venv="${ARCHGUARD_VENV:-$here/.venv}"

die() { echo "setup-cross: error: $*" >&2; exit 2; }

# --- Debian packages ------------------------------------------------------------------------
debs=(g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static)
ensure_debs setup-cross "${debs[@]}"

# --- the system toolkit -----------------------------------------------------------------------
if [ -z "${CUDA_HOME:-}" ]; then
  if command -v nvcc >/dev/null 2>&1; then
    CUDA_HOME="$(cd "$(dirname "$(readlink -f "$(command -v nvcc)")")/.." && pwd)"
  else
    CUDA_HOME=/usr/local/cuda
  fi
fi
nvcc="$CUDA_HOME/bin/nvcc"
[ -x "$nvcc" ] || die "no nvcc at $nvcc (set CUDA_HOME to the CUDA toolkit)"
nvcc_version="$("$nvcc" --version | sed -n 's/.*, V\([0-9][0-9.]*\)$/\1/p')"
[ -n "$nvcc_version" ] || die "cannot read the release from '$nvcc --version'"
nvcc_major="${nvcc_version%%.*}"
nvcc_mm="$(echo "$nvcc_version" | cut -d. -f1,2)"
host_target="$CUDA_HOME/targets/x86_64-linux"
[ -d "$host_target" ] || die "$CUDA_HOME has no targets/x86_64-linux: not an x86-64 CUDA toolkit"

# The runtime version: the one this toolkit ships for x86-64 (so both targets share the headers
# under include/), read from a wheel-built toolkit's dist-info or a runfile toolkit's
# version.json; else nvcc's own version (the runtime and nvcc of one CUDA release carry the same
# major.minor; PyPI has the runtime of every nvcc release).
cudart="${ARCHGUARD_CROSS_CUDART:-}"
if [ -z "$cudart" ]; then
  d="$(ls -d "$CUDA_HOME"/dist-info/nvidia_cuda_runtime-*.dist-info 2>/dev/null | head -n1 || true)"
  if [ -n "$d" ]; then
    cudart="$(basename "$d" .dist-info)"; cudart="${cudart#nvidia_cuda_runtime-}"
  elif [ -f "$CUDA_HOME/version.json" ]; then
    cudart="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cuda_cudart"]["version"])' "$CUDA_HOME/version.json" 2>/dev/null || true)"
  fi
  [ -n "$cudart" ] || cudart="$nvcc_version"
fi
case "$cudart" in
  "$nvcc_mm".*) ;;
  *) die "the aarch64 runtime $cudart is not of nvcc's release $nvcc_mm (nvcc $nvcc_version); set ARCHGUARD_CROSS_CUDART=$nvcc_version" ;;
esac

stamp="$root/.archguard-cross"
want="nvcc=$nvcc_version cudart=$cudart cuda_home=$CUDA_HOME"
if [ "${1:-}" = --print-root ]; then echo "$root"; exit 0; fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$root/bin/nvcc" ]; then
  echo "setup-cross: ok ($root: $want)"
  exit 0
fi

# --- the aarch64 runtime wheel ----------------------------------------------------------------
mkdir -p "$cache"
wheel="$(ls "$cache"/nvidia_cuda_runtime-"$cudart"-*aarch64*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
  py="$venv/bin/python"; [ -x "$py" ] || py="$(command -v python3)"
  echo "setup-cross: downloading nvidia-cuda-runtime $cudart for aarch64 into $cache"
  "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2014_aarch64 -d "$cache" "nvidia-cuda-runtime==$cudart" \
    || die "pip could not download nvidia-cuda-runtime==$cudart for aarch64 (set ARCHGUARD_CROSS_CUDART to a version PyPI has)"
  wheel="$(ls "$cache"/nvidia_cuda_runtime-"$cudart"-*aarch64*.whl | head -n1)"
fi

# --- the private toolkit root -----------------------------------------------------------------
# nvcc finds everything relative to its own real path (nvcc.profile: TOP = $(_HERE_)/..), so nvcc
# and nvcc.profile are copied; the other tools, nvvm and the x86-64 target are links into the
# system toolkit. nvcc picks targets/sbsa-linux itself when the host compiler is aarch64; CMake's
# FindCUDAToolkit looks for targets/aarch64-linux when cross-compiling, a link to the same tree.
echo "setup-cross: laying out $root (nvcc $nvcc_version from $CUDA_HOME, aarch64 runtime $cudart)"
rm -rf "$root.tmp"
mkdir -p "$root.tmp/bin" "$root.tmp/targets/sbsa-linux/lib"
cp "$CUDA_HOME/bin/nvcc" "$CUDA_HOME/bin/nvcc.profile" "$root.tmp/bin/"
for f in "$CUDA_HOME"/bin/*; do
  b="$(basename "$f")"
  [ -e "$root.tmp/bin/$b" ] || ln -s "$(readlink -f "$f")" "$root.tmp/bin/$b"
done
ln -s "$(readlink -f "$CUDA_HOME/nvvm")" "$root.tmp/nvvm"
ln -s "$(readlink -f "$host_target")" "$root.tmp/targets/x86_64-linux"
# Headers are the same for every target of a release: the system toolkit's (crt, cccl included).
ln -s "$(readlink -f "$host_target/include")" "$root.tmp/targets/sbsa-linux/include"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && python3 -m zipfile -e "$wheel" . )
libdir="$(ls -d "$tmp"/nvidia/cu*/lib | head -n1)"
[ -f "$libdir/libcudart.so.$nvcc_major" ] || die "$wheel holds no lib/libcudart.so.$nvcc_major"
cp "$libdir"/* "$root.tmp/targets/sbsa-linux/lib/"
ln -s "libcudart.so.$nvcc_major" "$root.tmp/targets/sbsa-linux/lib/libcudart.so"
ln -s sbsa-linux "$root.tmp/targets/aarch64-linux"
file_out="$(file -b "$root.tmp/targets/sbsa-linux/lib/libcudart.so.$nvcc_major" 2>/dev/null || echo "ARM aarch64")"
case "$file_out" in *aarch64*) ;; *) die "$wheel: libcudart is not an aarch64 library ($file_out)" ;; esac
echo "$want" > "$root.tmp/.archguard-cross"
rm -rf "$root"
mv "$root.tmp" "$root"

# A smoke test of the layout: nvcc must pick the aarch64 target by itself.
# (The output is taken whole first: `grep -q` would stop reading early, nvcc would die of SIGPIPE
# and, under pipefail, a good layout would be refused depending on timing.)
dryrun="$("$root/bin/nvcc" -ccbin aarch64-linux-gnu-g++ --dryrun -x cu -c /dev/null -o /dev/null 2>&1 || true)"
grep -q "_TARGET_DIR_=targets/sbsa-linux" <<< "$dryrun" || die "$root/bin/nvcc does not select targets/sbsa-linux for aarch64-linux-gnu-g++"
echo "setup-cross: ok ($root: $want)"
