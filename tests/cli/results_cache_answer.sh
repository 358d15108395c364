#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A whole answer of `check` on directories (the results cache's answer record): a second run with
# the same tree, options, environment and GPU prints the same bytes on stdout and stderr with the
# same exit code, reading nothing but the walk; any change of what the answer depends on (a file
# rewritten, added or removed, a link out of the tree, another --cc, a JIT switch from the
# environment, --json) makes a run that judges anew and prints what --no-cache prints; a tree
# with a file changed in the last seconds keeps no answer; a file input keeps none. Without --cc,
# the machine's identity (kernel module, PCI functions, device nodes, MIG tree, driver library:
# here a fake root and the fake driver) stands for its GPUs: an answer comes without starting the
# driver, and a change of any part judges anew; without an identity the driver is asked.
# Usage: results_cache_answer.sh ARCHGUARD FIXTURES FAKE_LIBCUDA. Skips (77) without the nvcc
# fixtures.
set -u
ag=${1:?archguard}
fixtures=${2:?fixture dir}
fake_libcuda=${3:?fake libcuda}
[[ -f $fixtures/compress-none.o && -f $fixtures/plain.o && -f $fixtures/ptxonly.o && -f $fixtures/sm80.cubin ]] ||
  { echo "skip: no fixtures in $fixtures"; exit 77; }
source "$(dirname "$0")/lib.sh"
cli_tmp
cli_count_failures
export ARCHGUARD_CACHE_DIR=$tmp/cache ARCHGUARD_RESULTS_CACHE_STATS=1
answers_of() { grep -o '[0-9]* answers known' "$1"; }
# Runs check with the arguments; keeps stdout in $tmp/$name.out, stderr without the cache's
# statistics in $tmp/$name.err, the statistics line in $tmp/$name.stats, the exit code in rc.
run() {
  local name=$1
  shift
  "$ag" check --no-deps "$@" > "$tmp/$name.out" 2> "$tmp/$name.all"
  rc=$?
  grep -v '^archguard: results cache ' "$tmp/$name.all" > "$tmp/$name.err"
  grep '^archguard: results cache ' "$tmp/$name.all" > "$tmp/$name.stats"
}
# The run `name` printed exactly what --no-cache prints for the same arguments, with its exit code.
same_as_fresh() {
  local name=$1 code=$2
  shift 2
  ARCHGUARD_RESULTS_CACHE_STATS=0 "$ag" check --no-deps --no-cache "$@" > "$tmp/fresh.out" 2> "$tmp/fresh.err"
  local frc=$?
  cmp -s "$tmp/$name.out" "$tmp/fresh.out" && cmp -s "$tmp/$name.err" "$tmp/fresh.err" && [[ $code == "$frc" ]] ||
    { fail "$name: not what --no-cache prints (exit $code / $frc)"; diff "$tmp/$name.out" "$tmp/fresh.out" | head -5; }
}
settle() { sleep 2.2; }  # identities are kept only for files unchanged for two seconds

tree=$tmp/tree
mkdir -p "$tree/a/b" "$tmp/outside"
cp "$fixtures/compress-none.o" "$tree/a/k.o"
cp "$fixtures/plain.o" "$tree/a/b/plain.o"
cp "$fixtures/sm80.cubin" "$tree/sm80.cubin"
echo "no device code" > "$tree/readme.txt"
cp "$fixtures/ptxonly.o" "$tmp/outside/ptx.o"
ln -s "$tmp/outside/ptx.o" "$tree/link.o"  # out of the tree: a note on stderr, not read
settle

run fill --cc 8.0 "$tree"; fill_rc=$rc
[[ $(answers_of "$tmp/fill.stats") == "0 answers known" ]] || fail "the first run knew an answer: $(cat "$tmp/fill.stats")"
grep -q "not read: $tree/link.o" "$tmp/fill.err" || fail "no note of the link out of the tree: $(cat "$tmp/fill.err")"
same_as_fresh fill $fill_rc --cc 8.0 "$tree"
run hit --cc 8.0 "$tree"
[[ $(answers_of "$tmp/hit.stats") == "1 answers known" ]] && echo "ok: the second run is answered whole" ||
  fail "second run: $(cat "$tmp/hit.stats")"
grep -q ' 0 misses, 0 stored, 0 searches skipped, 0 files known, 0 judgements known' "$tmp/hit.stats" ||
  fail "the answered run read more than the walk: $(cat "$tmp/hit.stats")"
