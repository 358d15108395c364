#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hostile input, round three, through the command line (issue 22): names that are not UTF-8
# under --json, terminal escapes in human output, files skipped in silence (Mach-O, thin
# archives, links out of a tree, second names of hard links), --threads bounds, a sass image
# that is no cubin. Every input is generated here and small.
# Usage: hostile3.sh ARCHGUARD_BINARY MALFORMED_CORPUS_DIR
set -u
A="$1" M="$2"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hostile_start
partial=""  # parts that could not run here: the script exits 77 after the others passed
is_json() { python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }

# --- names that are not UTF-8: every verb's --json writes them as \xNN, no abort --------------
mkdir -p "$T/latin"
cp "$M/valid.o" "$T/latin/$(printf 'caf\xe9.o')"
python3 - "$T" "$M/valid.o" <<'PY'
import sys, tarfile, io
t, valid = sys.argv[1], open(sys.argv[2], 'rb').read()
with tarfile.open(f'{t}/latin.tar', 'w', format=tarfile.GNU_FORMAT, encoding='latin-1') as tf:
    ti = tarfile.TarInfo('lib/caf\xe9.o'); ti.size = len(valid)
    tf.addfile(ti, io.BytesIO(valid))
PY
for verb in "inspect --json" "inspect --json --kernels" "verify --require 80 --json" "check --cc 8.0 --json"; do
  for input in "$T/latin" "$T/latin.tar"; do
    # shellcheck disable=SC2086
    "$A" $verb "$input" > "$T/out.json" 2> "$T/err.txt"; rc=$?
    [ $rc -le 2 ] || fail "$verb $input: exit $rc (abort?): $(cat "$T/err.txt")"
    is_json "$T/out.json" || fail "$verb $input: not JSON: $(head -c 300 "$T/out.json") $(cat "$T/err.txt")"
    grep -q 'caf\\\\xe9' "$T/out.json" || fail "$verb $input: the name is not written as \\xe9: $(head -c 600 "$T/out.json")"
  done
done
echo "ok: non-utf-8 names under --json"

# --- a fatbin file whose two fatbins differ: the coverage lines are two lines, not \x0a -------
python3 - "$T" <<'PY'
import struct, sys
def fatbin(arch, ptx):
    p = ptx + b'\0' * (-len(ptx) % 8)
    e = struct.pack('<HHIQIIHHIIIQQQ', 1, 0x0101, 0x40, len(p), 0, 0, 0, 8, arch, 0, 0, 0x11, 0, 0) + p
    return struct.pack('<IHHQ', 0xBA55ED50, 1, 16, len(e)) + e
t = sys.argv[1]
open(f'{t}/two.fatbin', 'wb').write(fatbin(80, b'.version 8.0\n.target sm_80\n') + fatbin(90, b'.version 8.0\n.target sm_90\n'))
# A fatbin whose sm_80 sass "image" is text: it decodes, but it is no cubin.
def sass(arch, payload):
    p = payload + b'\0' * (-len(payload) % 8)
    e = struct.pack('<HHIQIIHHIIIQQQ', 2, 0x0101, 0x40, len(p), 0, 0, 7, 1, arch, 0, 0, 0x11, 0, 0) + p
    return struct.pack('<IHHQ', 0xBA55ED50, 1, 16, len(e)) + e
open(f'{t}/fake.fatbin', 'wb').write(sass(80, b'no cubin at all, just some text here'))
PY
"$A" inspect --summary "$T/two.fatbin" > "$T/out.txt" 2>&1 || fail "inspect --summary: $(cat "$T/out.txt")"
grep -q 'x0a' "$T/out.txt" && fail "inspect --summary prints a literal \\x0a: $(cat "$T/out.txt")"
grep -q '^  in some fatbins only (not enough to run every kernel): union sass none; ptx compute_80 compute_90' "$T/out.txt" \
  || fail "inspect --summary: second coverage line missing: $(cat "$T/out.txt")"
echo "ok: coverage lines"

# --- verify does not say ok for a sass image that is no cubin ---------------------------------
"$A" verify --require 80 "$T/fake.fatbin" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "verify of a non-cubin image: exit $rc: $(cat "$T/out.txt" "$T/err.txt")"
grep -q "fake.fatbin: entry 0 at 0x10: the sass image decodes to 0x28 bytes that are no cubin: no elf magic" "$T/err.txt" \
  || fail "verify non-cubin message: $(cat "$T/err.txt")"
