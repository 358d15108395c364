#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# archguard inspect / verify / check on the nvcc fixtures: output lines, JSON and exit codes.
# Usage: fatbin_verbs.sh <archguard> <fixture dir> <malformed corpus dir>
set -uo pipefail
ag=$1 fx=$2 bad=$3
[[ -f "$fx/stamp" ]] || { echo "no nvcc fixtures: skipped"; exit 77; }
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect <exit code> <regex the output must match (or -)> -- command...: lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
expect_lines=20

cd "$fx"
# inspect: table, summary, kernels, JSON
expect 0 '^  fatbin 0  \.nv_fatbin .*device-link fatbin' -- "$ag" inspect libplain.so
expect 0 'coverage: sass sm_80 sm_90; ptx compute_90 \(highest ptx isa 9\.0\)' -- "$ag" inspect libplain.so
expect 0 'sm_90a +1\.8' -- "$ag" inspect specific.o
expect 0 'kernel void fixture::scale<float>\(float, float\*, int\)' -- "$ag" inspect --kernels compress-size.o
expect 0 'libfixture\.a:ptxonly\.o' -- "$ag" inspect libfixture.a
expect 0 'debug' -- "$ag" inspect debug.o
"$ag" inspect --json --kernels libplain.so rdc.exe > "$tmp/inspect.json" || { echo "FAIL: inspect --json"; fails=$((fails + 1)); }
python3 - "$tmp/inspect.json" <<'PY' || fails=$((fails + 1))
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["schema"] == "archguard.inspect/1", doc["schema"]
so = doc["inputs"][0]["objects"][0]
assert [f["device_link"] for f in so["fatbins"]] == [True, False]
imgs = so["fatbins"][1]["images"]
assert [(i["kind"], i["arch"], i["compression"]) for i in imgs] == [("sass", "sm_80", "none"), ("sass", "sm_90", "none"), ("ptx", "compute_90", "zstd")], imgs
assert imgs[2]["ptx_isa"] == "9.0" and imgs[0]["elf_abi"] == 8
assert sorted(k["demangled"] for k in imgs[0]["kernels"]) == ["fixture_fill", "void fixture::scale<float>(float, float*, int)"]
assert so["coverage"]["sass"] == ["sm_80", "sm_90"] and so["coverage"]["highest_ptx_isa"] == "9.0"
exe = doc["inputs"][1]["objects"][0]
assert [f["section"] for f in exe["fatbins"]] == [".nv_fatbin", "__nv_relfatbin", "__nv_relfatbin"]
assert exe["fatbins"][0]["linked"] and not exe["fatbins"][0]["device_link"]
print("ok: inspect --json")
PY
# where each fatbin was found, and its translation unit (issue 9)
expect 0 '^  fatbin 3  \.nv_fatbin at 0x[0-9a-f]+, 0x[0-9a-f]+ bytes, 1 image  tu old_tu\.cu$' -- "$ag" inspect multi_tu.exe
expect 0 '^  fatbins: 5 in \.nv_fatbin$' -- "$ag" inspect --summary multi_tu_stripped.exe
[[ $("$ag" inspect multi_tu_stripped.exe | grep -c ' tu ') == 0 ]] || { echo "FAIL: a stripped binary has translation units"; fails=$((fails + 1)); }
expect 0 '^  fatbin 1  \.rodata \(embedded\) at 0x[0-9a-f]+, 0x2c68 bytes, 3 images' -- "$ag" inspect libembedded.so
expect 0 '^  fatbins: 1 in \.nv_fatbin, 2 embedded \(\.fixture_fatbins 1, \.rodata 1\)$' -- "$ag" inspect --summary libembedded.so
expect 0 'coverage: sass sm_80 sm_90; ptx compute_90' -- "$ag" inspect --summary libembedded.so
expect 0 '^sm90a\.cubin  \(executable, cuda\)' -- "$ag" inspect sm90a.cubin
expect 0 '^  fatbin 0  standalone cubin at 0x0, 0x[0-9a-f]+ bytes, 1 image' -- "$ag" inspect sm90a.cubin
expect 0 'coverage: sass sm_90a; ptx none' -- "$ag" inspect sm90a.cubin
expect 0 'kernel fixture_fill' -- "$ag" inspect --kernels sm80.cubin
expect 0 '^sm86\.ptx  \(ptx file\)' -- "$ag" inspect sm86.ptx
expect 0 'kernel void fixture::scale<float>\(float, float\*, int\)' -- "$ag" inspect --kernels sm86.ptx
expect 0 '^lto90\.ltoir  \(lto-ir file\)' -- "$ag" inspect lto90.ltoir
expect 0 'lto-ir compute_90' -- "$ag" inspect lto90.ltoir
expect 1 'fails with 209' -- "$ag" check sm90a.cubin --cc 8.0
expect 0 'runs natively \(sm_80\)' -- "$ag" check sm80.cubin --cc 8.0
expect 0 'runs after a JIT of compute_86' -- "$ag" check sm86.ptx --cc 9.0
"$ag" inspect --json multi_tu.exe libembedded.so sm86.ptx > "$tmp/where.json" || { echo "FAIL: inspect --json (where)"; fails=$((fails + 1)); }
python3 - "$tmp/where.json" <<'PY' || fails=$((fails + 1))
import json, sys
doc = json.load(open(sys.argv[1]))
exe, emb, ptx = (i["objects"][0] for i in doc["inputs"])
assert [f["translation_unit"] for f in exe["fatbins"]] == ["", "new_tu.cu", "other_tu.cu", "old_tu.cu", "main.cu"], exe["fatbins"]
assert exe["fatbin_counts"]["nv_fatbin"] == 5 and exe["fatbin_counts"]["embedded"] == 0
assert [(f["section"], f["section_name"]) for f in emb["fatbins"]] == [(".nv_fatbin", ".nv_fatbin"), ("embedded", ".rodata"), ("embedded", ".fixture_fatbins")]
assert emb["fatbin_counts"]["embedded_by_section"] == {".rodata": 1, ".fixture_fatbins": 1}
assert ptx["fatbins"][0]["section"] == "standalone" and ptx["fatbins"][0]["section_name"] == ""
assert ptx["fatbins"][0]["images"][0]["arch"] == "compute_86" and ptx["fatbin_counts"]["standalone"] == 1
print("ok: inspect --json (sections, translation units, counts)")
PY
# directories: every file with device code, the rest skipped quietly
mkdir -p "$tmp/tree/sub" && cp plain.o "$tmp/tree/sub/" && echo "text" > "$tmp/tree/readme.txt" && ln -s sub/plain.o "$tmp/tree/link.o"
expect 0 'sub/plain\.o' -- "$ag" inspect "$tmp/tree"
[[ $("$ag" inspect --summary "$tmp/tree" | grep -c 'relocatable') == 1 ]] || { echo "FAIL: directory walk listed a link or a text file"; fails=$((fails + 1)); }
mkdir -p "$tmp/dc" && cp sm86.ptx sm80.cubin lto90.ltoir "$tmp/dc/" && echo ".version is not how this starts" > "$tmp/dc/notes.txt"
[[ $("$ag" inspect --summary "$tmp/dc" | grep -c 'standalone') == 3 ]] || { echo "FAIL: directory walk missed a cubin, PTX or LTO-IR file"; "$ag" inspect --summary "$tmp/dc"; fails=$((fails + 1)); }
# containers: tar.gz, tar.zst, wheel (zip)
tar cf "$tmp/fx.tar" ptxonly.o && expect 0 'fx\.tar:ptxonly\.o' -- "$ag" inspect "$tmp/fx.tar"
tar czf "$tmp/fx.tar.gz" plain.o libfixture.a && expect 0 'fx\.tar\.gz:libfixture\.a:plain\.o' -- "$ag" inspect "$tmp/fx.tar.gz"
if command -v zstd >/dev/null; then
  tar cf - specific.o | zstd -q -o "$tmp/fx.tar.zst" && expect 0 'fx\.tar\.zst:specific\.o' -- "$ag" inspect "$tmp/fx.tar.zst"
