#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Container images are judged as their final filesystem: the layers of a `docker save` tarball
# (manifest.json) or an OCI layout (index.json -> manifest -> layer blobs, gzip) are applied in
# order, and a file that a later layer deletes (whiteout, opaque directory) or replaces is
# reported as not judged, with the reason, never silently. The images are built here (python3
# tarfile) from the fixtures of tests/data/malformed: valid.o (sm_80, sm_90, compute_80) and
# truncated-1530.o (an error when judged).
# Usage: container_layers.sh ARCHGUARD_BINARY MALFORMED_CORPUS_DIR
set -u
A="$1" M="$2"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hostile_start

python3 - "$T" "$M/valid.o" "$M/truncated-1530.o" <<'PY' || fail "could not build the images"
import gzip, hashlib, io, json, sys, tarfile
t, valid, bad = sys.argv[1], open(sys.argv[2], 'rb').read(), open(sys.argv[3], 'rb').read()
def tar_bytes(members, gz=False):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode='w') as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            if data is None:
                ti.type = tarfile.DIRTYPE; tf.addfile(ti)
            else:
                ti.size = len(data); tf.addfile(ti, io.BytesIO(data))
    return gzip.compress(b.getvalue(), mtime=0) if gz else b.getvalue()
# Layer 1: five libraries; layer 2 deletes or replaces four of them.
l1 = [('usr/', None), ('usr/lib/', None), ('usr/lib/libdel.so', bad), ('usr/lib/librep.so', bad),
      ('opt/', None), ('opt/d/', None), ('opt/d/libopq.so', bad), ('gone/', None), ('gone/libdir.so', bad),
      ('keep/', None), ('keep/libkeep.so', valid)]
l2 = [('usr/lib/.wh.libdel.so', b''),       # whiteout of a file
      ('usr/lib/librep.so', valid),         # replaced
      ('opt/d/', None), ('opt/d/.wh..wh..opq', b''), ('opt/d/libnew.so', valid),  # opaque directory
      ('.wh.gone', b'')]                    # whiteout of a directory
def add(tf, name, data):
    ti = tarfile.TarInfo(name); ti.size = len(data); tf.addfile(ti, io.BytesIO(data))
# docker save: layer tars first, manifest.json last (as docker writes it)
with tarfile.open(f'{t}/docker.tar', 'w') as tf:
    add(tf, 'aaa/layer.tar', tar_bytes(l1)); add(tf, 'bbb/layer.tar', tar_bytes(l2)); add(tf, 'cfg.json', b'{}')
    add(tf, 'manifest.json', json.dumps([{'Config': 'cfg.json', 'RepoTags': ['x:1'], 'Layers': ['aaa/layer.tar', 'bbb/layer.tar']}]).encode())
# the same layers with no manifest: a plain archive of archives, every member judged
with tarfile.open(f'{t}/plain.tar', 'w') as tf:
    add(tf, 'aaa/layer.tar', tar_bytes(l1)); add(tf, 'bbb/layer.tar', tar_bytes(l2))
# two images in one manifest: not applied, said so
with tarfile.open(f'{t}/two.tar', 'w') as tf:
    add(tf, 'aaa/layer.tar', tar_bytes(l1)); add(tf, 'bbb/layer.tar', tar_bytes(l2))
    add(tf, 'manifest.json', json.dumps([{'Layers': ['aaa/layer.tar']}, {'Layers': ['aaa/layer.tar', 'bbb/layer.tar']}]).encode())
# OCI layout: gzip layer blobs named by digest (stored in digest order, not layer order)
blobs = {}
def blob(data):
    h = hashlib.sha256(data).hexdigest(); blobs[h] = data; return {'digest': 'sha256:' + h, 'size': len(data)}
d1, d2 = blob(tar_bytes(l1, True)), blob(tar_bytes(l2, True))
m = blob(json.dumps({'schemaVersion': 2, 'config': blob(b'{}'), 'layers': [d1, d2]}).encode())
with tarfile.open(f'{t}/oci.tar', 'w') as tf:
    add(tf, 'oci-layout', b'{"imageLayoutVersion": "1.0.0"}')
    for h, data in sorted(blobs.items()): add(tf, 'blobs/sha256/' + h, data)
    add(tf, 'index.json', json.dumps({'schemaVersion': 2, 'manifests': [m]}).encode())
# what the gzip layers' members hold: the bytes the budget counts, once each
open(f'{t}/oci-inflated', 'w').write(str(sum(len(d) for _, d in l1 + l2 if d is not None)))
PY

