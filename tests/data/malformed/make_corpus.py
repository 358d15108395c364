#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the malformed-input corpus of the fatbin reader (see README.md here).

Every file is built from first principles (no nvcc): a tiny cubin, a fatbin with three
entries (raw cubin, LZ4 raw-block PTX, ZSTD raw-block cubin), a host ELF carrying it, and an
`ar` archive; then each is broken in one documented way. MANIFEST.txt lists each file with a
substring the reader's error must contain ("ok" for the controls). Re-run after changing:

    python3 tests/data/malformed/make_corpus.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
manifest = []


def write(name, data, expect, why):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    manifest.append((name, expect, why))


# ---- building blocks ---------------------------------------------------------------------

def elf64(machine, etype, sections, flags=0, ident_class=2, ident_data=1, abi=0):
    """sections: list of (name, type, bytes, link, info, entsize, addr, sh_flags)."""
    sections = list(sections) + [(".shstrtab", 3, b"", 0, 0, 0, 0, 0)]
    names = b"\0"
    name_off = []
    for sec in sections:
        name_off.append(len(names))
        names += sec[0].encode() + b"\0"
    sections[-1] = (".shstrtab", 3, names, 0, 0, 0, 0, 0)
    body = b""
    offsets = []
    data_start = 64
    for s in sections:
        while (data_start + len(body)) % 8:
            body += b"\0"
        offsets.append(data_start + len(body))
        body += s[2]
    while (data_start + len(body)) % 8:
        body += b"\0"
    shoff = data_start + len(body)
    shnum = len(sections) + 1
    ident = b"\x7fELF" + bytes([ident_class, ident_data, 1, 0, abi]) + b"\0" * 7
    hdr = ident + struct.pack("<HHIQQQIHHHHHH", etype, machine, 1, 0, 0, shoff, flags, 64, 56, 0, 64,
                              shnum, shnum - 1)
    sh = b"\0" * 64
    for i, s in enumerate(sections):
        sh += struct.pack("<IIQQQQIIQQ", name_off[i], s[1], s[7], s[6], offsets[i], len(s[2]), s[3], s[4], 8, s[5])
    return hdr + body + sh


def cubin(kernel=b"_Z6kernelPf"):
    strtab = b"\0" + kernel + b"\0helper\0"
    sym = struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0)
    sym += struct.pack("<IBBHQQ", 1, 0x12, 0x10, 1, 0, 16)           # STT_FUNC, STO_CUDA_ENTRY
    sym += struct.pack("<IBBHQQ", 1 + len(kernel) + 1, 0x12, 0, 1, 16, 16)  # plain device function
    # sections: [1] .strtab, [2] .symtab (link 1); .shstrtab appended last
    return elf64(190, 2, [(".strtab", 3, strtab, 0, 0, 0, 0, 0), (".symtab", 2, sym, 1, 1, 24, 0, 0)], flags=0x5a00)


def lz4_block(data):
    """An LZ4 raw block holding only literals (valid for any input)."""
    n = len(data)
    if n < 15:
        return bytes([n << 4]) + data
    out = bytes([0xF0])
    rest = n - 15
    while rest >= 255:
        out += b"\xff"
        rest -= 255
    return out + bytes([rest]) + data


def zstd_frame(data, claimed=None):
    """A ZSTD frame with one raw block and an 8-byte content size."""
    size = len(data) if claimed is None else claimed
    hdr = b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + struct.pack("<Q", size)  # FCS 8 bytes, single segment
    block = struct.pack("<I", (len(data) << 3) | 1)[:3]
    return hdr + block + data


def pad8(b):
    return b + b"\0" * (-len(b) % 8)


def entry(kind, arch, payload, *, flags=0x11, major=1, minor=8, comp_len=0, uncomp=0, ident=b"",
          options=b"", header_size=None, stored=None, ident_off=None, opt_rec=None):
    ext = b""
    base = 0x40
    id_off = id_len = 0
    if ident:
        id_off, id_len = base + len(ext), len(ident)
        ext += pad8(ident + b"\0")
    opt_field = 0
    if options:
        rec_at = base + len(ext)
        text_at = rec_at + 8
        ext += struct.pack("<II", text_at, len(options)) + pad8(options + b"\0")
        opt_field = rec_at
    if opt_rec is not None:
        opt_field = opt_rec
    if ident_off is not None:
        id_off = ident_off
        id_len = id_len or 8
    hs = base + len(ext) if header_size is None else header_size
    body = pad8(payload)
    st = len(body) if stored is None else stored
    hdr = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x0101, hs, st, comp_len, opt_field, minor, major, arch,
                      id_off, id_len, flags, 0, uncomp)
    return hdr + ext + body


def fatbin(entries, *, magic=0xBA55ED50, header_size=16, fat_size=None):
    body = b"".join(entries)
    fs = len(body) if fat_size is None else fat_size
    return struct.pack("<IHHQ", magic, 1, header_size, fs) + body


