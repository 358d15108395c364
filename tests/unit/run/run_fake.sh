#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# archguard run without a GPU: the real recorder (libarchguard_inject.so) inside a program that
# plays the driver (fake_run_app) against a fake CUPTI and the fake libcuda, over device code
# built here by nvcc. Each case sets what the "driver" answers, so the truth is known; the
# report must name the file, kernel, translation unit, error and fix, and the command's exit
# status must pass through. Usage: run_fake.sh ARCHGUARD APP FAKE_CUPTI FAKE_LIBCUDA INJECT SRC WORK
# (NVCC in the environment). Exits 77 without nvcc.
set -u
ag=$1 app=$2 cupti=$3 libcuda=$4 inject=$5 src=$6 work=$7
nvcc=${NVCC:-nvcc}
command -v "$nvcc" > /dev/null 2>&1 || { echo "skip: no nvcc"; exit 77; }
check="python3 $src/check_json.py"
rm -rf "$work" && mkdir -p "$work"
cd "$work" || exit 1
build() { "$nvcc" "$@" > build.log 2>&1 || { cat build.log; echo "FAIL: nvcc $*"; exit 1; }; }
build -shared -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 -o libplugin_sm80.so "$src/plugin.cu"
build -shared -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 -o libplugin_sm90.so "$src/plugin.cu"
build -cubin -arch=sm_80 -o other_gpu.cubin "$src/plugin.cu"
build -cubin -arch=sm_90 -o this_gpu.cubin "$src/plugin.cu"
build -rdc=true -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 -lib -o librdc_sm80.a "$src/rdc_lib.cu"
build -rdc=true -shared -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 -o librdc_so.so "$src/rdc_so.cu" librdc_sm80.a

export FAKE_LIBCUDA=$libcuda ARCHGUARD_RUN_LIBCUDA=$libcuda ARCHGUARD_INJECT=$inject
fails=0
run() {  # run NAME EXPECTED_STATUS [archguard options] -- STEPS...
  local name=$1 want=$2
  shift 2
  local watch=--watch-launches
  [[ $name == lookup_only ]] && watch=  # the default: loads and lookups only
  "$ag" run --cupti "$cupti" --json "$name.json" $watch "$@" > "$name.out" 2> "$name.err"
  local got=$?
  if [[ $got -ne $want ]]; then
    echo "FAIL $name: exit status $got, expected $want (the command's own)"; cat "$name.err"; fails=$((fails + 1)); return 1
  fi
  return 0
}
expect() {  # expect NAME EXPR...
  $check "$1.json" "$@" || { cat "$1.err"; fails=$((fails + 1)); }
}

# 1. A dlopen()ed plugin built for sm_80 only, launched on CC 9.0 through the runtime: 209.
run plugin 3 -- "$app" init , launch "$work/libplugin_sm80.so" 209 , exit 3 &&
  expect plugin 'r["recorded"]' 'r["architecture_failures"] == 1' 'r["exit_status"] == 3' \
    'failures(r)[0]["error"] == 209 and failures(r)[0]["error_name"] == "cudaErrorNoKernelImageForDevice"' \
    'failures(r)[0]["file"].endswith("libplugin_sm80.so")' 'failures(r)[0]["kernel_demangled"] == "plugin_kernel(int*)"' \
    'failures(r)[0]["translation_unit"] == "plugin.cu"' 'failures(r)[0]["images"] == ["sm_80"]' \
    'failures(r)[0]["architecture"]' '"9.0" in fixes_text(failures(r)[0]) and "90" in fixes_text(failures(r)[0])' \
    'any("TORCH_CUDA_ARCH_LIST" in d for d in failures(r)[0]["fixes"][0]["details"])' \
    'r["processes"][0]["devices"][0]["cc"] == "9.0"'
grep -q "plugin_kernel(int\*)" plugin.err && grep -q "libplugin_sm80.so" plugin.err ||
  { echo "FAIL plugin: the text report does not name the kernel and the file"; fails=$((fails + 1)); }
