#!/usr/bin/env bash
# The fourth session's verification on one GPU machine, from the repository
# root, with the bundle unpacked in target/gpu-bundle (cargo xtask gpu-bundle;
# carried packed as target/bundle-xz/b.tar.xz). Results go to /tmp/o and come
# back as $OUT/results.tgz with the log beside it.
#   1. every test binary of the bundle (--include-ignored)
#   2. memcheck, racecheck and synccheck over the kernels' GPU tests (the
#      changed code: copy_bulk, the bulk pipeline with run-time stages)
#   3. the roofline main job with its PyTorch peers in the same call
here=target/gpu-bundle
O=/tmp/o; mkdir -p "$O"
exec > >(tee -a "$OUT/log") 2>&1
export GPU_SYNC_DRIVER=cuda
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
start=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$O/gpu.txt"
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_throttle_reasons.active --format=csv -lms 500 > "$O/smi.csv" 2>&1 &)
TEST_TIMEOUT=150 OUT=$O/bundle bash "$here/run.sh" tests > "$O/bundle.log" 2>&1
echo "run.sh tests: exit $? (t=$((SECONDS-start)) s)"
grep -E "^=== |test result|FAILED|panicked" "$O/bundle.log" | grep -v "test result: ok" | tail -30
echo "test binaries ok: $(grep -c 'test result: ok' "$O/bundle.log")"
for tool in memcheck racecheck synccheck; do
  echo "=== compute-sanitizer --tool $tool kernels--gpu (t=$((SECONDS-start)) s)"
  GPU_SANITIZER=1 timeout 150 "$cs" --tool "$tool" --report-api-errors no --error-exitcode 99 --print-limit 20 \
    "$here/tests/kernels--gpu" --include-ignored --test-threads=1 > "$O/san-$tool-kernels--gpu.log" 2>&1
  echo "    exit $?"; grep -E "SUMMARY|test result|hazard" "$O/san-$tool-kernels--gpu.log" | tail -3
done
echo "=== roofline main job + PyTorch peers (t=$((SECONDS-start)) s)"
PEERS_MIB=4096 PYTHONUNBUFFERED=1 timeout 90 python3 docs/results/roofline/peers.py "$O/roofline-peers.json" > "$O/roofline-peers.log" 2>&1
echo "roofline peers rc=$?"
timeout 150 "$here/bin/gpu-bench" roofline --array-mib 4096 --peers "$O/roofline-peers.json" --out "$O/roofline" > "$O/roofline.log" 2>&1
echo "roofline: exit $? (t=$((SECONDS-start)) s)"
grep -E "^\| " "$O/roofline/report.md" | grep -iE "HBM|tensor|L2|driver|phases|met" | cut -c1-200 | head -40
tar czf "$OUT/results.tgz" -C /tmp o
echo "=== done (t=$((SECONDS-start)) s)"
