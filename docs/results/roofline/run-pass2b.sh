#!/usr/bin/env bash
# The roofline's second pass, device call 2 (issue 17, 2026-11-25): PyTorch
# peers (1 GiB arrays, then the memory peers again over 4 GiB arrays), the
# HBM + FMA phases at 1 GiB and at 4 GiB arrays (`--only-hbm-fma`: does a
# longer kernel amortize the launch ramp?), then the main job over 4 GiB
# arrays against the 4 GiB memory peers and the matmul peers. Usage: bash
# run-pass2b.sh [TAG]; the bundle (gpu-bench, peers.py) in
# target/roofline-bundle/.
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
echo "=== peers (1 GiB)"
PYTHONUNBUFFERED=1 timeout 45 python3 "$B/peers.py" "$W/peers-1g.json" > "$W/peers-1g.log" 2>&1
echo "rc=$?"; cat "$W/peers-1g.log"
echo "=== peers (4 GiB, memory only)"
PEERS_MIB=4096 PEERS_MEM_ONLY=1 PYTHONUNBUFFERED=1 timeout 30 python3 "$B/peers.py" "$W/peers-4g-mem.json" > "$W/peers-4g.log" 2>&1
echo "rc=$?"; cat "$W/peers-4g.log"
python3 -c "
import json,sys
mem=json.load(open('$W/peers-4g-mem.json')); names={p['name'] for p in mem}
rest=[p for p in json.load(open('$W/peers-1g.json')) if p['name'] not in names]
json.dump(mem+rest, open('$W/peers.json','w'), indent=1)"
for mib in 1024 4096; do
  echo "=== gpu-bench roofline --only-hbm-fma --array-mib $mib"
  ( time timeout 45 "$B/gpu-bench" roofline --only-hbm-fma --array-mib $mib --keep-going --peers "$W/peers-1g.json" --out "$W/size-$mib" ) > "$W/size-$mib.log" 2>&1
  echo "rc=$?"; grep -E "^roofline:|^real|FAILED" "$W/size-$mib.log"
  grep -E "^\| (HBM|driver D2D)" "$W/size-$mib/report.md" | cut -c1-120
done
echo "=== gpu-bench roofline --array-mib 4096 (the main job)"
( time timeout 90 "$B/gpu-bench" roofline --array-mib 4096 --peers "$W/peers.json" --out "$W/main" ) > "$W/main.log" 2>&1
echo "rc=$?"; grep -E "^roofline:|^real|FAILED" "$W/main.log"
tar czf "$OUT/roofline-${1:-pass2b}.tgz" -C "$W" .
sed -n '/## Targets/,/## Peers/p' "$W/main/report.md" 2>/dev/null | cut -c1-200
grep -E "^\| (HBM|driver D2D|BF16 tensor)" "$W/main/report.md" | cut -c1-140