[[ ! -s plugin.out ]] || { echo "FAIL plugin: the report reached the command's stdout"; fails=$((fails + 1)); }

# 1b. The same failure as the CUDA 12+ runtime meets it with lazy loading: the fatbin was handed
#     to cuLibraryLoadData (which succeeds), the kernel lookup fails; the runtime's launch fails
#     with the same error and is the one reported (the lookup folded into it).
run lazy 0 --predict -- "$app" init , libload "$work/libplugin_sm80.so" 1 , getkernel _Z13plugin_kernelPi 209 , \
    launch "$work/libplugin_sm80.so" 209 &&
  expect lazy 'r["architecture_failures"] == 1' 'failures(r)[0]["api"] == "cudaLaunchKernel"' \
    'loads(r)[0]["predicted"] == "fail 209" and loads(r)[0]["translation_unit"] == "plugin.cu"' 'r["disagreements"] == 0'
# 1c. Only the lookup seen (launch calls not watched): it alone names file, unit and fix.
run lookup_only 0 -- "$app" init , libload "$work/libplugin_sm80.so" 1 , getkernel _Z13plugin_kernelPi 209 &&
  expect lookup_only 'r["architecture_failures"] == 1' 'failures(r)[0]["api"] == "cuLibraryGetKernel"' \
    'failures(r)[0]["file"].endswith("libplugin_sm80.so") and failures(r)[0]["translation_unit"] == "plugin.cu"' \
    'failures(r)[0]["kernel_demangled"] == "plugin_kernel(int*)"' '"9.0" in fixes_text(failures(r)[0])'

# 2. The same plugin for sm_90: launched fine; with --predict no disagreement.
run plugin_ok 0 --predict -- "$app" init , launch "$work/libplugin_sm90.so" 0 5 &&
  expect plugin_ok 'r["architecture_failures"] == 0' 'r["disagreements"] == 0' 'r["processes"][0]["counts"]["launches"] == 5'

# 3. --predict catches a false alarm: the driver launched what check says cannot run.
run predict_false_alarm 0 --predict -- "$app" init , launch "$work/libplugin_sm80.so" 0 &&
  expect predict_false_alarm 'r["disagreements"] == 1' \
    'r["processes"][0]["disagreements"][0]["predicted"] == "fail 209" and r["processes"][0]["disagreements"][0]["observed"] == "launched"'

# 4. A repeated failure is one entry with its count.
run repeated 0 -- "$app" init , launch "$work/libplugin_sm80.so" 209 1000 &&
  expect repeated 'len(failures(r)) == 1' 'failures(r)[0]["count"] == 1000' 'r["processes"][0]["counts"]["failed_launches"] == 1000'

# 5. cuModuleLoadData of a cubin for another GPU held in memory (as NVRTC output is): 209, the
#    image is copied and judged, the fix is the NVRTC one.
run memory 0 -- "$app" init , loaddata "$work/other_gpu.cubin" 209 &&
  expect memory 'r["architecture_failures"] == 1' 'failures(r)[0]["origin"]["kind"] == "memory"' \
    'failures(r)[0]["images"] == ["sm_80"]' 'failures(r)[0]["api"] == "cuModuleLoadData"' \
    '"--gpu-architecture=sm_90" in fixes_text(failures(r)[0])' 'failures(r)[0]["error_name"] == "CUDA_ERROR_NO_BINARY_FOR_GPU"'

# 6. The same bytes mapped from the file: the file is named; and cuModuleLoad of the path.
run mapped 0 -- "$app" init , loadmapped "$work/other_gpu.cubin" 209 , loadfile "$work/other_gpu.cubin" 209 &&
  expect mapped 'r["architecture_failures"] == 2' 'all(f["file"].endswith("other_gpu.cubin") for f in failures(r))' \
    'failures(r)[0]["origin"]["kind"] == "mapped" and failures(r)[1]["origin"]["kind"] == "file"'

