#!/usr/bin/env bash
# The kernels' GPU tests, the PyTorch peers and the main job, packed.
set -o pipefail
O=/tmp/o; mkdir -p $O; export GPU_SYNC_DRIVER=cuda
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee $O/gpu.txt
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_throttle_reasons.active --format=csv -lms 250 > $O/smi.csv 2>&1 &)
timeout 150 target/dev/kernels-gpu --include-ignored --test-threads=1 > $O/kernels-gpu.log 2>&1; echo "kernels gpu tests rc=$?"; grep -E "^test |test result" $O/kernels-gpu.log | tail -9
PEERS_MIB=4096 PYTHONUNBUFFERED=1 timeout 90 python3 docs/results/roofline/peers.py "$O/roofline-peers.json" > "$O/roofline-peers.log" 2>&1; echo "peers rc=$?"
timeout 150 target/dev/gpu-bench roofline --array-mib 4096 --peers "$O/roofline-peers.json" --out "$O/roofline" > "$O/roofline.log" 2>&1; echo "roofline rc=$?"
grep -E "^\| (HBM|driver|L2|BF16 tensor|FP16 tensor|FP8 tensor|phases)" "$O/roofline/report.md" | cut -c1-220
grep -E "HBM (read|copy) \(main" "$O/roofline/report.md"
tar czf $OUT/o.tgz -C /tmp o
