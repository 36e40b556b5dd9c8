#!/usr/bin/env bash
# The main job again after its last change (the copy's bulk candidates moved
# to --tune only), with its PyTorch peers in the same call; binary built here
# (cargo build --release -p gpu-bench-cli) and carried as target/dev/gpu-bench.
set -o pipefail
O=/tmp/o; mkdir -p $O; export GPU_SYNC_DRIVER=cuda
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee $O/gpu.txt
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_throttle_reasons.active --format=csv -lms 500 > $O/smi.csv 2>&1 &)
PEERS_MIB=4096 PYTHONUNBUFFERED=1 timeout 90 python3 docs/results/roofline/peers.py "$O/roofline-peers.json" > "$O/roofline-peers.log" 2>&1; echo "peers rc=$?"
timeout 150 target/dev/gpu-bench roofline --array-mib 4096 --peers "$O/roofline-peers.json" --out "$O/roofline" > "$O/roofline.log" 2>&1; echo "roofline rc=$?"
grep -E "^\| " "$O/roofline/report.md" | grep -iE "^\| (HBM|driver D2D|L2|BF16 tensor|FP16 tensor|FP8 tensor|phases|device)" | cut -c1-200
tar czf $OUT/o.tgz -C /tmp o
