#!/bin/bash
# l2 helper, call 2: the kernels' GPU tests of the read-tuning kernels, then
# the roofline main job with the tuned probes.
set -u
mkdir -p "$OUT/m"
date -u > "$OUT/m/date.txt"
timeout 120 target/l2-gpu/kernels-gpu-test --ignored --test-threads=1 read_tuning fatbins_on_the_gpu > "$OUT/m/kernels-gpu-test.log" 2>&1
echo "kernels-gpu-test rc=$?" >> "$OUT/m/date.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu --format=csv -lms 250 > "$OUT/m/smi.csv" 2>&1 &
S=$!
SECONDS=0
timeout 200 target/l2-gpu/gpu-bench --out "$OUT/m/roofline" roofline --array-mib 4096 > "$OUT/m/main.stdout" 2> "$OUT/m/main.log"
rc=$?
echo "main job rc=$rc in ${SECONDS}s" >> "$OUT/m/date.txt"
kill $S
nvidia-smi > "$OUT/m/nvidia-smi.txt" 2>&1
date -u >> "$OUT/m/date.txt"
cat "$OUT/m/date.txt"; tail -n 4 "$OUT/m/kernels-gpu-test.log"; grep -E "phases|^\| (HBM read|L2)" "$OUT/m/roofline/report.md"; tail -n 3 "$OUT/m/main.log"
(cd "$OUT" && tar czf main.tgz m && rm -rf m)
exit $rc