PTX = (b"//\n.version 9.0\n.target sm_80\n.address_size 64\n\n"
       b".visible .entry _Z6kernelPf(\n\t.param .u64 _Z6kernelPf_param_0\n)\n{\n\tret;\n}\n")
CUBIN = cubin()


def good_entries():
    lz = lz4_block(PTX)
    zs = zstd_frame(CUBIN)
    return [
        entry(2, 80, CUBIN),
        entry(1, 80, lz, flags=0x2011, major=9, minor=0, comp_len=len(lz), uncomp=len(PTX), options=b"-O3"),
        entry(2, 90, zs, flags=0x8011, comp_len=len(zs), uncomp=len(CUBIN), ident=b"kernels.cu"),
    ]


def write_replaced(name, index, replacement, expect, why):
    """Writes the fatbin of good_entries() with entry `index` replaced."""
    e = good_entries()
    e[index] = replacement
    write(name, fatbin(e), expect, why)


def host_elf(fatbin_bytes, section=".nv_fatbin", **kw):
    return elf64(62, 1, [(section, 1, fatbin_bytes, 0, 0, 0, 0, 2)], **kw)


def ar(members):
    out = b"!<arch>\n"
    for name, data in members:
        out += (name + "/").encode().ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + \
               b"644".ljust(8) + str(len(data)).encode().ljust(10) + b"`\n" + data
        if len(data) % 2:
            out += b"\n"
    return out


# ---- controls --------------------------------------------------------------------------

GOOD = fatbin(good_entries())
write("valid.fatbin", GOOD, "ok", "control: three entries (raw cubin, lz4 ptx, zstd cubin), all decodable")
write("valid.o", host_elf(GOOD + b"\0" * 8), "ok", "control: relocatable x86-64 object whose .nv_fatbin holds valid.fatbin plus zero padding")
write("valid.a", ar([("valid.o", host_elf(GOOD))]), "ok", "control: static library with one member carrying valid.fatbin")

# ---- truncations --------------------------------------------------------------------------

first_payload = 16 + 0x40
for cut, expect in [(3, "not an elf file, a fatbin or a supported archive"), (8, "run past the end"), (15, "run past the end"),
                    (16, "runs past the section end"), (40, "runs past the section end"),
                    (first_payload + 10, "runs past the section end"), (len(GOOD) - 1, "runs past the section end")]:
    write("truncated-%d.fatbin" % cut, GOOD[:cut], expect, "valid.fatbin cut after %d bytes" % cut)
ELF = host_elf(GOOD)
for cut, expect in [(10, "run past the end"), (64 + 40, "run past the end"), (len(ELF) - 30, "run past the end")]:
    write("truncated-%d.o" % cut, ELF[:cut], expect, "valid.o (without padding) cut after %d bytes" % cut)

# ---- header and entry damage ------------------------------------------------------------

write("bad-magic.fatbin", fatbin(good_entries(), magic=0xDEADBEEF), "not an elf file, a fatbin or a supported archive",
      "fatbin magic replaced by 0xdeadbeef: not recognised as any input kind")
write("bad-magic.o", host_elf(fatbin(good_entries(), magic=0xDEADBEEF)), "bad magic 0xdeadbeef",
      "object whose .nv_fatbin starts with 0xdeadbeef instead of the fatbin magic")
write("garbage-after.fatbin", GOOD + b"\x01\x02\x03\x04\x05\x06\x07\x08", "bad magic 0x4030201",
      "valid.fatbin followed by bytes that are neither padding nor a fatbin")
write("fatbin-past-section.fatbin", fatbin(good_entries(), fat_size=len(b"".join(good_entries())) + 0x1000),
      "runs past the section end", "fatbin header claims 0x1000 more bytes than the section holds")
write("zero-fatbin-header.fatbin", fatbin(good_entries(), header_size=0), "header size 0x0 is below 0x10",
      "fatbin header size 0")
write_replaced("entry-past-end.fatbin", 0, entry(2, 80, CUBIN, stored=len(pad8(CUBIN)) + 0x10000), "runs past the fatbin end", "first entry claims a payload 0x10000 bytes past the fatbin end")
write_replaced("overlapping-header.fatbin", 0, entry(2, 80, CUBIN, header_size=0x20), "below the minimum 0x40",
      "entry header size 0x20: the header would overlap its own payload")
write_replaced("overlapping-identifier.fatbin", 0, entry(2, 80, CUBIN, ident_off=0x7fff0000), "identifier at",
      "identifier offset points far outside its entry")
write_replaced("overlapping-options.fatbin", 0, entry(2, 80, CUBIN, opt_rec=0x3c), "options record",
      "options record at +0x3c overlaps the end of the 0x40-byte entry header")
