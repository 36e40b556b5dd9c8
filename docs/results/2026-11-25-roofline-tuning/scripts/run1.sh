#!/bin/bash
# l2 helper, call 1: the read-tuning sweep (gpu-bench roofline --tune-reads).
set -u
mkdir -p "$OUT/t"
date -u > "$OUT/t/date.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu --format=csv -lms 250 > "$OUT/t/smi.csv" 2>&1 &
S=$!
timeout 270 target/l2-gpu/gpu-bench --out "$OUT/t" roofline --tune-reads > "$OUT/t/stdout.md" 2> "$OUT/t/stderr.log"
rc=$?
kill $S
nvidia-smi > "$OUT/t/nvidia-smi.txt" 2>&1
echo "rc=$rc" >> "$OUT/t/date.txt"; date -u >> "$OUT/t/date.txt"
cat "$OUT/t/stdout.md"; tail -n 5 "$OUT/t/stderr.log"
(cd "$OUT" && tar czf tune.tgz t && rm -rf t)
tail -n 3 /tmp/l2-stderr-copy 2>/dev/null
exit $rc