cmp -s "$tmp/fill.out" "$tmp/hit.out" && cmp -s "$tmp/fill.err" "$tmp/hit.err" && [[ $rc == "$fill_rc" ]] &&
  echo "ok: the same stdout, stderr and exit code ($rc)" || fail "the answer differs (exit $fill_rc / $rc)"
# A problem's exit code (1) is answered too.
run fail1 --cc 5.0 "$tree"; f1=$rc
run fail2 --cc 5.0 "$tree"
[[ $f1 == 1 && $rc == 1 && $(answers_of "$tmp/fail2.stats") == "1 answers known" ]] && cmp -s "$tmp/fail1.out" "$tmp/fail2.out" &&
  echo "ok: a failing verdict is answered with exit 1" || fail "cc 5.0: exit $f1 / $rc, $(cat "$tmp/fail2.stats")"
# --json is another answer.
run json1 --cc 8.0 --json "$tree"
[[ $(answers_of "$tmp/json1.stats") == "0 answers known" ]] || fail "--json took the text answer"
run json2 --cc 8.0 --json "$tree"
[[ $(answers_of "$tmp/json2.stats") == "1 answers known" ]] && cmp -s "$tmp/json1.out" "$tmp/json2.out" &&
  echo "ok: --json answered from its own record" || fail "--json: $(cat "$tmp/json2.stats")"
# A JIT switch taken from the environment changes the key.
CUDA_FORCE_PTX_JIT=1 run env --cc 8.0 --from-env "$tree"
[[ $(answers_of "$tmp/env.stats") == "0 answers known" ]] && echo "ok: CUDA_FORCE_PTX_JIT judges anew" ||
  fail "CUDA_FORCE_PTX_JIT: $(cat "$tmp/env.stats")"
CUDA_FORCE_PTX_JIT=1 same_as_fresh env $rc --cc 8.0 --from-env "$tree"

# Rewritten in place with the same size (another kernel name): judged anew.
LC_ALL=C sed 's/fixture_fill/fixture_FILL/g' "$fixtures/compress-none.o" > "$tmp/renamed.o"
cat "$tmp/renamed.o" > "$tree/a/k.o"
settle
run rewritten --cc 8.0 "$tree"
[[ $(answers_of "$tmp/rewritten.stats") == "0 answers known" ]] && echo "ok: a file rewritten in place is judged anew" ||
  fail "rewritten: $(cat "$tmp/rewritten.stats")"
same_as_fresh rewritten $rc --cc 8.0 "$tree"
# A file added, then removed.
cp "$fixtures/ptxonly.o" "$tree/a/b/added.o"
settle
run added --cc 8.0 "$tree"
[[ $(answers_of "$tmp/added.stats") == "0 answers known" ]] && grep -q added.o "$tmp/added.out" &&
  echo "ok: a file added is judged" || fail "added: $(cat "$tmp/added.stats")"
rm "$tree/a/b/added.o"
run removed --cc 8.0 "$tree"
[[ $(answers_of "$tmp/removed.stats") == "1 answers known" ]] && ! grep -q added.o "$tmp/removed.out" &&
  echo "ok: with the file removed, the earlier tree's answer" || fail "removed: $(cat "$tmp/removed.stats")"
same_as_fresh removed $rc --cc 8.0 "$tree"
# The link out of the tree now points at a directory: its note changes, so does the answer.
rm "$tree/link.o"
ln -s "$tmp/outside" "$tree/link.o"
run relinked --cc 8.0 "$tree"
[[ $(answers_of "$tmp/relinked.stats") == "0 answers known" ]] && grep -q "a symbolic link to the directory" "$tmp/relinked.err" &&
  echo "ok: a link retargeted is noted anew" || fail "relinked: $(cat "$tmp/relinked.stats") $(cat "$tmp/relinked.err")"
# A file changed in the last seconds: no answer kept, so the next run judges again.
cp "$fixtures/plain.o" "$tree/fresh.o"
run young1 --cc 8.0 "$tree"
run young2 --cc 8.0 "$tree"
[[ $(answers_of "$tmp/young2.stats") == "0 answers known" ]] && echo "ok: a tree with a file just written keeps no answer" ||
  fail "young: $(cat "$tmp/young2.stats")"
# A file named directly keeps no answer (its records make it quick).
run file1 --cc 8.0 "$tree/sm80.cubin"
run file2 --cc 8.0 "$tree/sm80.cubin"
[[ $(answers_of "$tmp/file2.stats") == "0 answers known" ]] && echo "ok: no answer for a file input" ||
  fail "file input: $(cat "$tmp/file2.stats")"