echo "ok: verify of a non-cubin image"

# --- terminal: C1 controls and bidirectional overrides are escaped; other UTF-8 passes ------
python3 - "$T" "$M/valid.o" <<'PY'
import sys, zipfile
t, valid = sys.argv[1], open(sys.argv[2], 'rb').read()
with zipfile.ZipFile(f'{t}/names.zip', 'w') as z:
    z.writestr('lib/\u00fcn\u00efcode.o', valid)     # non-ASCII: shown as it is (it was "?")
    z.writestr('lib/csi\u009b2J.o', valid)           # C1 CSI: a terminal obeys it
    z.writestr('lib/rlo\u202etxt.o', valid)          # right-to-left override
PY
"$A" inspect "$T/names.zip" > "$T/out.txt" 2>&1 || fail "inspect names.zip: $(cat "$T/out.txt")"
grep -q 'lib/ünïcode.o' "$T/out.txt" || fail "non-ASCII member name not shown: $(cat "$T/out.txt")"
grep -q 'lib/csi\\xc2\\x9b2J.o' "$T/out.txt" || fail "C1 control not escaped: $(cat -v "$T/out.txt")"
grep -q 'lib/rlo\\xe2\\x80\\xaetxt.o' "$T/out.txt" || fail "bidi override not escaped: $(cat -v "$T/out.txt")"
LC_ALL=C grep -q $'\xc2\x9b' "$T/out.txt" && fail "a raw C1 byte reached the output"
echo "ok: terminal escapes"

# --- --threads is bounded --------------------------------------------------------------------
"$A" inspect --threads 100000 "$M/valid.o" > "$T/out.txt" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--threads 100000: exit $rc: $(cat "$T/out.txt")"
grep -q -- "--threads" "$T/out.txt" || fail "--threads message: $(cat "$T/out.txt")"
"$A" inspect --threads 256 "$M/valid.o" > /dev/null 2>&1 || fail "--threads 256 refused"
echo "ok: --threads"

# --- nothing skipped in silence: Mach-O, thin archives, links out of the tree, hard links -----
mkdir -p "$T/tree/sub" "$T/outside"
cp "$M/valid.o" "$T/tree/a.o"
cp "$M/valid.o" "$T/outside/far.o"
ln "$T/tree/a.o" "$T/tree/sub/b.o"                      # a second name of a.o
ln -s "$T/outside/far.o" "$T/tree/far-link.o"           # out of the tree
ln -s "$T/outside" "$T/tree/far-dir"                    # a directory out of the tree
ln -s a.o "$T/tree/near-link.o"                         # in the tree: read as a.o
printf '\xcf\xfa\xed\xfe\x07\x00\x00\x01rest of a mach-o header' > "$T/tree/libmac.dylib"
printf '!<thin>\n' > "$T/tree/libthin.a"
"$A" inspect --json "$T/tree" > "$T/out.json" 2> "$T/err.txt" || fail "inspect tree: $(cat "$T/err.txt")"
python3 - "$T/out.json" "$T" <<'PY' || fail "inspect tree --json: $(head -c 1500 "$T/out.json")"
import json, sys
d = json.load(open(sys.argv[1])); t = sys.argv[2]
i = d['inputs'][0]
paths = [o['path'] for o in i['objects']]
assert paths == [f'{t}/tree/a.o'], paths                  # once, not twice
assert i['files_read'] == 1, i['files_read']              # a.o only: the rest is skipped
sk = i['skipped']
want = [f'{t}/tree/far-dir: a symbolic link to the directory {t}/outside outside the tree',
        f'{t}/tree/far-link.o: a symbolic link to {t}/outside/far.o outside the tree',
        f'{t}/tree/libmac.dylib: a mach-o file (macos): not supported',
        f'{t}/tree/libthin.a: a thin archive (ar T)',
        f'{t}/tree/sub/b.o: the same file as {t}/tree/a.o (a hard link)']
assert len(sk) == len(want), sk
for s, w in zip(sk, want): assert s.startswith(w), (s, w)
PY
grep -q "archguard: note: not read: $T/tree/libmac.dylib: a mach-o file" <("$A" inspect "$T/tree" 2>&1) \
  || fail "human output does not name the skipped mach-o file"
