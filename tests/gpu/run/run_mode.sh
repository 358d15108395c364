#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu.run_mode: `archguard run` on real programs on a real GPU. Each case is built here with
# nvcc (the "wrong" code for another architecture than the GPU's), run plain first (the truth:
# it must fail the expected way, or work), then under `archguard run --json`; the report must
# pass the exit status through and explain each failure (file, kernel, CUDA error, a fix naming
# this GPU's architecture), and must find nothing wrong in the programs that work.
# Prints "ok <case>", "FAIL <case>: <why>" or "skip <case>: <why>" per case and a summary.
# Exit 0 when no case failed, 1 when one did, 77 without a GPU.
# Usage: run_mode.sh ARCHGUARD NVCC WORK_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../cli/lib.sh"
cli_gpu_args "run_mode.sh ARCHGUARD NVCC WORK_DIR" "$@"
work=$dir
[[ -x $ag ]] || { echo "FAIL: archguard not executable: $ag"; exit 1; }
[[ -x $nvcc ]] || { echo "FAIL: nvcc not executable: $nvcc"; exit 1; }
if [[ $cc == 8.* ]]; then wrong=90; else wrong=80; fi
cudadir=$(cd "$(dirname "$nvcc")/.." && pwd)
stubs=()
for d in "$cudadir/lib64/stubs" "$cudadir/targets/x86_64-linux/lib/stubs" "$cudadir/targets/sbsa-linux/lib/stubs"; do
  [[ -d $d ]] && stubs+=("-L$d")
done
mkdir -p "$work" || exit 1
cd "$work" || exit 1
echo "GPU compute capability $cc (sm_$arch); wrong code built for sm_$wrong; archguard: $ag"
# Per-run limit, so that a hang shows as a FAIL instead of the CTest timeout.
limit=${ARCHGUARD_RUN_TEST_LIMIT:-240}

n_ok=0 n_fail=0 n_skip=0
ok() { echo "ok $1"; n_ok=$((n_ok + 1)); }
fail() { echo "FAIL $1: $2"; n_fail=$((n_fail + 1)); }
skip() { echo "skip $1: $2"; n_skip=$((n_skip + 1)); }

# The report checker: check_report.py JSON [options]; prints why on stdout and exits 1 when the
# report does not say what it must.
cat > check_report.py <<'PY'
import argparse, json, os, re, sys

ap = argparse.ArgumentParser()
ap.add_argument("json")
ap.add_argument("--mode", choices=["fail", "work"], required=True)
ap.add_argument("--exit", type=int, help="the exit status the report must give (the plain run's)")
ap.add_argument("--error", type=int, help="the CUDA error number of the failure")
ap.add_argument("--file", action="append", default=[], help="a basename the failure may name")
ap.add_argument("--kernel", help="a substring of the kernel's (mangled or demangled) name")
ap.add_argument("--kernel-optional", action="store_true", help="a failure without a kernel passes")
ap.add_argument("--arch", required=True, help="the GPU's architecture, e.g. 90")
ap.add_argument("--cc", required=True, help="the GPU's compute capability, e.g. 9.0")
ap.add_argument("--predict", action="store_true", help="run with --predict: no disagreement")
ap.add_argument("--min-processes", type=int, default=1, help="processes with a matching failure")
ap.add_argument("--min-launches", type=int, default=0, help="kernel launches seen in all")
a = ap.parse_args()


def die(why):
    print(why)
    sys.exit(1)


try:
    with open(a.json) as f:
        doc = json.load(f)
except (OSError, ValueError) as e:
    die("no readable report %s: %s" % (a.json, e))
if doc.get("schema") != "archguard.run/1":
    die("schema is %r, not 'archguard.run/1'" % doc.get("schema"))
if doc.get("recorded") is not True:
    die("recorded is %r; problems: %s" % (doc.get("recorded"), doc.get("problems")))
if a.exit is not None and doc.get("exit_status") != a.exit:
    die("report's exit_status is %r, the plain run's %d" % (doc.get("exit_status"), a.exit))
procs = doc.get("processes") or []
if not any((p.get("recorder") or {}).get("status") == "ok" for p in procs):
    die("no process has recorder status ok: %s" % [p.get("recorder") for p in procs])
arch_failures = doc.get("architecture_failures")
if not isinstance(arch_failures, int):
    die("architecture_failures is %r" % arch_failures)