# 7. A module that loaded, then a lookup of a kernel that is not in it (500): named as such.
run lookup 0 -- "$app" init , loaddata "$work/this_gpu.cubin" 0 , getfunction no_such_kernel 500 &&
  expect lookup 'len(failures(r)) == 1' 'failures(r)[0]["error"] == 500' 'not failures(r)[0]["architecture"]' \
    'len(loads(r)) == 1 and loads(r)[0]["predicted"] == "native (sm_90)"'

# 8. A device-link drop: rdc_lib_kernel exists only as relocatable sm_80 code in a library
#    device-linked for sm_90; the launch fails (500 on the H200).
run rdc 0 -- "$app" init , launch "$work/librdc_so.so" 500 &&
  expect rdc 'r["architecture_failures"] == 1' 'failures(r)[0]["kernel_demangled"] == "rdc_lib_kernel(int*)"' \
    'failures(r)[0]["cause"].startswith("device-link drop")' 'failures(r)[0]["translation_unit"] == "rdc_lib.cu"' \
    '"sm_80" in failures(r)[0]["images"]'

# 9. Children: each process in its own section.
run children 0 -- "$app" init , spawn init + launch "$work/libplugin_sm80.so" 209 , spawn init + launch "$work/libplugin_sm80.so" 209 &&
  expect children 'len(r["processes"]) == 3' 'r["architecture_failures"] == 2' \
    'len([p for p in r["processes"] if p["failures"]]) == 2'

# 10. CUPTI missing: the command runs as usual, its status passes through, the report says why.
"$ag" run --cupti /nonexistent/libcupti.so.13 --json nocupti.json -- "$app" init , exit 4 > nocupti.out 2> nocupti.err
[[ $? -eq 4 ]] || { echo "FAIL nocupti: exit status not passed through"; fails=$((fails + 1)); }
$check nocupti.json nocupti 'not r["recorded"]' 'any("CUPTI could not be loaded" in p for p in r["problems"])' || fails=$((fails + 1))

# 11. CUPTI taken by another tool.
FAKE_CUPTI_BUSY=1 run busy 0 -- "$app" init , launch "$work/libplugin_sm80.so" 209 &&
  expect busy 'not r["recorded"]' 'any("already used by another tool" in p and "Nsight" in p for p in r["problems"])'

# 12. No CUDA at all: said so.
run nocuda 0 -- "$app" exit 0 &&
  expect nocuda 'not r["recorded"]' 'len(r["processes"]) == 0' 'any("no process initialised CUDA" in p for p in r["problems"])'

# 13. --stop-at-first stops the command at the first failure instead of waiting 30 s.
start=$(date +%s)
run stop 143 --stop-at-first -- "$app" init , launch "$work/libplugin_sm80.so" 209 , sleep 30 &&
  expect stop 'r["architecture_failures"] == 1'
(( $(date +%s) - start < 20 )) || { echo "FAIL stop: --stop-at-first waited for the command"; fails=$((fails + 1)); }

# 14. A command that cannot be started: 127, as a shell says.
"$ag" run -- /nonexistent/program > /dev/null 2>&1
[[ $? -eq 127 ]] || { echo "FAIL nostart: expected 127"; fails=$((fails + 1)); }

# 15. The injection library loads and unloads cleanly in a process that never calls back.
mkdir -p direct
CUDA_INJECTION64_PATH=$inject ARCHGUARD_RUN_DIR=$work/direct ARCHGUARD_CUPTI=$cupti "$app" init , exit 0 > direct.out 2> direct.err
rc=$?
[[ $rc -eq 0 && ! -s direct.err && ! -s direct.out ]] || { echo "FAIL direct: the injection library printed or failed ($rc)"; cat direct.err; fails=$((fails + 1)); }
ls direct/p*.events > /dev/null 2>&1 || { echo "FAIL direct: no event file"; fails=$((fails + 1)); }

if [[ $fails -gt 0 ]]; then echo "$fails case(s) failed"; exit 1; fi
echo "all run cases passed"
