#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hostile and unlucky input through the command line (issue 12). Every input is generated here
# (python3's zipfile/tarfile, mkfifo); nothing large is checked in and nothing large is written
# (bombs are streams of zeros that the budgets stop early).
# Usage: hostile.sh ARCHGUARD_BINARY MALFORMED_CORPUS_DIR [--unreadable-dir]
set -u
A="$1" M="$2"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hostile_start
trap 'chmod -R u+rwx "$T" 2>/dev/null; rm -rf "$T"' EXIT  # the unreadable directory too

# --- a directory that cannot be read makes verify fail (exit 2), naming it ----------------
# Its own CTest entry (--unreadable-dir): as root it needs setpriv to drop privileges, and
# without it this part reports "Skipped" (77) instead of passing unchecked.
if [ "${3:-}" = --unreadable-dir ]; then
  mkdir -p "$T/tree/ok" "$T/tree/locked/deep"
  cp "$M/valid.o" "$T/tree/ok/"
  cp "$M/valid.o" "$T/tree/locked/deep/"
  chmod 0755 "$T" "$T/tree" "$T/tree/ok"; chmod 0644 "$T/tree/ok/valid.o"
  chmod 0000 "$T/tree/locked"
  run_unprivileged=()
  if [ "$(id -u)" -eq 0 ]; then  # root reads everything: drop to nobody for this check
    command -v setpriv >/dev/null || { echo "SKIPPED: root without setpriv(1): every directory is readable"; exit 77; }
    run_unprivileged=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  fi
  "${run_unprivileged[@]}" "$A" verify --require 80 "$T/tree" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
  [ $rc -eq 2 ] || fail "unreadable directory: exit $rc: $(cat "$T/out.txt" "$T/err.txt")"
  grep -q "tree/locked: cannot read the directory: Permission denied; its files were not checked" "$T/err.txt" \
    || fail "unreadable directory message: $(cat "$T/err.txt")"
  echo "ok"
  exit 0
fi

# --- archive bombs: budgets stop them, naming the member and the limit -------------------------
python3 - "$T" "$M/valid.o" <<'PY'
import io, sys, tarfile, zipfile, os
t, valid = sys.argv[1], open(sys.argv[2], 'rb').read()
class Zeros(io.RawIOBase):  # n bytes of an ELF header then zeros, streamed
    def __init__(self, n): self.left = n; self.head = b'\x7fELF\x02\x01\x01'
    def readable(self): return True
    def readinto(self, b):
        k = min(len(b), self.left)
        if k == 0: return 0
        chunk = (self.head + bytes(k))[:k]; self.head = b''
        b[:k] = chunk; self.left -= k; return k
def tar_gz(path, members):
    with tarfile.open(path, 'w:gz', compresslevel=1) as tf:
        for name, n in members:
            ti = tarfile.TarInfo(name); ti.size = n
            tf.addfile(ti, io.BufferedReader(Zeros(n), 1 << 20))
tar_gz(f'{t}/bomb.tar.gz', [('lib/libbomb.so', 400 << 20)])        # ~400 KB: ratio ~1000
tar_gz(f'{t}/data.tar.gz', [('share/blob.bin', 2 << 20)])           # not ELF: drained, counted
with zipfile.ZipFile(f'{t}/skip.zip', 'w', zipfile.ZIP_DEFLATED) as z:
    with z.open('data/blob.bin', 'w', force_zip64=True) as f:         # not ELF: never inflated
        f.write(b'DATA'); [f.write(bytes(1 << 20)) for _ in range(64)]
    z.writestr('lib/valid.o', valid)
# Names with control characters: a newline and a terminal escape in a member name.
with zipfile.ZipFile(f'{t}/names.zip', 'w') as z:
    z.writestr('lib/evil\nFORGED LINE \x1b[31mred.o', valid)
PY
[ -s "$T/bomb.tar.gz" ] || fail "could not generate the bombs"

"$A" inspect "$T/bomb.tar.gz" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "ratio bomb: exit $rc, expected 2: $(cat "$T/err.txt")"
grep -q "bomb.tar.gz:lib/libbomb.so: stopped after inflating 0x[0-9a-f]* bytes: the input of 0x[0-9a-f]* bytes inflates more than 200 times (raise the ratio with --max-ratio or ARCHGUARD_MAX_RATIO)" "$T/err.txt" \
  || fail "ratio bomb message: $(cat "$T/err.txt")"

"$A" verify --require 80 --max-inflated 1M "$T/data.tar.gz" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "per-input budget: exit $rc"
grep -q "data.tar.gz:share/blob.bin: stopped after inflating .*more than the limit 0x100000 (1 MiB) per input (raise it with --max-inflated or ARCHGUARD_MAX_INFLATED)" "$T/err.txt" \
  || fail "per-input budget message: $(cat "$T/err.txt")"
ARCHGUARD_MAX_INFLATED_TOTAL=3M "$A" inspect "$T/data.tar.gz" "$T/data.tar.gz" > /dev/null 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "per-run budget: exit $rc"
grep -q "per run (raise it with --max-inflated-total" "$T/err.txt" || fail "per-run budget message: $(cat "$T/err.txt")"
ARCHGUARD_MAX_INFLATED=17179869184G "$A" inspect "$T/data.tar.gz" > /dev/null 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "overflowing size: exit $rc"
grep -q "ARCHGUARD_MAX_INFLATED: '17179869184G' is not a size" "$T/err.txt" || fail "overflow message: $(cat "$T/err.txt")"

# A zip member whose first bytes show no ELF is skipped without inflating its 64 MiB: a budget
# of 1 MiB is not touched, and the ELF member beside it is read.
"$A" inspect --max-inflated 1M "$T/skip.zip" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -eq 0 ] || fail "skipped member: exit $rc: $(cat "$T/err.txt")"
# The member's verdict, not only its name: its fatbin and images were read.
grep -q "/skip.zip:lib/valid.o  (relocatable, x86-64)$" "$T/out.txt" &&
  grep -q "coverage: sass sm_80 sm_90; ptx compute_80" "$T/out.txt" || fail "the ELF member was not read: $(cat "$T/out.txt")"

# --- names are escaped in human output (JSON escapes by itself) -----------------------------
"$A" inspect "$T/names.zip" > "$T/out.txt" 2>&1 || fail "names.zip: exit $?"
grep -q '^FORGED' "$T/out.txt" && fail "a member name forged an output line: $(cat "$T/out.txt")"
grep -q $'\x1b' "$T/out.txt" && fail "a terminal escape reached the output"
grep -qF 'lib/evil\x0aFORGED LINE \x1b[31mred.o' "$T/out.txt" || fail "escaped name not shown: $(cat "$T/out.txt")"

# --- a FIFO is refused at once, not waited on ---------------------------------------------
mkfifo "$T/fifo"
timeout 10 "$A" inspect "$T/fifo" > /dev/null 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "fifo: exit $rc (124: it blocked)"
grep -q "fifo: is a FIFO (named pipe), not a regular file" "$T/err.txt" || fail "fifo message: $(cat "$T/err.txt")"

# --- verify: an image whose payload does not decode is an error, not ok -------------------
"$A" verify --require 80 "$M/lz4-corrupt.fatbin" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "undecodable image: exit $rc: $(cat "$T/out.txt" "$T/err.txt")"
grep -q "lz4 payload of 0x10 bytes is corrupt; the driver cannot load this image" "$T/err.txt" \
  || fail "undecodable image message: $(cat "$T/err.txt")"
"$A" verify --require 80 "$M/valid.fatbin" > /dev/null 2>&1 || fail "a sound fatbin failed verify"

echo "ok"