# Without --cc: this machine's identity in the key. A fake root (ARCHGUARD_SYS_ROOT) holds the
# kernel module's version, one NVIDIA PCI function and its device nodes; the driver is a copy of
# the fake one. The FAKE_CUDA_* variables are no part of the key, as a real driver's behaviour is
# not: a run answered while the driver would fail (FAKE_CUDA_INIT_ERROR) proves it was not started.
root=$tmp/root
fn=$root/sys/bus/pci/devices/0000:1b:00.0
mkdir -p "$root/proc/driver/nvidia/capabilities" "$fn" "$root/dev"
echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:35 UTC 2025" > "$root/proc/driver/nvidia/version"
for kv in vendor=0x10de class=0x030200 device=0x2335 subsystem_vendor=0x10de subsystem_device=0x18be revision=0xa1; do
  echo "${kv#*=}" > "$fn/${kv%%=*}"
done
touch "$root/dev/nvidia0" "$root/dev/nvidiactl"
cp "$fake_libcuda" "$tmp/libcuda.so.1"
settle
machine() { ARCHGUARD_SYS_ROOT=$root ARCHGUARD_LIBCUDA=$tmp/libcuda.so.1 FAKE_CUDA_CC=${cc:-9.0} "$@"; }
machine run m1 "$tree"; m1=$rc
machine same_as_fresh m1 $m1 "$tree"
grep -q "assuming this machine: Fake GPU (CC 9.0" "$tmp/m1.out" || fail "m1: $(head -1 "$tmp/m1.out")"
FAKE_CUDA_INIT_ERROR=100 machine run m2 "$tree"
[[ $(answers_of "$tmp/m2.stats") == "1 answers known" && $rc == "$m1" ]] && cmp -s "$tmp/m1.out" "$tmp/m2.out" &&
  echo "ok: this machine's answer comes without starting the driver" || fail "m2: exit $rc, $(cat "$tmp/m2.stats" "$tmp/m2.err")"
# Each part of the identity, changed, judges anew (with the driver: a failing one fails the run).
anew() {  # NAME: the identity was changed; the next run must judge, and ask the driver
  local name=$1
  machine run "$name" "$tree"
  [[ $(answers_of "$tmp/$name.stats") == "0 answers known" ]] && echo "ok: $name judges anew" ||
    fail "$name: $(cat "$tmp/$name.stats")"
}
echo 0x2330 > "$fn/device"; cc=8.0 anew pci_device
grep -q "Fake GPU (CC 8.0" "$tmp/pci_device.out" || fail "pci_device: the new GPU was not judged: $(head -1 "$tmp/pci_device.out")"
cc=8.0 machine run pci_device2 "$tree"
[[ $(answers_of "$tmp/pci_device2.stats") == "1 answers known" ]] && cmp -s "$tmp/pci_device.out" "$tmp/pci_device2.out" ||
  fail "pci_device2: $(cat "$tmp/pci_device2.stats")"
sed -i 's/580.65.06/580.82.07/' "$root/proc/driver/nvidia/version"; cc=8.0 anew module_version
touch "$root/dev/nvidia1"; cc=8.0 anew device_node
mkdir -p "$root/proc/driver/nvidia/capabilities/gpu0/mig/gi1"; cc=8.0 anew mig_instance
touch -d '2020-01-01' "$tmp/libcuda.so.1"; cc=8.0 anew driver_library
# No kernel module: no identity, the driver's GPUs go into the key, so a failing driver fails.
rm "$root/proc/driver/nvidia/version"
FAKE_CUDA_INIT_ERROR=100 machine run nomodule "$tree"
[[ $rc == 2 ]] && grep -q "no GPU visible here" "$tmp/nomodule.err" && echo "ok: without an identity the driver is asked" ||
  fail "nomodule: exit $rc, $(cat "$tmp/nomodule.err")"
# --no-cache neither reads nor keeps answers.
ARCHGUARD_RESULTS_CACHE_STATS=0 "$ag" check --no-deps --no-cache --cc 8.0 "$tree" > "$tmp/nc.out" 2>&1 || true
[[ -z $(grep 'results cache' "$tmp/nc.out") ]] || fail "--no-cache printed cache statistics"
(( fails == 0 )) && echo "all passed" || { echo "$fails failed"; exit 1; }
