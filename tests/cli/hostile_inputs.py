#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The hostile inputs of docs/cli.md ("what is derived from input is bounded too"), generated at
# any size: bench/bench_hostile.sh writes them at the full sizes, tests/cli/hostile_limits.sh
# small enough for the test suite. Writes into DIR:
#   section-names.so      HEADERS section headers naming one string of NAME bytes
#   kernel-names.fatbin   a fatbin of one sm_80 cubin with SYMBOLS entry symbols sharing one KNAME-byte name
#   chain.so              CHAIN bytes of 80-byte units whose fatbin entry chains run to the end
# Usage: hostile_inputs.py DIR [--name N] [--headers N] [--kname N] [--symbols N] [--chain N]
import argparse, struct

ap = argparse.ArgumentParser()
ap.add_argument('dir')
ap.add_argument('--name', type=int, default=(1 << 20) - 16)
ap.add_argument('--headers', type=int, default=20000)
ap.add_argument('--kname', type=int, default=(1 << 20) - 16)
ap.add_argument('--symbols', type=int, default=20000)
ap.add_argument('--chain', type=int, default=16 << 20)
a = ap.parse_args()
t = a.dir


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


# 1. section-name bomb: many headers naming one long string
name = b'\0' + b's' * a.name + b'\0'
open(f'{t}/section-names.so', 'wb').write(elf([(0, 3, 0, 0, name, 0, 0), (1, 1, 0, 0, bytes(16), 0, 0)], extra=a.headers, copy=1))
# 2. kernel-name bomb: entry symbols sharing one long name in one uncompressed cubin
strtab = b'\0' + b'k' * a.kname + b'\0'
sym = struct.pack('<IBBHQQ', 1, 0x12, 0x10, 1, 0, 0)
shstr = b'\0.symtab\0.strtab\0'
cubin = elf([(0, 3, 0, 0, shstr, 0, 0), (1, 2, 0, 0, bytes(24) + sym * a.symbols, 3, 24), (9, 3, 0, 0, strtab, 0, 0)], machine=190, type_=2)
p = cubin + b'\0' * (-len(cubin) % 8)
e = struct.pack('<HHIQIIHHIIIQQQ', 2, 0x0101, 0x40, len(p), 0, 0, 7, 1, 80, 0, 0, 0x11, 0, 0) + p  # sm_80: --require 90 lists its kernels
open(f'{t}/kernel-names.fatbin', 'wb').write(struct.pack('<IHHQ', 0xBA55ED50, 1, 16, len(e)) + e)
# 3. embedded chain: 80-byte units whose entry chains run to the end
N = a.chain // 80
region = bytearray()
for k in range(N):
    region += struct.pack('<IHHQ', 0xBA55ED50, 1, 16, N * 80 - k * 80 - 24) + struct.pack('<HHIQ', 2, 0x0101, 0x40, 16) + bytes(48)
open(f'{t}/chain.so', 'wb').write(elf([(0, 3, 0, 0, b'\0.rodata\0', 0, 0), (1, 1, 2, 0x10000, bytes(region), 0, 0)]))
