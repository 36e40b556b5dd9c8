#!/usr/bin/env bash
# The roofline's second pass (issue 17, 2026-11-25): one device call with
# the FP16/BF16 pipe experiment (pipe/pipe.cu, built on the build machine),
# PyTorch peers, the HBM + FMA tuning search (`--tune --only-hbm-fma`; call 1
# of 2026-11-25 ran it under the flag's first name, `--tune-only`: the new
# segment and bulk-copy-engine variants beside the old, the driver's D2D
# copy in the same run), then the main job with its candidates. Usage:
# bash run-pass2.sh [TAG]; the bundle (gpu-bench, pipe, peers.py) in
# target/roofline-bundle/. The main job ran over 1 GiB arrays, then the
# default (`--array-mib 1024` here keeps both runs as they were).
set -u
B=target/roofline-bundle
W=/tmp/rlw
mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,clocks.max.mem,memory.total,power.limit --format=csv
  head -1 /proc/driver/nvidia/version
} > "$W/env.txt" 2>&1
cat "$W/env.txt"
echo "=== FP16/BF16 pipe experiment"
timeout 20 "$B/pipe" 2>&1 | tee "$W/pipe.txt"
echo "=== peers"
PYTHONUNBUFFERED=1 timeout 45 python3 "$B/peers.py" "$W/peers.json" > "$W/peers.log" 2>&1
echo "rc=$?"; tail -12 "$W/peers.log"
echo "=== gpu-bench roofline --tune --only-hbm-fma"
( time timeout 85 "$B/gpu-bench" roofline --tune --only-hbm-fma --array-mib 1024 --keep-going --peers "$W/peers.json" --out "$W/tune" ) > "$W/tune.log" 2>&1
echo "rc=$?"; grep -E "^roofline:|^real|FAILED" "$W/tune.log"
echo "=== gpu-bench roofline (the main job)"
( time timeout 60 "$B/gpu-bench" roofline --array-mib 1024 --peers "$W/peers.json" --out "$W/main" ) > "$W/main.log" 2>&1
echo "rc=$?"; grep -E "^roofline:|^real|FAILED" "$W/main.log"
tar czf "$OUT/roofline-${1:-pass2}.tgz" -C "$W" .
grep -E "^\| (HBM|driver|FP16 FMA|BF16 FMA|FP32 FMA)" "$W/tune/report.md" | cut -c1-160 | head -12
grep -E "^\| HBM (read|copy|triad) \|" "$W/tune/report.md" | sort -t'|' -k4 -r | head -0
sed -n '/## Targets/,/## Peers/p' "$W/main/report.md" 2>/dev/null | cut -c1-170