if a.mode == "work":
    if arch_failures != 0:
        fs = [(f.get("api"), f.get("error_name"), f.get("kernel"), f.get("file"))
              for p in procs for f in p.get("failures") or []]
        die("architecture_failures is %d in a program that works: %s" % (arch_failures, fs[:5]))
    if a.predict and doc.get("disagreements") != 0:
        ds = [d for p in procs for d in p.get("disagreements") or []]
        die("disagreements is %r: %s" % (doc.get("disagreements"), ds[:5]))
    counts = [p.get("counts") or {} for p in procs]
    launches = sum(c.get("launches", 0) for c in counts)
    loads = sum(c.get("module_loads", 0) for c in counts)
    if launches + loads < 1:
        die("the recorder saw no launch and no module load")
    if launches < a.min_launches:
        die("the recorder saw %d launches, at least %d were made" % (launches, a.min_launches))
    sys.exit(0)

# mode fail
if arch_failures < 1:
    die("architecture_failures is %d, the program failed for its architecture; problems: %s"
        % (arch_failures, doc.get("problems")))
mentions = re.compile(r"(?<![0-9])(%s|%s)(?![0-9])" % (re.escape(a.arch), re.escape(a.cc)))
files = set(a.file)


def base(p):
    return os.path.basename(p or "")


def misses(p, f):
    """What failure f of process p lacks (empty: it is the one)."""
    m = []
    if a.error is not None and f.get("error") != a.error:
        m.append("error %r not %d" % (f.get("error"), a.error))
    if files:
        named = base(f.get("file")) in files or any(
            base((l.get("origin") or {}).get("path")) in files and l.get("result") == a.error
            for l in p.get("loads") or [])
        if not named:
            m.append("file %r (and no failed load of %s)" % (f.get("file"), "/".join(sorted(files))))
    if a.kernel:
        names = (f.get("kernel") or "") + " " + (f.get("kernel_demangled") or "")
        if a.kernel not in names and not (a.kernel_optional and not names.strip()):
            m.append("kernel %r not %s" % (names.strip(), a.kernel))
    if f.get("architecture") is not True:
        m.append("architecture is %r" % f.get("architecture"))
    texts = [" ".join([x.get("text") or ""] + list(x.get("details") or [])) for x in f.get("fixes") or []]
    if not any(mentions.search(t) for t in texts):
        m.append("no fix mentions %s or %s (fixes: %s)" % (a.arch, a.cc, [t[:120] for t in texts][:3]))
    return m


matched, seen = 0, []
for p in procs:
    found = False
    for f in p.get("failures") or []:
        m = misses(p, f)
        if not m:
            found = True
        else:
            seen.append("pid %s %s %s: %s" % (p.get("pid"), f.get("api"), f.get("kernel"), "; ".join(m)))
    matched += found
if matched < a.min_processes:
    die("%d process(es) with the expected failure, %d wanted; failures seen: %s"
        % (matched, a.min_processes, " | ".join(seen[:4]) or "none"))
PY

