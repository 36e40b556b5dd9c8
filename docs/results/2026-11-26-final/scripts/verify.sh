#!/usr/bin/env bash
# The session's last verification, on the committed final code: every test
# binary of the bundle (cargo xtask gpu-bundle, carried packed as
# target/bundle-xz/b.tgz), memcheck/racecheck/synccheck over the kernels' GPU
# tests, then the PyTorch peers and the main job in the same call.
# Results: /tmp/v, back as $OUT/verify.tgz.
here=target/gpu-bundle
O=/tmp/v; mkdir -p "$O"
export GPU_SYNC_DRIVER=cuda
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
start=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$O/gpu.txt"
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_throttle_reasons.active --format=csv -lms 500 > "$O/smi.csv" 2>&1 &)
TEST_TIMEOUT=150 OUT=$O/bundle bash "$here/run.sh" tests > "$O/bundle.log" 2>&1
echo "run.sh tests: exit $? (t=$((SECONDS-start)) s)"
grep -E "^=== |test result|FAILED|panicked" "$O/bundle.log" | grep -v "test result: ok" | tail -20
echo "test binaries ok: $(grep -c 'test result: ok' "$O/bundle.log")"
# SAN_BINS: call 17 ran kernels--gpu; call 24 (after the review) also
# gpu-bench--gpu, which holds the bulk pipelines' shared-memory edge test.
for b in ${SAN_BINS:-kernels--gpu}; do
for tool in memcheck racecheck synccheck; do
  GPU_SANITIZER=1 timeout 150 "$cs" --tool "$tool" --report-api-errors no --error-exitcode 99 --print-limit 20 \
    "$here/tests/$b" --include-ignored --test-threads=1 > "$O/san-$tool-$b.log" 2>&1
  echo "compute-sanitizer $tool $b: exit $?"; grep -E "SUMMARY|test result" "$O/san-$tool-$b.log" | tail -2
done
done
PEERS_MIB=4096 PYTHONUNBUFFERED=1 timeout 90 python3 docs/results/roofline/peers.py "$O/roofline-peers.json" > "$O/roofline-peers.log" 2>&1
echo "roofline peers rc=$?"
timeout 150 "$here/bin/gpu-bench" roofline --array-mib 4096 --peers "$O/roofline-peers.json" --out "$O/roofline" > "$O/roofline.log" 2>&1
echo "roofline: exit $? (t=$((SECONDS-start)) s)"
grep -E "^\| (HBM|driver D2D|L2|BF16 tensor|FP16 tensor|FP8 tensor|phases|device)" "$O/roofline/report.md" | cut -c1-170
tar czf "$OUT/verify.tgz" -C /tmp v