# What inspect --json reads of an image: the visible files, and the others under skipped.
judged() {  # image -> "objects|skipped reasons|errors"
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
i = d['inputs'][0]
objs = sorted(o['path'].rsplit(':', 1)[1] for o in i['objects'] if o['fatbins'])
why = sorted(i['skipped'])
print(' '.join(objs))
for s in why: print('skipped: ' + s)
print('errors: %d' % len(d['errors']))
PY
}
for img in docker oci; do
  "$A" inspect --json "$T/$img.tar" > "$T/$img.json" 2> "$T/err.txt"; rc=$?
  [ $rc -eq 0 ] || fail "$img: inspect exit $rc: $(cat "$T/err.txt")"
  judged "$T/$img.json" > "$T/$img.txt"
  [ "$(head -1 "$T/$img.txt")" = "keep/libkeep.so opt/d/libnew.so usr/lib/librep.so" ] || fail "$img: judged $(cat "$T/$img.txt")"
  grep -q "errors: 0" "$T/$img.txt" || fail "$img: the errors of deleted files were kept: $(cat "$T/$img.txt")"
  for want in \
    "usr/lib/libdel.so: deleted by layer 2 of 2 (whiteout $T/$img.tar:[^ ]*:usr/lib/.wh.libdel.so): not in the image's final filesystem, not judged (layer 1 of 2)" \
    "usr/lib/librep.so: replaced by layer 2 of 2 ($T/$img.tar:[^ ]*:usr/lib/librep.so): not in the image's final filesystem" \
    "opt/d/libopq.so: deleted by layer 2 of 2 (opaque directory $T/$img.tar:[^ ]*:opt/d/.wh..wh..opq)" \
    "gone/libdir.so: deleted by layer 2 of 2 (whiteout $T/$img.tar:[^ ]*:.wh.gone)"; do
    grep -q "^skipped: $T/$img.tar:[^ ]*:$want" "$T/$img.txt" || fail "$img: no '$want' in: $(cat "$T/$img.txt")"
  done
  [ "$(grep -c '^skipped:' "$T/$img.txt")" -eq 4 ] || fail "$img: skipped: $(cat "$T/$img.txt")"
  # check judges the same files (grouped by layer), and says on stderr which were not judged
  "$A" check --cc 8.0 "$T/$img.tar" > "$T/out.txt" 2> "$T/err.txt"; rc=$?
  [ $rc -eq 0 ] || fail "$img: check exit $rc: $(cat "$T/out.txt" "$T/err.txt")"
  grep -q "package runs: 2 of 2 objects with device code run here on CC 8.0" "$T/out.txt" || fail "$img: check: $(cat "$T/out.txt")"
  [ "$(grep -c "archguard: note: not read: .*not in the image's final filesystem" "$T/err.txt")" -eq 4 ] || fail "$img: check notes: $(cat "$T/err.txt")"
  echo "ok: $img image"
done

# Without a manifest the same layers are archives like any: every member is judged.
"$A" inspect --json "$T/plain.tar" > "$T/plain.json" 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "plain tar of layers: exit $rc"
judged "$T/plain.json" > "$T/plain.txt"
grep -q "errors: 4" "$T/plain.txt" || fail "plain tar of layers: $(cat "$T/plain.txt")"
grep -q "^skipped:" "$T/plain.txt" && fail "plain tar of layers: skipped: $(cat "$T/plain.txt")"
# Several images in one manifest: not applied, and said.
"$A" inspect --json "$T/two.tar" > "$T/two.json" 2>/dev/null
judged "$T/two.json" > "$T/two.txt"
grep -q "^skipped: $T/two.tar: manifest.json names 2 images: their layers are not applied, every layer's files are judged" "$T/two.txt" \
  || fail "two images: $(cat "$T/two.txt")"
echo "ok: not an image, several images"

# The budget counts each layer's bytes once (the image is read in one pass): exactly what the
# gzip layers' members hold passes, a byte less stops.
n=$(cat "$T/oci-inflated")
"$A" inspect --max-inflated "$n" "$T/oci.tar" > /dev/null 2> "$T/err.txt" || fail "oci with --max-inflated $n: $(cat "$T/err.txt")"
"$A" inspect --max-inflated $((n - 1)) "$T/oci.tar" > /dev/null 2> "$T/err.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "per input (raise it with --max-inflated" "$T/err.txt" || fail "oci with --max-inflated $((n - 1)): exit $rc: $(cat "$T/err.txt")"
"$A" inspect --max-inflated 1 "$T/docker.tar" > /dev/null 2> "$T/err.txt" || fail "docker-save layers are stored, nothing inflated: $(cat "$T/err.txt")"
echo "ok: budgets"

# A manifest.json nested a million levels deep is no image, and no crash (the JSON parser
# recurses per level: such text is refused before it is parsed).
python3 - "$T" <<'PY'
import io, sys, tarfile
n = (1 << 20) // 2
with tarfile.open(f'{sys.argv[1]}/deep.tar', 'w') as tf:
    for name, x in (('manifest.json', b'[' * n + b']' * n), ('index.json', b'{"manifests":' * 40000 + b'1' + b'}' * 40000)):
        ti = tarfile.TarInfo(name); ti.size = len(x); tf.addfile(ti, io.BytesIO(x))
PY
"$A" inspect "$T/deep.tar" > "$T/out.txt" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "deep.tar: no device code" "$T/out.txt" || fail "deep manifest: exit $rc: $(head -c 400 "$T/out.txt")"
echo "ok: deep manifest"
