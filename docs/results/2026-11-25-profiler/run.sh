#!/usr/bin/env bash
# The profiler's GPU run (one device call): `gpu-bench timeline` with both
# backends and the timer's kernel mode beside the tables, the PyTorch peer
# (the same pipeline in torch.profiler, our fatbin kernels through CuPy),
# both traces' kernel durations side by side, and the GPU test comparing
# the two backends. Everything lands in one .tgz under $OUT.
#
#   bash run.sh BUNDLE_DIR          (BUNDLE_DIR holds gpu-bench, profile_gpu,
#                                    timeline_test, profile_peer.py, fatbin/)
set -u
B=$(cd "${1:-$(dirname "$0")}" && pwd)
W=$(mktemp -d)
OUT=${OUT:-$B/out}
mkdir -p "$OUT"
export GPU_SYNC_DRIVER=${GPU_SYNC_DRIVER:-cuda} RUST_BACKTRACE=1
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  date -u
  python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)"
} > "$W/machine.txt" 2>&1
cat "$W/machine.txt"
step() { echo; echo "=== $*"; }

step "timeline (events, then CUPTI) + kernel mode"
( time timeout 200 "$B/gpu-bench" --out "$W/timeline" timeline --backend both --check-timer ) > "$W/timeline.log" 2>&1
echo "timeline rc=$?" | tee -a "$W/rc.txt"
tail -n 40 "$W/timeline.log"

step "PyTorch peer"
SPIN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['spin_cycles'])" "$W/timeline/cupti/summary.json" 2>/dev/null || echo 2000000)
( time timeout 150 python3 "$B/profile_peer.py" run --fatbins "$B/fatbin" --out "$W/torch" \
    --chunks 8 --chunk-bytes 33554432 --spin-cycles "$SPIN" ) > "$W/torch.log" 2>&1
echo "peer rc=$?" | tee -a "$W/rc.txt"
head -c 3000 "$W/torch.log"

step "kernel durations side by side"
for b in events cupti; do
  python3 "$B/profile_peer.py" compare "$W/timeline/$b/trace.json" "$W/torch/torch_trace.json" \
    --kernels scale_f32,spin_cycles --out "$W/compare_torch_$b.md" 2>&1 | tee -a "$W/compare.log"
done

step "GPU test: the timeline's traces parsed back (pinned overlaps, pageable serializes)"
( TIMELINE_DIR="$W/timeline" timeout 60 "$B/timeline_test" --include-ignored --nocapture on_the_gpu ) > "$W/test_timeline.log" 2>&1
echo "timeline test rc=$?" | tee -a "$W/rc.txt"
tail -n 8 "$W/test_timeline.log"

step "GPU test: both backends"
( timeout 90 "$B/profile_gpu" --include-ignored --nocapture ) > "$W/test_gpu.log" 2>&1
echo "test rc=$?" | tee -a "$W/rc.txt"
tail -n 15 "$W/test_gpu.log"

tar czf "$OUT/prof.tgz" -C "$W" .
ls -la "$OUT"
cat "$W/rc.txt"
