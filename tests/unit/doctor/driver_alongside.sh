#!/bin/sh
# archguard doctor starts the driver alongside its probes of nvidia-smi and NVML, not after
# them (issue 25: a run took nvidia-smi's time and the driver's one after the other).
# The fake nvidia-smi answers only once the fake driver's cuInit has begun (it waits up to 30 s
# for the file cuInit creates): a doctor that loads the driver after nvidia-smi has returned
# finds that nvidia-smi failed, and the cross-check says nothing of it.
# Usage: driver_alongside.sh <archguard> <fake libcuda>
set -u
ag=$1 fake=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/archguard-alongside-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<SMI
#!/bin/sh
i=0
while [ ! -e '$tmp/cuinit-began' ]; do
  i=\$((i + 1))
  [ \$i -gt 300 ] && { echo 'the driver never started' >&2; exit 3; }
  sleep 0.1
done
echo '0, Fake GPU, 00000000:01:00.0, 9.0, 580.65.06'
SMI
chmod +x "$tmp/bin/nvidia-smi"
out=$(PATH="$tmp/bin:$PATH" ARCHGUARD_LIBCUDA=$fake ARCHGUARD_LIBNVML=/nonexistent/libnvidia-ml.so.1 \
  FAKE_CUDA_CC=9.0 FAKE_CUDA_INIT_MARK="$tmp/cuinit-began" FAKE_CUDA_INIT_DELAY_MS=200 \
  "$ag" doctor --no-smoke --json)
rc=$?
if [ "$rc" -ne 0 ]; then echo "doctor exited $rc:"; echo "$out"; exit 1; fi
case "$out" in
  *'"nvidia_smi_cc":"9.0"'*) ;;
  *) echo "nvidia-smi's answer is missing: it ran after the driver had started, not alongside it:"; echo "$out"; exit 1 ;;
esac
# The driver version comes from nvidia-smi (no NVML here), so it must be the fake tool's.
case "$out" in
  *'580.65.06'*) ;;
  *) echo "the driver version is not nvidia-smi's:"; echo "$out"; exit 1 ;;
esac
echo "ok: nvidia-smi answered while the driver started"