"$A" verify --require 80 "$T/tree" > "$T/out.txt" 2> "$T/err.txt"
grep -q "not read: $T/tree/far-link.o: a symbolic link" "$T/err.txt" || fail "verify does not name the link: $(cat "$T/err.txt")"
"$A" inspect "$T/tree/libmac.dylib" > "$T/out.txt" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "a mach-o file named: exit $rc"
grep -q "libmac.dylib: a mach-o file (macos): not supported" "$T/out.txt" || fail "mach-o message: $(cat "$T/out.txt")"
echo "ok: nothing skipped in silence"

# --- the progress line on a terminal escapes the path ---------------------------------------
# A read that takes over a second draws "archguard: reading PATH ... N s" on a terminal; a file
# name holding an OSC sequence set the window title. script(1) gives stderr a terminal.
if ! command -v script >/dev/null; then
  partial="$partial progress-line(no script(1))"
else
  F="$T/$(printf 'evil\033]0;pwned\007.tar.xz')"
  python3 - "$F" <<'PY'
import io, sys, tarfile
data = b'\x7fELF\x02\x01\x01' + bytes((400 << 20) - 7)   # decoding 400 MB takes over a second
with tarfile.open(sys.argv[1], 'w:xz', preset=0) as tf:
    ti = tarfile.TarInfo('lib/big.so'); ti.size = len(data); tf.addfile(ti, io.BytesIO(data))
PY
  A="$A" F="$F" TMPDIR="$T" script -qec '"$A" inspect --max-ratio 1000000 "$F"' /dev/null > "$T/tty.txt" 2>&1
  LC_ALL=C grep -q $'\033]0;' "$T/tty.txt" && fail "the progress line printed the path raw: $(cat -v "$T/tty.txt")"
  if grep -q 'archguard: reading ' "$T/tty.txt"; then
    grep -q 'reading .*evil\\x1b]0;pwned\\x07.tar.xz' "$T/tty.txt" || fail "progress line: $(cat -v "$T/tty.txt")"
    echo "ok: progress line"
  else
    echo "skipped: the read took under a second here, no progress line was drawn"; partial="$partial progress-line"
  fi
fi

# --- the mappings held are bounded (ARCHGUARD_MAX_MAPPINGS) -----------------------------------
python3 -c 'import sys; open(sys.argv[1], "wb").write(open(sys.argv[2], "rb").read() + bytes(2 << 20))' "$T/padded.so" "$M/valid.o"
ARCHGUARD_MAX_MAPPINGS=0 "$A" inspect "$T/tree" > "$T/out.txt" 2>&1 || fail "small files need no mapping: $(cat "$T/out.txt")"
mkdir -p "$T/bigtree"; cp "$T/padded.so" "$T/bigtree/"
ARCHGUARD_MAX_MAPPINGS=0 "$A" inspect "$T/bigtree" > "$T/out.txt" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "mapping limit: exit $rc: $(cat "$T/out.txt")"
grep -q "padded.so: not read: 0 files are mapped already, the limit" "$T/out.txt" || fail "mapping limit message: $(cat "$T/out.txt")"
ARCHGUARD_MAX_MAPPINGS=x "$A" inspect "$T/bigtree" > "$T/out.txt" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "ARCHGUARD_MAX_MAPPINGS: 'x' is not a whole number" "$T/out.txt" || fail "bad ARCHGUARD_MAX_MAPPINGS: $(cat "$T/out.txt")"
echo "ok: mappings bounded"

# --- a plain tar layer inside a plain image tar is not charged as inflated (twice) ------------
python3 - "$T" "$M/valid.o" <<'PY'
import io, sys, tarfile
t, valid = sys.argv[1], open(sys.argv[2], 'rb').read()
big = valid + bytes((6 << 20) - len(valid))  # 6 MiB: an object with padding
inner = io.BytesIO()
with tarfile.open(fileobj=inner, mode='w') as tf:
    ti = tarfile.TarInfo('usr/lib/libbig.so'); ti.size = len(big); tf.addfile(ti, io.BytesIO(big))
with tarfile.open(f'{t}/image.tar', 'w') as tf:
    ti = tarfile.TarInfo('layer/layer.tar'); ti.size = len(inner.getvalue()); tf.addfile(ti, io.BytesIO(inner.getvalue()))
