#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The largest hostile inputs of issue 22 at their full sizes, against the budgets of
# docs/cli.md ("what is derived from input"): wall time and peak memory (GNU time) of one
# archguard run each, with the run on a small valid object as the anchor (ratios in the same
# session). The inputs are generated in a temporary directory and removed.
# Usage: bench/bench_hostile.sh [archguard binary]
#   GNU_TIME  GNU time (default /usr/bin/time)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ag=${1:-$here/build/default/bin/archguard}
gnutime=${GNU_TIME:-/usr/bin/time}
[[ -x $ag ]] || { echo "bench_hostile: no archguard binary $ag" >&2; exit 2; }
[[ -x $gnutime ]] || { echo "bench_hostile: needs GNU time ($gnutime)" >&2; exit 2; }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
python3 - "$t" <<'PY'
import struct, sys, zlib
t = sys.argv[1]
def elf(sections, machine=62, type_=3, extra=0, copy=0):
    """sections: (name_offset, type, flags, addr, body, link, entsize); section 1 is shstrtab (unnamed)."""
    out = bytearray(64); offs = []
    for s in sections:
        out += b'\0' * (-len(out) % 8); offs.append(len(out)); out += s[4]
    out += b'\0' * (-len(out) % 8); shoff = len(out)
    def hdr(s, off): return struct.pack('<IIQQQQIIQQ', s[0], s[1], s[2], s[3], off, len(s[4]), s[5], 0, 8, s[6])
    out += hdr((0, 0, 0, 0, b'', 0, 0), 0)
    for s, o in zip(sections, offs): out += hdr(s, o)
    for _ in range(extra): out += hdr(sections[copy], offs[copy])
    n = 1 + len(sections) + extra
    out[0:64] = b'\x7fELF\x02\x01\x01' + b'\0' * 9 + struct.pack('<HHIQQQIHHHHHH', type_, machine, 1, 0, 0, shoff, 0, 64, 0, 0, 64, n & 0xffff, 1)
    if n > 0xffff:  # extended numbering: the count lives in section 0
        struct.pack_into('<HH', out, 60, 0, 1); struct.pack_into('<Q', out, shoff + 32, n)
    return bytes(out)
# 1. section-name bomb: 20,000 headers naming one string of 1 MiB less 16 bytes
name = b'\0' + b's' * ((1 << 20) - 16) + b'\0'
open(f'{t}/section-names.so', 'wb').write(elf([(0, 3, 0, 0, name, 0, 0), (1, 1, 0, 0, bytes(16), 0, 0)], extra=20000, copy=1))
# 2. kernel-name bomb: a zstd-less stand-in, 20,000 entry symbols sharing one 1 MiB name in one
# uncompressed cubin (the review used 4 MiB names, now refused at once by the 1 MiB cap)
strtab = b'\0' + b'k' * ((1 << 20) - 16) + b'\0'
sym = struct.pack('<IBBHQQ', 1, 0x12, 0x10, 1, 0, 0)
shstr = b'\0.symtab\0.strtab\0'
cubin = elf([(0, 3, 0, 0, shstr, 0, 0), (1, 2, 0, 0, bytes(24) + sym * 20000, 3, 24), (9, 3, 0, 0, strtab, 0, 0)], machine=190, type_=2)
p = cubin + b'\0' * (-len(cubin) % 8)
e = struct.pack('<HHIQIIHHIIIQQQ', 2, 0x0101, 0x40, len(p), 0, 0, 7, 1, 80, 0, 0, 0x11, 0, 0) + p  # sm_80: --require 90 lists its kernels
open(f'{t}/kernel-names.fatbin', 'wb').write(struct.pack('<IHHQ', 0xBA55ED50, 1, 16, len(e)) + e)
# 3. embedded chain: 16 MiB of 80-byte units whose entry chains run to the end
N = (16 << 20) // 80
region = bytearray()
for k in range(N):
    region += struct.pack('<IHHQ', 0xBA55ED50, 1, 16, N * 80 - k * 80 - 24) + struct.pack('<HHIQ', 2, 0x0101, 0x40, 16) + bytes(48)
open(f'{t}/chain.so', 'wb').write(elf([(0, 3, 0, 0, b'\0.rodata\0', 0, 0), (1, 1, 2, 0x10000, bytes(region), 0, 0)]))
PY
cp "$here/tests/data/malformed/valid.o" "$t/anchor.o"
run() {  # label, expected exit codes (regex), args...
  local label=$1 codes=$2; shift 2
  set +e
  "$gnutime" -f '%e %M' -o "$t/time.txt" timeout "${BENCH_TIMEOUT:-600}" "$ag" "$@" > "$t/out.txt" 2> "$t/err.txt"; local rc=$?
  set -e
  read -r secs kib < <(tail -1 "$t/time.txt")
  [[ $rc =~ ^($codes)$ ]] || { echo "bench_hostile: $label: exit $rc: $(head -c 400 "$t/err.txt")" >&2; exit 1; }
  printf '%-34s %6s  %8.2f s  %7d MiB  exit %d\n' "$label" "$(du -h "${@: -1}" | cut -f1)" "$secs" $((kib / 1024)) "$rc"
  echo "$secs" > "$t/last"
}
echo "input                              size     time      peak      outcome"
run "anchor: inspect valid.o" 0 inspect "$t/anchor.o"; anchor=$(cat "$t/last")
run "section-name bomb: inspect" 0 inspect "$t/section-names.so"
run "kernel-name bomb: verify --require 90" "1|2" verify --require 90 "$t/kernel-names.fatbin"
run "kernel-name bomb: inspect --kernels" "0|2" inspect --kernels "$t/kernel-names.fatbin"
run "embedded chain 16 MiB: inspect" 2 inspect "$t/chain.so"
grep -o 'fatbin entry headers checked.*' "$t/err.txt" | head -1 | sed 's/^/  chain: /'
echo "anchor: $anchor s"
