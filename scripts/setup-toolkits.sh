#!/usr/bin/env bash
# Installs the toolkit matrix of tests/toolkits into the project's tool directory (.tools/,
# git-ignored, kept between runs as CI's cache): nothing outside it is changed.
#   .tools/cuda-11.8    a real CUDA 11.8 nvcc: Debian 12's non-free nvidia-cuda-toolkit, fetched
#                       with `apt-get download` through a private sources list and state
#                       directory (the machine's apt configuration is untouched, nothing is
#                       installed with dpkg) and unpacked with dpkg-deb -x; its headers, cudart
#                       and libnvvm come from PyPI's nvidia-cuda-{runtime,nvcc}-cu11 11.8.89
#                       (Debian's nvidia-cuda-dev is a 774 MB download). Host compiler: clang-14,
#                       which CUDA 11.8 supports (Debian 12's gcc 12 is too new for it).
#   .tools/cuda-newest  the newest CUDA 13.x from PyPI, pinned in scripts/cuda-newest.txt.
# Prints one line per toolkit: its nvcc. ARCHGUARD_TOOLS overrides the tool directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${ARCHGUARD_TOOLS:-$here/.tools}"
venv="${ARCHGUARD_VENV:-$here/.venv}"
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
mkdir -p "$tools"
log() { echo "setup-toolkits: $*" >&2; }

# ---- CUDA 11.8 -----------------------------------------------------------------------------
t118="$tools/cuda-11.8"
deb_version="11.8.89~11.8.0-5~deb12u1"
if [ ! -f "$t118/.complete" ]; then
  start=$(date +%s)
  rm -rf "$t118" "$tools/apt/unpack" "$tools/apt/wheels-cu11"
  apt_dir="$tools/apt"
  mkdir -p "$apt_dir/etc" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
  # The private sources list reuses the machine's Debian mirror, adding the non-free component.
  uri="$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
  [ -n "$uri" ] || uri="$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
  [ -n "$uri" ] || { log "error: no Debian mirror found in /etc/apt/sources.list{,.d/debian.sources}"; exit 2; }
  printf 'Types: deb\nURIs: %s\nSuites: bookworm\nComponents: main contrib non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" > "$apt_dir/etc/toolkits.sources"
  apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt_dir/etc"
            -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
            -o "Dir::State::status=/var/lib/dpkg/status" -o "APT::Sandbox::User=root")
  if ! ls "$apt_dir"/debs/nvidia-cuda-toolkit_*.deb >/dev/null 2>&1; then
    log "downloading Debian's nvidia-cuda-toolkit $deb_version (84 MB) into $apt_dir"
    apt-get "${apt_opts[@]}" -qq update
    (cd "$apt_dir/debs" && apt-get "${apt_opts[@]}" -qq download "nvidia-cuda-toolkit=$deb_version")
  fi
  wheels="$tools/wheels"
  mkdir -p "$wheels"
  "${pip[@]}" download --no-deps -d "$wheels" nvidia-cuda-runtime-cu11==11.8.89 nvidia-cuda-nvcc-cu11==11.8.89
  u="$apt_dir/unpack"
  mkdir -p "$u/deb" "$u/whl"
  dpkg-deb -x "$(ls "$apt_dir"/debs/nvidia-cuda-toolkit_*.deb | head -1)" "$u/deb"
  (cd "$u/whl" && for w in "$wheels"/nvidia_cuda_runtime_cu11-11.8.89-*.whl "$wheels"/nvidia_cuda_nvcc_cu11-11.8.89-*.whl; do
     python3 -m zipfile -e "$w" .; done)
  # NVIDIA's own layout: bin/, nvvm/{bin,lib64,libdevice}, include/, lib64/.
  mkdir -p "$t118/bin" "$t118/nvvm/bin" "$t118/lib64"
  cp -a "$u/deb/usr/lib/nvidia-cuda-toolkit/bin/nvcc" "$u/deb/usr/lib/nvidia-cuda-toolkit/bin/crt" "$t118/bin/"
  cp -a "$u/deb/usr/lib/nvidia-cuda-toolkit/bin/cicc" "$t118/nvvm/bin/"
  for b in cudafe++ fatbinary nvlink ptxas bin2c nvprune cuobjdump; do cp -a "$u/deb/usr/bin/$b" "$t118/bin/"; done
  cp -a "$u/whl/nvidia/cuda_runtime/include" "$t118/"
  cp -a "$u/whl/nvidia/cuda_nvcc/include/." "$t118/include/"
  cp -a "$u/whl/nvidia/cuda_nvcc/nvvm/lib64" "$u/whl/nvidia/cuda_nvcc/nvvm/libdevice" "$t118/nvvm/"
  cp -a "$u/whl/nvidia/cuda_runtime/lib/libcudart.so.11.0" "$t118/lib64/"
  ln -sf libcudart.so.11.0 "$t118/lib64/libcudart.so"
  find "$t118" -name __init__.py -delete
  chmod +x "$t118"/bin/* "$t118/nvvm/bin/cicc"
  cat > "$t118/bin/nvcc.profile" <<'PROFILE'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
PROFILE
  rm -rf "$u"
  "$t118/bin/nvcc" --version | grep -q "release 11.8" || { log "error: $t118/bin/nvcc does not run"; exit 2; }
  touch "$t118/.complete"
  log "CUDA 11.8 ready in $t118 ($(( $(date +%s) - start )) s)"
fi

# ---- the newest CUDA 13.x from PyPI --------------------------------------------------------
tnew="$tools/cuda-newest"
pin="$(grep -v '^#' "$here/scripts/cuda-newest.txt" | head -1)"
if [ ! -f "$tnew/.complete" ] || [ "$(cat "$tnew/.complete")" != "$pin" ]; then
  start=$(date +%s)
  rm -rf "$tnew"
  log "installing $pin into $tnew"
  "${pip[@]}" download -d "$tools/wheels" "$pin" >/dev/null
  "${pip[@]}" install --no-compile --no-index --find-links "$tools/wheels" --target "$tnew" "$pin"
  echo "$pin" > "$tnew/.complete"
  log "$pin ready in $tnew ($(( $(date +%s) - start )) s)"
fi
echo "$t118/bin/nvcc"
echo "$tnew/nvidia/cu13/bin/nvcc"