fi
python3 -c "import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w',zipfile.ZIP_DEFLATED); z.write('libplain.so','pkg/lib/libplain.so'); z.writestr('pkg/__init__.py',''); z.close()" "$tmp/pkg-1.0-py3-none-any.whl"
expect 0 'whl:pkg/lib/libplain\.so' -- "$ag" inspect "$tmp/pkg-1.0-py3-none-any.whl"
# unreadable input: exit 2 with file and offset
expect 2 'bad-magic\.o: fatbin 0 at 0x[0-9a-f]+: bad magic 0xdeadbeef' -- "$ag" inspect "$bad/bad-magic.o"
expect 2 'cannot open' -- "$ag" inspect /nonexistent/file.so
expect 2 'not an elf file, a fatbin or a supported archive' -- "$ag" inspect "$bad/MANIFEST.txt"

# verify
expect 0 'verify: ok' -- "$ag" verify plain.o --require 80,90
expect 0 'verify: ok' -- "$ag" verify libplain.so --require '80-real;90'
expect 1 'libplain\.so: translation unit fixture_kernels\.cu \(fatbin 1\) has no SASS for sm_75 and no PTX <= 75 \(found sm_80, sm_90\)' -- "$ag" verify libplain.so --require 75,80,90
expect 1 'has no SASS for sm_90 \(found sm_80; only compute_80 PTX would be JIT-compiled' -- "$ag" verify rdc.exe --require 80,90
expect 0 'uses compatible lower SASS: sm_80 for sm_86' -- "$ag" verify plain.o --require 86 --allow-compatible
expect 1 'no SASS for sm_86' -- "$ag" verify plain.o --require 86
expect 0 'holds only architecture-specific images' -- "$ag" verify specific.o --require 80
expect 1 'specific\.o: translation unit fixture_kernels\.cu \(fatbin 0\) has no SASS for sm_80' -- "$ag" verify specific.o --require 80 --strict
expect 1 'has no PTX >= 90' -- "$ag" verify compress-default.o --require 80,90 --ptx highest --allow-compatible
expect 1 'has no PTX for compute_90' -- "$ag" verify libfixture.a --require '80-real;90-virtual'
expect 2 "no 'a' variant" -- "$ag" verify plain.o --require 86a
expect 2 '-' -- "$ag" verify plain.o
expect 0 'no device code in the given files' -- "$ag" verify "$(command -v bash)" --require 80
"$ag" verify --json libplain.so --require 75,80,90 > "$tmp/verify.json"; rc=$?
python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); assert d['schema']=='archguard.verify/1' and not d['passed']
u=d['units'][0]; assert u['fatbin']==1 and u['missing_sass']==['sm_75'] and u['status']=='missing', u
print('ok: verify --json')" "$tmp/verify.json" && [[ $rc == 1 ]] || { echo "FAIL: verify --json"; fails=$((fails + 1)); }

