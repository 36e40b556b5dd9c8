#!/usr/bin/env bash
# Device call 10: the kernels' GPU tests (copy_bulk included), the main job
# with its PyTorch peers, then the HBM tuning search (copy pipelines).
set -o pipefail
O=$OUT; export GPU_SYNC_DRIVER=cuda
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee $O/gpu.txt
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_throttle_reasons.active --format=csv -lms 250 > $O/smi.csv 2>&1 &)
timeout 200 target/dev/kernels-gpu --include-ignored --test-threads=1 > $O/kernels-gpu.log 2>&1; echo "kernels gpu tests rc=$?"; grep -E "^test |test result" $O/kernels-gpu.log | tail -12
PEERS_MIB=4096 PYTHONUNBUFFERED=1 timeout 90 python3 docs/results/roofline/peers.py "$O/roofline-peers.json" > "$O/roofline-peers.log" 2>&1; echo "peers rc=$?"
timeout 150 target/dev/gpu-bench roofline --array-mib 4096 --peers "$O/roofline-peers.json" --out "$O/roofline" > "$O/roofline.log" 2>&1; echo "roofline rc=$?"
grep -E "^\| (HBM|driver|L2|BF16 tensor|FP16 tensor|FP8 tensor|phases)" "$O/roofline/report.md" | cut -c1-200
grep -E "HBM (read|copy) \(main" "$O/roofline/report.md"
if [ "${1:-}" = tune ]; then
  timeout 250 target/dev/gpu-bench roofline --tune --array-mib 4096 --out "$O/tune" > "$O/tune.log" 2>&1; echo "tune rc=$?"
  grep -E "^\| HBM copy \| bulk" "$O/tune/report.md" | sort -t'|' -k4 -r | head -8
  grep -E "^\| HBM (read|copy) \|" "$O/tune/report.md" | head -4
fi
