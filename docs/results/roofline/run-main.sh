#!/usr/bin/env bash
# The roofline's main device call (issue 17): PyTorch peers, the HBM tuning
# search (`--tune`), then the main job timed on its own — all in one call,
# so every figure and its peers come from the same GPU. Calls 2 and 3 of
# 2026-11-25 ran it (as run-call2.sh / run-call3.sh, the tarball named
# after the call). Usage: bash run-main.sh [TAG]; the bundle (gpu-bench,
# peers.py) in target/roofline-bundle/.
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
echo "=== peers"
PYTHONUNBUFFERED=1 timeout 100 python3 "$B/peers.py" "$W/peers.json" 2>&1 | tee "$W/peers.log"
echo "=== gpu-bench roofline --tune"
( time timeout 120 "$B/gpu-bench" roofline --tune --keep-going --peers "$W/peers.json" --out "$W/tune" ) > "$W/tune.log" 2>&1
echo "rc=$?"; grep -E "^roofline:|^real" "$W/tune.log"
echo "=== gpu-bench roofline (the main job)"
( time timeout 100 "$B/gpu-bench" roofline --peers "$W/peers.json" --out "$W/main" ) > "$W/main.log" 2>&1
echo "rc=$?"; grep -E "^roofline:|^real|failed" "$W/main.log"
tar czf "$OUT/roofline-${1:-main}.tgz" -C "$W" .
cp "$W/main/report.md" "$OUT/report.md" 2>/dev/null
sed -n '/## Ceilings/,/## Peers/p' "$W/main/report.md" 2>/dev/null
grep -E "^\| HBM (read|copy|triad) \|" "$W/tune/report.md"