# check
expect 0 'plain\.o: runs natively \(sm_90\) on CC 9\.0' -- "$ag" check plain.o --cc 9.0
expect 0 'runs after a JIT of compute_75' -- "$ag" check ptxonly.o --cc 9.0
expect 0 'rdc\.exe: runs after a JIT of compute_80 .*' -- "$ag" check rdc.exe --cc 9.0
expect 1 'fails with 209' -- "$ag" check plain.o --cc 7.5
expect 1 'fixture_fill' -- "$ag" check plain.o --cc 7.5
expect 1 'fails with 222' -- "$ag" check ptxonly.o --cc 9.0 --driver 570.26
expect 1 'fails with 223' -- "$ag" check ptxonly.o --cc 9.0 --disable-ptx-jit
expect 1 'fails with 209' -- env CUDA_FORCE_PTX_JIT=1 "$ag" check debug.o --cc 8.0 --from-env
expect 0 'runs natively \(sm_90a\)' -- "$ag" check specific.o --cc 9.0
expect 2 'not a compute capability' -- "$ag" check plain.o --cc banana
printf 'name, compute_cap\nNVIDIA H100 80GB HBM3, 9.0\nname, compute_cap\nTesla T4, 7.5\nNVIDIA H100 80GB HBM3, 9.0\n' > "$tmp/fleet.csv"
expect 1 'Tesla T4 \(CC 7\.5, 1 GPU\)' -- "$ag" check plain.o --fleet "$tmp/fleet.csv"
expect 1 'NVIDIA H100 80GB HBM3 \(CC 9\.0, 2 GPUs\)' -- "$ag" check plain.o --fleet "$tmp/fleet.csv"
"$ag" check --json plain.o --fleet "$tmp/fleet.csv" > "$tmp/check.json"
python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); assert d['schema']=='archguard.check/2' and d['fails']
h,t=d['devices']; assert h['count']==2 and h['objects'][0]['outcome']=='native'
assert t['objects'][0]['cuda_error']==209 and len(t['objects'][0]['kernels_without_image'])==2
print('ok: check --json')" "$tmp/check.json" || { echo "FAIL: check --json"; fails=$((fails + 1)); }

echo "$fails failures"
[[ $fails == 0 ]]