# build <case> <command...>: runs an nvcc command, FAILs the case when it does not build.
build() {
  local c=$1
  shift
  if ! "$@" > "$c.build.log" 2>&1; then
    fail "$c" "build failed: $* ($(tail -3 "$c.build.log" | tr '\n' ' '))"
    return 1
  fi
}
# plain <case> <command...>: runs it plainly; sets prc (status) and pcode (first code=<n>).
plain() {
  local c=$1
  shift
  timeout "$limit" "$@" > "$c.plain.out" 2>&1
  prc=$?
  pcode=$(grep -o 'code=[0-9]*' "$c.plain.out" | head -1 | cut -d= -f2)
}
# take_opts <options...> -- <command...>: sets opts to the words before "--" and cmd to the
# command after it (the caller declares both local).
take_opts() {
  opts=()
  while [[ $# -gt 0 && $1 != -- ]]; do opts+=("$1"); shift; done
  shift
  cmd=("$@")
}
# under <case> [run options] -- <command...>: runs it under `archguard run --json <case>.json`;
# sets arc (status) and ams (wall milliseconds).
under() {
  local c=$1 opts cmd
  shift
  take_opts "$@"
  # ARCHGUARD_RUN_TEST_KEEP=<dir>: keep each case's recording (event files) in <dir>/<case>
  [[ -n ${ARCHGUARD_RUN_TEST_KEEP:-} ]] && opts+=(--keep "$ARCHGUARD_RUN_TEST_KEEP/$c")
  rm -f "$c.json"
  local t0 t1
  t0=$(date +%s%N)
  timeout "$limit" "$ag" run "${opts[@]}" --json "$c.json" -- "${cmd[@]}" > "$c.run.out" 2>&1
  arc=$?
  t1=$(date +%s%N)
  ams=$(((t1 - t0) / 1000000))
}
# check <case> <check_report.py options...>: ok or FAIL from the report.
check() {
  local c=$1 why
  shift
  if why=$("$py" check_report.py "$c.json" --arch "$arch" --cc "$cc" "$@" 2>&1); then
    ok "$c"
  else
    fail "$c" "$(echo "$why" | tail -3 | tr '\n' ' ')(report $work/$c.json, output $work/$c.run.out)"
  fi
}
# failure_case <case> <expected code or "any"> <check options...> -- <command...>
failure_case() {
  local c=$1 want=$2 opts cmd
  shift 2
  take_opts "$@"
  plain "$c" "${cmd[@]}"
  if [[ $prc -ne 1 || -z $pcode || $pcode == 0 ]]; then
    fail "$c" "plain run did not fail the expected way: status $prc, code=${pcode:-none} ($(tail -2 "$c.plain.out" | tr '\n' ' '))"
    return
  fi
  if [[ $want != any && $pcode != "$want" ]]; then
    fail "$c" "plain run failed with code=$pcode, not the expected $want"
    return
  fi
  under "$c" -- "${cmd[@]}"
  if [[ $arc -ne $prc ]]; then
    fail "$c" "archguard run exited $arc, the program itself $prc ($(tail -2 "$c.run.out" | tr '\n' ' '))"
    return
  fi
  check "$c" --mode fail --exit "$prc" --error "$pcode" "${opts[@]}"
}
# working_case <case> <check options...> -- <command...>: exit 0 plain and under
# `archguard run --predict`, no architecture failure, no disagreement. Plain status 77: skip.
working_case() {
  local c=$1 opts cmd
  shift
  take_opts "$@"
  plain "$c" "${cmd[@]}"
  if [[ $prc -eq 77 ]]; then
    skip "$c" "$(grep -m1 '^skip:' "$c.plain.out" | cut -c7-)"
    return
  fi
  if [[ $prc -ne 0 ]]; then
    fail "$c" "plain run failed (status $prc): $(tail -2 "$c.plain.out" | tr '\n' ' ')"
    return
  fi
  local ropts=(--predict)
  [[ " ${opts[*]} " == *" --min-launches "* ]] && ropts+=(--watch-launches)  # launches are counted only when watched
  under "$c" "${ropts[@]}" -- "${cmd[@]}"
  if [[ $arc -ne 0 ]]; then
    fail "$c" "archguard run --predict exited $arc, the program itself 0 ($(tail -2 "$c.run.out" | tr '\n' ' '))"
    return
  fi
  check "$c" --mode work --exit 0 --predict "${opts[@]}"
}

pic=(-shared -Xcompiler -fPIC)
g_wrong=(-gencode "arch=compute_$wrong,code=sm_$wrong")
g_gpu=(-gencode "arch=compute_$arch,code=sm_$arch")
plugin_lib=libplugin_sm$wrong.so

# plugin: a host for this GPU dlopen()s a library with sm_$wrong SASS only; its launch fails (209).
plugin_built=0
if build plugin "$nvcc" "${g_wrong[@]}" "${pic[@]}" "$here/plugin.cu" -o "$plugin_lib" &&
   build plugin "$nvcc" "$here/plugin_host.cpp" -o plugin_host -ldl; then
  plugin_built=1
  failure_case plugin 209 --file "$plugin_lib" --kernel plugin_kernel -- ./plugin_host "$work/$plugin_lib"
fi

# pyext: Python loads a library with sm_$wrong SASS only through ctypes; its launch fails (209).
if build pyext "$nvcc" "${g_wrong[@]}" "${pic[@]}" "$here/pyext.cu" -o "libpyext_sm$wrong.so"; then
  failure_case pyext 209 --file "libpyext_sm$wrong.so" --kernel pyext_kernel -- \
    "$py" "$here/pyext.py" "$work/libpyext_sm$wrong.so"
fi

# cubin: cuModuleLoad of a cubin for sm_$wrong fails with CUDA_ERROR_NO_BINARY_FOR_GPU (209).
if build cubin "$nvcc" -cubin "-arch=sm_$wrong" "$here/other_gpu.cu" -o other_gpu.cubin &&
   build cubin "$nvcc" "$here/cubin_loader.cpp" -o cubin_loader "${stubs[@]}" -lcuda; then
  failure_case cubin 209 --file other_gpu.cubin --kernel cubin_kernel --kernel-optional -- \
    ./cubin_loader "$work/other_gpu.cubin"
fi

# rdc: a static library of relocatable device code for sm_$wrong only, device-linked into a
# program for sm_$arch: the library's kernel is missing from the linked image. The error is
# whatever the plain run gives (500 or 98 expected).
if build rdc "$nvcc" -rdc=true "${g_wrong[@]}" -c "$here/rdc_lib.cu" -o rdc_lib.o &&
   build rdc "$nvcc" -lib rdc_lib.o -o "librdc_sm$wrong.a" &&
   build rdc "$nvcc" -rdc=true "${g_gpu[@]}" "$here/rdc_main.cu" "librdc_sm$wrong.a" -o rdc_main; then
  failure_case rdc any --file rdc_main --file "librdc_sm$wrong.a" --kernel rdc_lib_kernel -- ./rdc_main
fi

# ptxonly: PTX of this GPU's architecture only, run with the PTX JIT disabled; the error is
# whatever the plain run gives (209, 218 or 223 expected).
if build ptxonly "$nvcc" -gencode "arch=compute_$arch,code=compute_$arch" "$here/ptxonly.cu" -o ptxonly; then
  # In the environment of both runs; `archguard run` passes it on to the program.
  export CUDA_DISABLE_PTX_JIT=1
  failure_case ptxonly any --file ptxonly --kernel ptxonly_kernel -- ./ptxonly
  unset CUDA_DISABLE_PTX_JIT
fi

# children: a script runs the plugin host twice as child processes; both must be followed.
if [[ $plugin_built == 1 ]]; then
  c=children
  plain "$c" bash "$here/children.sh" "$work/plugin_host" "$work/$plugin_lib"
  n209=$(grep -c 'plugin_run failed: code=209' "$c.plain.out")
  if [[ $prc -ne 1 || $n209 -ne 2 ]]; then
    fail "$c" "plain run: status $prc, $n209 children failed with code=209 (2 expected)"
  else
    under "$c" -- bash "$here/children.sh" "$work/plugin_host" "$work/$plugin_lib"
    if [[ $arc -ne $prc ]]; then
      fail "$c" "archguard run exited $arc, the script itself $prc"
    else
      check "$c" --mode fail --exit "$prc" --error 209 --file "$plugin_lib" --kernel plugin_kernel --min-processes 2
    fi
  fi
else
  fail children "the plugin case did not build"
fi

# stop: --stop-at-first ends the program at its first failure; the host would sleep 30 s after
# it. The plain truth is that of the plugin case (the same program and library).
if [[ $plugin_built == 1 ]]; then
  c=stop
  under "$c" --stop-at-first -- ./plugin_host --sleep-after 30 "$work/$plugin_lib"
  if [[ $ams -ge 20000 ]]; then
    fail "$c" "archguard run --stop-at-first took $ams ms (the program sleeps 30 s after its failure; < 20000 ms wanted)"
  elif [[ $arc -eq 0 ]]; then
    fail "$c" "archguard run --stop-at-first exited 0 although the program failed"
  else
    check "$c" --mode fail --error 209 --file "$plugin_lib" --kernel plugin_kernel
  fi
else
  fail stop "the plugin case did not build"
fi

# Programs that work: no architecture failure, no disagreement with the prediction.
if build good "$nvcc" "${g_gpu[@]}" "$here/good.cu" -o good; then
  working_case good --min-launches 3 -- ./good
fi
working_case torch_step -- "$py" "$here/torch_step.py"
working_case cupy_rawkernel -- "$py" "$here/cupy_rawkernel.py"
working_case jax_prog -- "$py" "$here/jax_prog.py"

echo "run_mode: $n_ok ok, $n_fail FAIL, $n_skip skipped (GPU CC $cc; reports in $work)"
[[ $n_fail -eq 0 ]]
