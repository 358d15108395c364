#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Freshness of the architecture table against a real nvcc: freshness.sh <nvcc> <work dir> [table].
# Compares nvcc's --list-gpu-code, --list-gpu-arch, the a/f values of --help and the PTX ISA
# that `nvcc -ptx` emits with cmake/Modules/CudaArchGuard/architectures.txt, and fails naming
# each row to add or fix. Exits 77 (skip) when the toolkit is not installed.
set -euo pipefail
nvcc=$1 work=$2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
table="${3:-$(cd "$here/../.." && pwd)/cmake/Modules/CudaArchGuard/architectures.txt}"
[ -x "$nvcc" ] || { echo "freshness: $nvcc is not installed; run scripts/setup-toolkits.sh"; exit 77; }
mkdir -p "$work"
problems=()
ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$2" ]; }  # $1 >= $2
rel="$("$nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
[ -n "$rel" ] || { echo "freshness: $nvcc --version names no release" >&2; exit 2; }
codes="$("$nvcc" --list-gpu-code | grep -o '^sm_[0-9]*$' | sed 's/sm_//' | sort -n)"
archs="$("$nvcc" --list-gpu-arch | grep -o '^compute_[0-9]*$' | sed 's/compute_//' | sort -n)"
variants="$("$nvcc" --help | { grep -o 'sm_[0-9]*[af]\b' || true; } | sed 's/sm_//' | sort -u)"

# The PTX ISA this nvcc writes, for its lowest PTX target.
lowest="$(echo "$archs" | head -1)"
printf '__global__ void k(int* p) { *p = 1; }\n' > "$work/k.cu"
"$nvcc" -ptx -arch="compute_$lowest" "$work/k.cu" -o "$work/k.ptx" ${NVCC_HOST:+-ccbin "$NVCC_HOST"}
isa="$(sed -n 's/^\.version \([0-9.]*\).*/\1/p' "$work/k.ptx" | head -1)"
row="$(awk -F'|' -v r="$rel" '$1=="release" && $2==r' "$table")"
if [ -z "$row" ]; then
  problems+=("add 'release|$rel|$isa|<minimum Linux driver from the CUDA $rel release notes>'")
elif [ "$(echo "$row" | cut -d'|' -f3)" != "$isa" ]; then
  problems+=("fix '$row': nvcc $rel writes PTX ISA $isa")
fi

# arch|SM|CC|codename|products|tegra|a since|f since|first CUDA|removed in|family
supported() {  # supported <sm> <suffix> -> 0 when the table says this release targets it
  awk -F'|' -v sm="$1" '$1=="arch" && $2==sm' "$table" | {
    IFS='|' read -r _ _ _ _ _ _ a f first removed _ || return 1
    ge "$rel" "$first" || return 1
    [ "$removed" = "-" ] || ! ge "$rel" "$removed" || return 1
    case "$2" in a) [ "$a" != "-" ] && ge "$rel" "$a" ;; f) [ "$f" != "-" ] && ge "$rel" "$f" ;; *) true ;; esac; }
}
for sm in $(echo "$codes $archs" | tr ' ' '\n' | sort -nu); do
  if ! grep -q "^arch|$sm|" "$table"; then
    v=""; grep -qx "${sm}a" <<< "$variants" && v="$rel"
    problems+=("add 'arch|$sm|$((sm / 10)).$((sm % 10))|<codename>|<products>|<tegra 0/1>|${v:--}|${v:--}|$rel|-|<family>' (nvcc $rel lists sm_$sm)")
  elif ! supported "$sm" ""; then
    problems+=("fix '$(grep "^arch|$sm|" "$table")': nvcc $rel lists sm_$sm")
  fi
done
for v in $variants; do
  sm="${v%[af]}"; sfx="${v#$sm}"
  grep -q "^arch|$sm|" "$table" || continue  # reported above
  supported "$sm" "$sfx" || problems+=("fix '$(grep "^arch|$sm|" "$table")': nvcc $rel accepts sm_$v")
done
while IFS='|' read -r kind sm _; do
  [ "$kind" = arch ] || continue
  supported "$sm" "" || continue
  grep -qx "$sm" <<< "$codes" ||
    problems+=("fix '$(grep "^arch|$sm|" "$table")': it says CUDA $rel targets sm_$sm, nvcc $rel does not list it (removed in?)")
done < "$table"

echo "freshness: nvcc $rel lists sm: $(echo $codes), compute: $(echo $archs), variants: $(echo $variants); PTX ISA $isa"
if ((${#problems[@]})); then
  printf 'freshness: architectures.txt is stale for nvcc %s:\n' "$rel" >&2
  printf '  %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "freshness: architectures.txt agrees with nvcc $rel"
