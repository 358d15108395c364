#!/usr/bin/env bash
# Installs the dependencies of CudaArchGuard on a Debian 12 machine that has the CUDA toolkit.
#   bash scripts/setup.sh          what the library, the tool and the samples need (command 1)
#   bash scripts/setup.sh --tests  that, plus what only the tests use: Catch2, clang-14 (fuzzer), clang-format-14,
#                                  aarch64 binutils, and a Python venv with cuobjdump and the
#                                  CMake versions of the module's matrix (scripts/test.sh runs this)
# Idempotent: packages already present are skipped, and a second run changes nothing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$here/scripts/lib/debs.sh"
venv="${ARCHGUARD_VENV:-$here/.venv}"
tests=0
case "${1:-}" in
  --tests) tests=1 ;;
  "") ;;
  *) echo "setup: error: unknown argument '$1' (use --tests or nothing)" >&2; exit 2 ;;
esac

debs=(build-essential cmake ninja-build pkg-config git
      libcli11-dev nlohmann-json3-dev libarchive-dev libzstd-dev liblz4-dev libdeflate-dev libssl-dev)
if ((tests)); then
  debs+=(python3 python3-venv catch2 clang-14 clang-format-14 libclang-rt-14-dev zstd time binutils-aarch64-linux-gnu
         slurmctld slurmd slurm-client munge  # the Slurm cluster that tests/cli/slurm_fleet.sh starts
         zsh dpkg-dev unzip)  # the zsh completion check, cpack's DEB dependencies, the wheel test
fi
ensure_debs setup "${debs[@]}"

# CUDA toolkit: nvcc on PATH or at the standard prefix.
if ! command -v nvcc >/dev/null 2>&1; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "setup: nvcc is not on PATH; using /usr/local/cuda/bin (add it to PATH to silence this)"
  else
    echo "setup: error: no CUDA toolkit found (nvcc not on PATH, /usr/local/cuda/bin/nvcc absent)" >&2
    exit 2
  fi
fi

if ((!tests)); then
  echo "setup: ok (run 'bash scripts/setup.sh --tests' for what the tests need as well)"
  exit 0
fi

# Python tools in a private virtual environment: cuobjdump (reference listings for the tests)
# and the CMake versions of the module's compatibility matrix.
py="$(command -v python3)"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv" 2>/dev/null || { "$py" -m pip install -q virtualenv && "$py" -m virtualenv -q "$venv"; }
fi
req="$here/scripts/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python tools into $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  echo "$want" > "$stamp"
fi

# CMake versions for the module matrix, each in its own directory (cmake==X is one wheel).
for v in $(grep -v '^#' "$here/scripts/cmake-versions.txt"); do
  d="$venv/cmake-$v"
  if [ ! -x "$d/bin/cmake" ]; then
    echo "setup: installing cmake $v into $d"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --target "$d/lib" "cmake==$v"
    mkdir -p "$d/bin"
    for t in cmake ctest cpack; do
      ln -sf "$(ls -d "$d"/lib/cmake/data/bin)/$t" "$d/bin/$t"
    done
  fi
done
echo "setup: ok"
