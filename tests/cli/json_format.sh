#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `inspect --json` writes each object's fatbins and images directly (not through a JSON tree):
# the text must be exactly what a JSON library writes for the same document with indent 2 and
# sorted keys (python3's json.dumps, which nlohmann-json matches: "key": value, "[]" and "{}" when
# empty, control characters as \uXXXX in lower case, other characters as they are), and every
# fatbin and image must be there. Inputs: the malformed corpus (PTX, cubins, LTO-IR, damaged
# images, kernel lists and their errors), a host program without device code, and copies of the
# corpus's objects under names with quotes, backslashes, control characters, DEL, bytes that are
# not UTF-8 and non-ASCII letters.
# Usage: json_format.sh ARCHGUARD_BINARY MALFORMED_CORPUS_DIR
set -u
A="$1" M="$2"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hostile_start

mkdir -p "$T/names"
for name in 'quote"d' 'back\slash' $'tab\there' $'new\nline' $'ctl\001\037' $'del\177' $'latin1-\xe9' 'utf8-é' 'plain'; do
  cp "$M/valid.a" "$T/names/$name.a"
  cp "$M/valid.fatbin" "$T/names/$name.fatbin"
done

# Fatbins whose own strings need escaping: identifiers and ptxas options with quotes,
# backslashes, control characters, DEL, bytes that are not UTF-8 and non-ASCII letters, and a
# cubin whose kernel names hold the same (listed with --kernels).
python3 - "$T/names" <<'PY'
import struct, sys
out = sys.argv[1]
def pad8(b): return b + b"\0" * (-len(b) % 8)
def elf64(sections):
    # sections: (name, type, data, link, entsize); .shstrtab last
    names = b"\0" + b"".join(n.encode() + b"\0" for n, *_ in sections) + b".shstrtab\0"
    body, headers, at, name_at = b"", [struct.pack("<IIQQQQIIQQ", *([0] * 10))], 64, 1
    for n, typ, data, link, entsize in sections + [(".shstrtab", 3, names, 0, 0)]:
        headers.append(struct.pack("<IIQQQQIIQQ", name_at, typ, 0, 0, at + len(body), len(data), link, 1 if typ == 2 else 0, 8, entsize))
        name_at += len(n) + 1
        body += pad8(data)
    shoff = 64 + len(body)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    hdr = ident + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, 0x5a00, 64, 0, 0, 64, len(headers), len(headers) - 1)
    return hdr + body + b"".join(headers)
def cubin(kernels):
    strtab = b"\0" + b"".join(k + b"\0" for k in kernels)
    sym, at = struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0), 1
    for k in kernels:
        sym += struct.pack("<IBBHQQ", at, 0x12, 0x10, 1, 0, 16)
        at += len(k) + 1
    return elf64([(".strtab", 3, strtab, 0, 0), (".symtab", 2, sym, 1, 24)])
def entry(kind, arch, payload, ident=b"", options=b""):
    ext, id_off, opt_field = b"", 0, 0
    if ident:
        id_off = 0x40
        ext += pad8(ident + b"\0")
    if options:
        opt_field = 0x40 + len(ext)
        ext += struct.pack("<II", opt_field + 8, len(options)) + pad8(options + b"\0")
    body = pad8(payload)
    hdr = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x0101, 0x40 + len(ext), len(body), 0, opt_field, 8, 1, arch,
                      id_off, len(ident), 0x11, 0, 0)
    return hdr + ext + body
odd = b'q"b\\s\tt\nn\x01\x1f\x7f-\xe9-\xc3\xa9'
ptx = b".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(\n)\n{\n\tret;\n}\n"
entries = entry(2, 80, cubin([b"_Z1kv", odd, b"plain"]), ident=odd) + entry(1, 80, ptx + b"\0", ident=b"ok.cu", options=odd)
open(out + "/odd-strings.fatbin", "wb").write(struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entries)) + entries)
PY

check_text() {  # label file: the text is the canonical dump of what it parses to; counts agree
  python3 - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
text = open(path, encoding='utf-8').read()
doc = json.loads(text)
again = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
if again != text:
    a, b = text.splitlines(), again.splitlines()
    n = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    print("FAIL: %s: line %d differs from a sorted re-dump:\n  got:    %r\n  wanted: %r" % (label, n + 1, a[n] if n < len(a) else None, b[n] if n < len(b) else None))
    sys.exit(1)
objects = images = 0
for inp in doc["inputs"]:
    for o in inp["objects"]:
        objects += 1
        c = o["fatbin_counts"]
        total = sum(c[k] for k in ("nv_fatbin", "nv_relfatbin", "embedded", "standalone", "memory"))
        assert total == len(o["fatbins"]), (label, o["path"], total, len(o["fatbins"]))
        assert o["coverage"]["fatbins"] == len(o["fatbins"]), (label, o["path"])
        for i, fb in enumerate(o["fatbins"]):
            assert fb["index"] == i, (label, o["path"], i)
            for k, e in enumerate(fb["images"]):
                assert e["index"] == k, (label, o["path"], i, k)
                images += 1
        assert o["coverage"]["images"] == sum(len(fb["images"]) for fb in o["fatbins"]), (label, o["path"])
print("ok: %s: canonical text, %d objects, %d images" % (label, objects, images))
PY
}

fails=0
run_case() {  # label args...
  local label="$1"
  shift
  "$A" inspect --json --no-cache "$@" > "$T/out.json" 2> "$T/err.txt"
  local rc=$?
  if [ "$rc" -gt 2 ]; then
    echo "FAIL: $label: exit $rc"; head -5 "$T/err.txt"; fails=$((fails + 1)); return
  fi
  check_text "$label" "$T/out.json" || fails=$((fails + 1))
}
run_case "the malformed corpus" "$M"
run_case "the malformed corpus, --kernels" --kernels "$M"
run_case "names that need escaping" "$T/names"
run_case "names that need escaping, --kernels" --kernels "$T/names"
host_elf=$(readlink -f "$(type -P true)")
run_case "an ELF file without device code" "$host_elf"
run_case "several inputs" "$M/valid.a" "$T/names" "$M/valid.fatbin"
"$A" inspect --json --no-cache "$host_elf" | grep -q '"fatbins": \[\]' && echo "ok: no fatbins: []" || { echo "FAIL: an object without fatbins does not say \"fatbins\": []"; fails=$((fails + 1)); }
"$A" inspect --json --no-cache --kernels "$T/names/odd-strings.fatbin" > "$T/odd.json"
for want in '"identifier": "q\"b\\s\tt\nn\u0001\u001f'$'\x7f''-\\xe9-é"' '"options": "q\"b' '"name": "q\"b\\s\tt\nn\u0001'; do
  grep -qF -- "$want" "$T/odd.json" && echo "ok: written as $want" || { echo "FAIL: not found in the JSON: $want"; fails=$((fails + 1)); }
done
[ "$fails" = 0 ] || { echo "json_format: $fails failed"; exit 1; }
