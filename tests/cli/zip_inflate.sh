#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Deflated zip members inflated in one pass by libdeflate (issue 25): a wheel read that way gives
# the report libarchive's path gives (the same zip with data descriptors, which libarchive
# reads), and a member whose headers lie (its CRC-32, its size, its deflated data cut short) is a
# clear error naming the member, the offset and the values; headers that disagree with each
# other leave the member to libarchive. Every zip is written here, by hand (python3).
# Usage: zip_inflate.sh ARCHGUARD_BINARY MALFORMED_CORPUS_DIR
set -u
A="$1" M="$2"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hostile_start

python3 - "$T" "$M/valid.o" <<'PY'
import os, random, struct, sys, zlib
t, valid = sys.argv[1], open(sys.argv[2], 'rb').read()
# The object and 1 MiB that does not compress after it (the ELF reader ignores it): libarchive
# inflates the first block of a member to classify it, so the checks that follow the whole
# inflate need a member larger than that block.
big = valid + random.Random(25).randbytes(1 << 20)
def deflate(data):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()
def zip_bytes(members, descriptor=False):
    """members: (name, data, overrides); overrides: crc, size, local_size, cd_size, cut (bytes of
    deflated data kept, the sizes in both headers following it)"""
    out, cd = b'', b''
    for name, data, o in members:
        n = name.encode()
        comp = deflate(data)
        if 'cut' in o: comp = comp[:o['cut']]
        crc = o.get('crc', zlib.crc32(data))
        size = o.get('size', len(data))
        flags = 8 if descriptor else 0
        lcrc, lcomp, lsize = (0, 0, 0) if descriptor else (crc, len(comp), o.get('local_size', size))
        local = len(out)
        out += struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, flags, 8, 0, 0x21, lcrc, lcomp, lsize, len(n), 0) + n + comp
        if descriptor: out += struct.pack('<IIII', 0x08074b50, crc, len(comp), size)
        cd += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, flags, 8, 0, 0x21, crc, len(comp),
                          o.get('cd_size', size), len(n), 0, 0, 0, 0, 0, local) + n
    return out + cd + struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, len(members), len(members), len(cd), len(out), 0)
text = b'Wheel-Version: 1.0\n' * 40
nested = zip_bytes([('inner/valid.o', valid, {})])
good = [('pkg/lib/valid.o', valid, {}), ('pkg/lib/big.o', big, {}), ('pkg-1.0.dist-info/WHEEL', text, {}), ('pkg/nested.zip', nested, {})]
os.makedirs(f'{t}/fast'); os.makedirs(f'{t}/described')
open(f'{t}/fast/w.whl', 'wb').write(zip_bytes(good))
open(f'{t}/described/w.whl', 'wb').write(zip_bytes(good, descriptor=True))
def bad(name, **o):
    open(f'{t}/{name}.zip', 'wb').write(zip_bytes([('pkg/lib/big.o', big, o), ('pkg/lib/after.o', valid, {})]))
bad('crc', crc=zlib.crc32(big) ^ 1)
bad('larger', size=len(big) + 16)     # both headers: 16 bytes more than the data inflates to
bad('smaller', size=len(big) - 1)     # both headers: a byte less
bad('cut', cut=len(deflate(big)) // 2)
bad('disagree', cd_size=len(big) + 16)  # the central directory alone says otherwise
# Both headers claim 64 MiB more than 4 MiB of zeros: more than deflate can expand its data (the
# big member before it keeps the whole zip inside the inflate ratio budget).
zeros = b'\x7fELF' + bytes((4 << 20) - 4)
open(f'{t}/claim.zip', 'wb').write(zip_bytes([('lib/big.o', big, {}), ('lib/zero.o', zeros, {'size': len(zeros) + (64 << 20)})]))
PY
[ -s "$T/fast/w.whl" ] || fail "could not write the zips"

# The same members, read by libdeflate (fast/) and by libarchive (described/: data descriptors).
for args in "inspect" "inspect --json" "check --cc 9.0" "inspect --kernels"; do
  (cd "$T/fast" && "$A" $args w.whl) > "$T/fast.txt" 2>&1; rf=$?
  (cd "$T/described" && "$A" $args w.whl) > "$T/described.txt" 2>&1; rd=$?
  [ $rf -eq $rd ] && cmp -s "$T/fast.txt" "$T/described.txt" ||
    fail "$args: the one-pass inflate and libarchive differ (exit $rf, $rd): $(diff "$T/described.txt" "$T/fast.txt")"
done
grep -q "w.whl:pkg/lib/valid.o  (relocatable, x86-64)$" "$T/fast.txt" && grep -q "w.whl:pkg/lib/big.o  (relocatable, x86-64)$" "$T/fast.txt" ||
  fail "the members were not read: $(cat "$T/fast.txt")"
grep -q "w.whl:pkg/nested.zip:inner/valid.o" "$T/fast.txt" || fail "the nested zip was not read: $(cat "$T/fast.txt")"

# Headers that lie: a clear error (exit 2) naming the member, the offset and both values; the
# member after it is not read (as when libarchive stops at a damaged member).
expect_error() {  # <zip> <regex>
  "$A" inspect "$T/$1.zip" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
  [ $rc -eq 2 ] || fail "$1.zip: exit $rc, expected 2: $(cat "$T/err.txt")"
  grep -qE "$2" "$T/err.txt" || fail "$1.zip: message: $(cat "$T/err.txt")"
}
size=$(printf '0x%x' $(($(stat -c %s "$M/valid.o") + (1 << 20))))
expect_error crc "crc\.zip:pkg/lib/big\.o: the bytes inflated from the deflated data at 0x2b \(0x[0-9a-f]+ bytes\) have the crc-32 0x[0-9a-f]+, not the 0x[0-9a-f]+ the zip's headers say$"
expect_error larger "larger\.zip:pkg/lib/big\.o: the deflated data at 0x2b \(0x[0-9a-f]+ bytes\) inflates to $size bytes, not the 0x[0-9a-f]+ the zip's headers say$"
expect_error smaller "smaller\.zip:pkg/lib/big\.o: the deflated data at 0x2b \(0x[0-9a-f]+ bytes\) inflates to more than the 0x[0-9a-f]+ bytes the zip's headers say$"
expect_error cut "cut\.zip:pkg/lib/big\.o: cannot inflate the deflated data at 0x2b \(0x[0-9a-f]+ bytes\): not a valid deflate stream$"
grep -q "after.o" "$T/out.txt" && fail "cut.zip: the member after the damaged one was read"

# The central directory and the local header disagree: libarchive reads the member, as before
# (whatever it makes of it), and the one-pass inflate says nothing.
"$A" inspect "$T/disagree.zip" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -le 2 ] || fail "disagree.zip: exit $rc: $(cat "$T/err.txt")"
grep -q "the zip's headers say" "$T/err.txt" && fail "disagree.zip: read by the one-pass inflate: $(cat "$T/err.txt")"
# A size no deflate stream of that length reaches: no buffer is made for it, libarchive reads it.
"$A" inspect "$T/claim.zip" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -le 2 ] || fail "claim.zip: exit $rc: $(cat "$T/err.txt")"
grep -q "the zip's headers say" "$T/err.txt" && fail "claim.zip: read by the one-pass inflate: $(cat "$T/err.txt")"
echo "ok"
