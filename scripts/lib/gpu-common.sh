# SPDX-License-Identifier: Apache-2.0
# Sourced by the GPU scripts (gpu-fleet.sh, gpu-run-mode.sh, gpu-verdicts.sh, gpu-validate.sh)
# once they have set `here` (the repository root) and gone there.
#   gpu_setup <out name> <build dir> <summary name>: OUT (default $here/<out name>, created),
#     jobs (JOBS, default nproc), build (BUILD_DIR, default <build dir>), summary ($OUT/<summary
#     name>, emptied); /usr/local/cuda/bin joins PATH
#   say <text>: a line on stdout and in the summary
#   gpu_header <what>: the summary's first lines (what on which GPU, when, the commit) and the
#     build dependencies (lib/gpu-deps.sh: sets extra and deps_note)
#   gpu_build <log> <label> <ON|OFF> [<target>...]: configure $build (tests ON or OFF, no samples)
#     and build it (the targets, else everything) into $OUT/<log>; says "- <label>: exit ..." and
#     stops the script when the build fails; sets ag (the archguard it built)
#   gpu_oracle <timeout s> <budget s> <lines> <dir>...: tests/gpu/driver_oracle.py on the dirs
#     (ORACLE_BUDGET, default <budget>: seconds of loading) into $OUT/oracle.log and oracle.md;
#     says its exit status and the log's last <lines> lines

gpu_setup() {
  OUT="${OUT:-$here/$1}"
  mkdir -p "$OUT"
  jobs="${JOBS:-$(nproc)}"
  build="${BUILD_DIR:-$2}"
  export PATH="$PATH:/usr/local/cuda/bin"
  summary="$OUT/$3"
  : > "$summary"
}

say() { echo "$*" | tee -a "$summary"; }

gpu_header() {
  say "# $1 on $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1 | head -n1), $(date -u '+%Y-%m-%d %H:%M UTC')"
  say "- commit: ${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}; $(nproc) cores"
  # shellcheck source=gpu-deps.sh
  . "$here/scripts/lib/gpu-deps.sh"
  say "- $deps_note"
}

gpu_build() {
  local log="$1" label="$2" tests="$3" t0 rc
  shift 3
  local targets=()
  if [ "$#" -gt 0 ]; then targets=(--target "$@"); fi
  t0=$(date +%s)
  { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARCHGUARD_BUILD_SAMPLES=OFF \
          -DARCHGUARD_BUILD_TESTS="$tests" "${extra[@]}" &&
    cmake --build "$build" -j "$jobs" "${targets[@]}"; } > "$OUT/$log" 2>&1
  rc=$?
  say "- $label: exit $rc in $(( $(date +%s) - t0 )) s"
  if [ "$rc" != 0 ]; then tail -n 40 "$OUT/$log"; exit 1; fi
  ag="$build/bin/archguard"
}

gpu_oracle() {
  local limit=$1 budget=$2 lines=$3
  shift 3
  timeout "$limit" python3 tests/gpu/driver_oracle.py "$ag" "$@" --budget "${ORACLE_BUDGET:-$budget}" \
    --report "$OUT/oracle.md" > "$OUT/oracle.log" 2>&1
  say "- exit $?"
  tail -n "$lines" "$OUT/oracle.log" | sed 's/^/    /' | tee -a "$summary"
}
