#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The hostile inputs of docs/cli.md ("what is derived from input is bounded too"), generated at
# any size: bench/bench_hostile.sh writes them at the full sizes, tests/cli/hostile_limits.sh
# small enough for the test suite. Writes into DIR:
#   section-names.so      HEADERS section headers naming one string of NAME bytes
#   kernel-names.fatbin   a fatbin of one sm_80 cubin with SYMBOLS entry symbols sharing one KNAME-byte name
#   chain.so              CHAIN bytes of 80-byte units whose fatbin entry chains run to the end
#   computed.cu           COMPUTED computed includes (#include MACRO) that resolve to inc/h*.h and as
#                         many that never resolve (under #ifdef, which the key's scan follows and
#                         NVRTC does not), then a chain of LINKS headers inc/c*.h each defining the
#                         macro that names the next (the scan once took a round per link, each over
#                         every unresolved include); anchor.cu is the same with one of each
# Usage: hostile_inputs.py DIR [--name N] [--headers N] [--kname N] [--symbols N] [--chain N]
#                              [--computed N] [--links N]
import argparse, struct

ap = argparse.ArgumentParser()
ap.add_argument('dir')
ap.add_argument('--name', type=int, default=(1 << 20) - 16)
ap.add_argument('--headers', type=int, default=20000)
ap.add_argument('--kname', type=int, default=(1 << 20) - 16)
ap.add_argument('--symbols', type=int, default=20000)
ap.add_argument('--chain', type=int, default=16 << 20)
ap.add_argument('--computed', type=int, default=5000)
ap.add_argument('--links', type=int, default=150)  # below the include depth NVRTC allows (200)
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
# 4. computed includes for the JIT cache key
import os
os.makedirs(f'{t}/inc', exist_ok=True)
def computed(path, n, links):
    src = []
    for i in range(n):
        open(f'{t}/inc/h{i}.h', 'w').write('\n')
        src.append(f'#define M{i} "inc/h{i}.h"\n#include M{i}\n#ifdef ARCHGUARD_NEVER_DEFINED\n#include U{i}\n#endif\n')
    for i in range(links):
        open(f'{t}/inc/c{i}.h', 'w').write(f'#define C{i + 1} "c{i + 1}.h"\n#include C{i + 1}\n' if i + 1 < links else '\n')
    src.append('#define C0 "inc/c0.h"\n#include C0\nextern "C" __global__ void k(int* p) { *p = 1; }\n')
    open(path, 'w').write(''.join(src))
computed(f'{t}/computed.cu', a.computed, a.links)
computed(f'{t}/anchor.cu', 1, 1)