PY
"$A" inspect --max-inflated 8M "$T/image.tar" > "$T/out.txt" 2>&1 || fail "plain tar in plain tar charged as inflated: $(cat "$T/out.txt")"
grep -q "image.tar:layer/layer.tar:usr/lib/libbig.so" "$T/out.txt" || fail "plain layer not read: $(cat "$T/out.txt")"
gzip -1 -c "$T/image.tar" > "$T/image.tar.gz"
"$A" inspect --max-inflated 4M "$T/image.tar.gz" > "$T/out.txt" 2>&1 && fail "a compressed image is not charged: $(cat "$T/out.txt")"
grep -q "stopped after inflating" "$T/out.txt" || fail "compressed image budget message: $(cat "$T/out.txt")"
echo "ok: plain tar layers charged once"

# --- large members are spilled to $TMPDIR, not to /tmp regardless ----------------------------
python3 - "$T" <<'PY'
import io, sys, tarfile
t = sys.argv[1]
data = b'\x7fELF\x02\x01\x01' + bytes((40 << 20) - 7)   # past the 32 MiB spill threshold
with tarfile.open(f'{t}/big.tar.gz', 'w:gz', compresslevel=1) as tf:
    ti = tarfile.TarInfo('lib/libbig.so'); ti.size = len(data)
    tf.addfile(ti, io.BytesIO(data))
PY
TMPDIR="$T/no-such-dir" "$A" inspect "$T/big.tar.gz" > "$T/out.txt" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "spill with TMPDIR unusable: exit $rc: $(cat "$T/out.txt")"
grep -q "big.tar.gz:lib/libbig.so: cannot create a temporary file" "$T/out.txt" || fail "spill ignores TMPDIR: $(cat "$T/out.txt")"
mkdir -p "$T/spill"
TMPDIR="$T/spill" "$A" inspect "$T/big.tar.gz" > "$T/out.txt" 2>&1
grep -q "cannot create a temporary file" "$T/out.txt" && fail "spill into TMPDIR failed: $(cat "$T/out.txt")"
[ -z "$(ls -A "$T/spill")" ] || fail "a spill file was left behind: $(ls -A "$T/spill")"
echo "ok: spills honour TMPDIR"

# --- a sparse file: its holes are skipped, not read page by page ----------------------------
# 2 GiB of .rodata and 2 GiB of .nv_fatbin, 4 KB on disk. Counted in page faults, not time:
# read page by page they cost a million page faults, 17 s and 2 GB (a 16 GiB file took 49 s).
python3 - "$T" <<'PY'
import struct, sys
t = sys.argv[1]
G = 2 << 30
shstr = b'\0.shstrtab\0.rodata\0.nv_fatbin\0'
ehdr = b'\x7fELF\x02\x01\x01' + b'\0' * 9 + struct.pack('<HHIQQQIHHHHHH', 3, 62, 1, 0, 0, 64, 0, 64, 0, 0, 64, 4, 1)
def sh(name, type_, flags, addr, off, size):
    return struct.pack('<IIQQQQIIQQ', name, type_, flags, addr, off, size, 0, 0, 8, 0)
hdrs = sh(0, 0, 0, 0, 0, 0) + sh(1, 3, 0, 0, 512, len(shstr)) + sh(11, 1, 2, 0x10000, 4096, G) + sh(19, 1, 2, 0x10000 + G, 4096 + G, G)
with open(f'{t}/sparse.so', 'wb') as f:
    f.write(ehdr + hdrs)
    f.seek(512); f.write(shstr)
    f.truncate(4096 + 2 * G)
PY
if [ "$(du -k "$T/sparse.so" | cut -f1)" -lt 1024 ]; then  # the file system keeps holes
  python3 - "$A" "$T/sparse.so" <<'PY' || fail "sparse file"
import resource, subprocess, sys
r = subprocess.run([sys.argv[1], 'inspect', sys.argv[2]], capture_output=True, text=True)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
faults = u.ru_minflt + u.ru_majflt  # holes read through the mapping fault as major faults
assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
assert 'no device code' in r.stdout, r.stdout
assert faults < 50000, f'{faults} page faults: the holes were read'
print(f'sparse: {faults} page faults')
PY
  echo "ok: sparse file"
else
  echo "skipped: the file system here does not keep holes"; partial="$partial sparse-file"
fi
[ -z "$partial" ] || { echo "SKIPPED: parts that could not run here:$partial (the others passed)"; exit 77; }
echo "ok"