write_replaced("zero-payload.fatbin", 0, entry(2, 80, b"", stored=0), "payload size is 0", "entry with a stored size of 0")
write_replaced("zero-header-size.fatbin", 0, entry(2, 80, CUBIN, header_size=0), "below the minimum 0x40", "entry header size 0")
write_replaced("unknown-kind.fatbin", 0, entry(0x77, 80, CUBIN), "unknown image kind 0x77", "entry kind 0x77")
write_replaced("both-compressions.fatbin", 0, entry(2, 80, CUBIN, flags=0xA011, comp_len=16, uncomp=64), "both lz4 and zstd", "flags claim lz4 and zstd at once")
write_replaced("both-suffixes.fatbin", 0, entry(2, 80, CUBIN, flags=0x300011), "both 'a' and 'f'", "flags claim an 'a' and an 'f' target at once")
write_replaced("arch-zero.fatbin", 0, entry(2, 0, CUBIN), "architecture 0x0 is not valid", "architecture number 0")
write_replaced("compressed-larger-than-stored.fatbin", 0, entry(2, 80, CUBIN, flags=0x8011, comp_len=len(CUBIN) + 64), "exceeds the stored size",
      "exact compressed length larger than the stored payload")

# ---- payload damage (parses; decompression or kernel listing refuses) ----------------------

zs = zstd_frame(CUBIN)
write_replaced("absurd-size.fatbin", 2, entry(2, 90, zs, flags=0x8011, comp_len=len(zs), uncomp=0x4000000000), "exceeds the limit", "zstd entry claiming 256 GiB uncompressed")
write_replaced("zstd-size-mismatch.fatbin", 2, entry(2, 90, zstd_frame(CUBIN, claimed=len(CUBIN) + 7), flags=0x8011, comp_len=len(zs), uncomp=len(CUBIN)), "zstd frame holds", "zstd frame content size differs from the entry header")
bad = b"\x00\x11\x22\x33" + zs[4:]
write_replaced("zstd-corrupt.fatbin", 2, entry(2, 90, bad, flags=0x8011, comp_len=len(bad), uncomp=len(CUBIN)), "not a zstd frame", "zstd payload without the zstd magic")
lz = lz4_block(PTX)
write_replaced("lz4-size-mismatch.fatbin", 1, entry(1, 80, lz, flags=0x2011, major=9, minor=0, comp_len=len(lz), uncomp=len(PTX) + 100), "lz4 payload decompresses to", "lz4 block yields 100 bytes less than the header claims")
write_replaced("lz4-corrupt.fatbin", 1, entry(1, 80, b"\xff" * 16, flags=0x2011, major=9, minor=0, comp_len=16, uncomp=4096), "lz4 payload of 0x10 bytes is corrupt", "lz4 block of sixteen 0xff bytes")
write_replaced("bad-cubin.fatbin", 0, entry(2, 80, b"not an elf file, just text...."), "not an elf file", "SASS entry whose payload is not an ELF file")
trunc_cubin = CUBIN[:len(CUBIN) - 40]
write_replaced("truncated-cubin.fatbin", 0, entry(2, 80, trunc_cubin), "run past the end", "SASS entry holding a cubin whose section table is cut")

# ---- ELF and archive damage --------------------------------------------------------------

write("elf32.o", host_elf(GOOD, ident_class=1), "is not elf64", "32-bit ELF header")
write("elf-big-endian.o", host_elf(GOOD, ident_data=2), "not little endian", "big-endian ELF header")
broken = bytearray(host_elf(GOOD))
shoff = struct.unpack_from("<Q", broken, 40)[0]
struct.pack_into("<Q", broken, shoff + 64 + 24, 0x7fffffff)  # section 1 (.nv_fatbin) offset
write("elf-section-past-end.o", bytes(broken), "section .nv_fatbin", ".nv_fatbin section offset 0x7fffffff, past the file end")
broken = bytearray(host_elf(GOOD))
struct.pack_into("<H", broken, 62, 200)
write("elf-bad-shstrndx.o", bytes(broken), "section name table index 0xc8", "section name table index 200 of 3 sections")
broken = bytearray(host_elf(GOOD))
struct.pack_into("<Q", broken, 40, 0xFFFFFFFFFFFFFFF0)
write("elf-shoff-overflow.o", bytes(broken), "run past the end", "section table offset near 2^64 (offset arithmetic overflow)")
broken = bytearray(host_elf(GOOD))
struct.pack_into("<H", broken, 60, 0)
struct.pack_into("<Q", broken, struct.unpack_from("<Q", broken, 40)[0] + 32, 0x7FFFFFFF)
write("elf-huge-shnum.o", bytes(broken), "section count 0x7fffffff is absurd", "extended section count 0x7fffffff")
write("archive-bad-member.a", ar([("good.o", host_elf(GOOD)), ("bad.o", host_elf(fatbin(good_entries(), magic=0x12345678)))]),
      "archive-bad-member.a:bad.o", "static library whose second member has a fatbin with bad magic 0x12345678")

with open(os.path.join(HERE, "MANIFEST.txt"), "w") as f:
    f.write("# file|substring the first error must contain (ok: no error)|what is broken\n")
    for name, expect, why in manifest:
        f.write("%s|%s|%s\n" % (name, expect, why))
print("wrote %d files" % len(manifest))
