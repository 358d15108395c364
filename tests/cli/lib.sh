# SPDX-License-Identifier: Apache-2.0
# Sourced by the command-line test scripts (tests/cli/*.sh, tests/gpu/{link_drop,stale_tu,run}/*.sh,
# bench/run/bench_run.sh); each keeps its own `set` options.
#   cli_tmp: tmp, a temporary directory removed when the script exits
#   cli_nvcc: nvcc ($NVCC, else the one on PATH, else /usr/local/cuda/bin/nvcc); exits 77 (skip)
#     when it is not executable
#   cli_gpu_cc [<why>]: cc, the compute capability of the first GPU nvidia-smi lists; exits 77
#     ("skip: no GPU (<why>)") without one
#   cli_usage <count> <given> <usage>: exits 2 with "usage: <usage>" unless <given> is <count>
#   cli_count_failures: fails=0 and fail <text>, which prints FAIL and counts the failure
#   expect <exit code> <regex the output must match (or -)> -- command...: runs the command,
#     prints "ok: <command>" or FAIL with the first $expect_lines (default 30) lines of its
#     output and counts the failure in fails
#   hostile_start: for the hostile-input scripts: T, a temporary directory removed at exit;
#     fail <text>, which prints FAIL and exits 1; exit 77 without python3; the environment's
#     limits on inflated sizes (ARCHGUARD_MAX_INFLATED, _TOTAL, ARCHGUARD_MAX_RATIO) unset

cli_tmp() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}

cli_nvcc() {
  nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  [[ -x $nvcc ]] || { echo "skip: no nvcc"; exit 77; }
}

cli_gpu_cc() {
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
  [[ -n $cc ]] || { echo "skip: no GPU${1:+ ($1)}"; exit 77; }
}

cli_usage() {
  if [[ $2 -ne $1 ]]; then
    echo "usage: $3" >&2
    exit 2
  fi
}

# The prologue of a script that runs archguard on the GPU: `cli_gpu_args USAGE ARCHGUARD NVCC DIR`
# checks the three arguments (exit 2 with USAGE), sets ag, nvcc, dir and py (PYTHON, default
# python3), and cc, the GPU's compute capability (exit 77 without a GPU), and arch (9.0 -> 90).
cli_gpu_args() {
  cli_usage 4 $# "$1"
  ag=$2 nvcc=$3 dir=$4
  py=${PYTHON:-python3}
  cli_gpu_cc "nvidia-smi gives no compute capability"
  arch=${cc//./}
}

cli_count_failures() {
  fails=0
  fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
}

expect() {
  local code=$1 re=$2
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc != "$code" ]]; then
    echo "FAIL (exit $rc, expected $code): $*"; echo "$out" | head -"${expect_lines:-30}"; fails=$((fails + 1)); return
  fi
  if [[ $re != - ]] && ! grep -Eq -- "$re" <<<"$out"; then
    echo "FAIL (no match for /$re/): $*"; echo "$out" | head -"${expect_lines:-30}"; fails=$((fails + 1)); return
  fi
  echo "ok: $*"
}

hostile_start() {
  T="$(mktemp -d)"
  trap 'rm -rf "$T"' EXIT
  fail() { echo "FAIL: $*"; exit 1; }
  command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
  unset ARCHGUARD_MAX_INFLATED ARCHGUARD_MAX_INFLATED_TOTAL ARCHGUARD_MAX_RATIO
}
