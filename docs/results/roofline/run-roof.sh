#!/usr/bin/env bash
# The roofline's third pass (issue 17, 2026-11-25, helper `roof`), one device
# call: the kernels' GPU test (every kernel against its CPU reference, the
# tiled kernels at the new grids too), the PyTorch peers over 4 GiB arrays
# (the memory peers and the matmuls), the main job `gpu-bench roofline
# --array-mib 4096 --peers peers.json`, then the element-wise kernels timed
# two more ways at 256 Mi elements: the timer-truth peer (the same fatbins
# launched from CuPy with the same grid rule, timed by CUDA events, Triton's
# do_bench and torch's blocked_autorange) and `gpu-bench truth` (every mode,
# kernel mode from CUPTI). Usage: bash run-roof.sh [BUNDLE]; the bundle
# (gpu-bench, the kernels' gpu test binary, fatbin/, peers.py,
# truth_peer.py) defaults to target/roof-gpu/. Everything goes to $OUT as
# one roof.tgz.
set -u
B=${1:-target/roof-gpu}
W=/tmp/roof
mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
pack() { tar czf "$OUT/roof.tgz" -C "$W" .; }
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,clocks.max.mem,memory.total,power.limit --format=csv
  head -1 /proc/driver/nvidia/version
} > "$W/env.txt" 2>&1
cat "$W/env.txt"
echo "=== kernels gpu test"
SECONDS=0
timeout 60 "$B/kernels-gpu-test" --include-ignored --test-threads 1 > "$W/kernels-gpu-test.log" 2>&1
echo "rc=$? ${SECONDS}s"; grep -E "test result|FAILED|panicked" "$W/kernels-gpu-test.log"
echo "=== peers (4 GiB arrays, and the matmuls)"
SECONDS=0
PEERS_MIB=4096 PYTHONUNBUFFERED=1 timeout 75 python3 "$B/peers.py" "$W/peers.json" > "$W/peers.log" 2>&1
echo "rc=$? ${SECONDS}s"; cat "$W/peers.log"
pack
echo "=== gpu-bench roofline --array-mib 4096 --peers peers.json (the main job)"
( time timeout 100 "$B/gpu-bench" roofline --array-mib 4096 --peers "$W/peers.json" --out "$W/main" ) > "$W/main.log" 2>&1
echo "rc=$?"; grep -E "^roofline:|^real|FAILED|phase|s$" "$W/main.log" | tail -12
sed -n '/## Targets/,/## Peers/p' "$W/main/report.md" 2>/dev/null | cut -c1-220
grep -E "^\| (HBM|driver D2D|L2)" "$W/main/report.md" | cut -c1-200
pack
echo "=== truth peer (the same fatbins, same grids; CuPy launches)"
SECONDS=0
PYTHONUNBUFFERED=1 timeout 60 python3 "$B/truth_peer.py" --fatbins "$B/fatbin" --clock-mhz 1980 --out "$W/truth-peer" \
  > "$W/truth-peer.log" 2>&1
echo "rc=$? ${SECONDS}s"; grep -E "256Mi|32Mi" "$W/truth-peer.log"
pack
echo "=== gpu-bench truth"
if [ -z "${CUDA_SYS_LIBCUPTI:-}" ]; then
  for c in /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 /usr/local/cuda/lib64/libcupti.so.13; do
    if [ -e "$c" ]; then export CUDA_SYS_LIBCUPTI=$c; break; fi
  done
fi
SECONDS=0
timeout 110 "$B/gpu-bench" --format md --out "$W/truth" truth > "$W/truth.log" 2>&1
echo "rc=$? ${SECONDS}s"
gzip -f "$W/truth/results.json" 2>/dev/null; rm -f "$W/truth/results.csv"
grep -E "256Mi" "$W/truth/report.md" 2>/dev/null | cut -c1-220 | head -12
pack
ls -la "$OUT"
