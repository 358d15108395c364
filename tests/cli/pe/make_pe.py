#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Writes a minimal PE32+ image (Microsoft PE and COFF Specification) whose .nv_fatb section holds
# the bytes of FATBIN, as nvcc on Windows lays them out: DOS header, "PE\0\0", COFF header,
# a 240-byte optional header, section table (.text, .nv_fatb), raw data at the file alignment.
# Usage: make_pe.py FATBIN OUT [--exe] [--truncate]
import struct, sys

fatbin = open(sys.argv[1], "rb").read()
out = sys.argv[2]
exe = "--exe" in sys.argv
align = 0x200
def pad(b):
    return b + b"\0" * (-len(b) % align)
text = pad(b"\xc3")                      # ret
sections = [(b".text", text, 0x60000020), (b".nv_fatb", pad(fatbin), 0x40000040)]
lfanew = 0x80
dos = b"MZ" + b"\0" * 0x3a + struct.pack("<I", lfanew)
dos += b"\0" * (lfanew - len(dos))
opt_size = 240
coff = struct.pack("<HHIIIHH", 0x8664, len(sections), 0, 0, 0, opt_size, 0x0022 if exe else 0x2022)
optional = struct.pack("<H", 0x20b) + b"\0" * (opt_size - 2)
headers_end = lfanew + 4 + len(coff) + opt_size + 40 * len(sections)
raw = -(-headers_end // align) * align
table, data, va = b"", b"", 0x1000
for name, body, flags in sections:
    size = len(fatbin) if name == b".nv_fatb" else 1
    table += struct.pack("<8sIIIIIIHHI", name, size, va, len(body), raw + len(data), 0, 0, 0, 0, flags)
    data += body
    va += -(-len(body) // 0x1000) * 0x1000
image = dos + b"PE\0\0" + coff + optional + table
image += b"\0" * (raw - len(image)) + data
if "--truncate" in sys.argv:
    image = image[: raw + 64]   # the .nv_fatb section's raw data runs past the end
open(out, "wb").write(image)
