#!/usr/bin/env bash
# Fourth call: the tree after the review's changes (the profiler's trace
# types re-exported from gpu-sync, the sweeps' shared checks, the
# --only-tensor report): every test binary, memcheck over the trace test,
# the profiler's run, the roofline main job (no peers). Results in
# $OUT/results-d.tgz.
here=target/gpu-bundle
O=/tmp/o; mkdir -p "$O"
exec > >(tee -a "$OUT/log") 2>&1
export GPU_SYNC_DRIVER=cuda
start=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
TEST_TIMEOUT=150 OUT=$O/bundle bash "$here/run.sh" tests > "$O/tests.log" 2>&1
echo "run.sh tests: exit $? (t=$((SECONDS-start)) s); binaries ok: $(grep -c 'test result: ok' "$O/tests.log")"
grep -E "FAILED|panicked" "$O/tests.log" | head
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for t in trace twins; do
  GPU_SANITIZER=1 timeout 90 "$cs" --tool memcheck --report-api-errors no --error-exitcode 99 "$here/tests/sync-tests--$t" \
    --include-ignored --test-threads=1 > "$O/san-memcheck-$t.log" 2>&1
  echo "memcheck $t: exit $?"; grep -E "ERROR SUMMARY|test result" "$O/san-memcheck-$t.log"
done
mkdir -p "$O/prof-bundle/fatbin"
cp "$here/bin/gpu-bench" gpu-bench-cli/peer/profile_peer.py "$O/prof-bundle/"; cp kernels/fatbin/*.fatbin "$O/prof-bundle/fatbin/"
cp "$here/tests/gpu-bench--profile_gpu" "$O/prof-bundle/profile_gpu"; cp "$here/tests/gpu-bench-cli--timeline" "$O/prof-bundle/timeline_test"
OUT=$O/prof timeout 200 bash docs/results/2026-11-25-profiler/run.sh "$O/prof-bundle" > "$O/prof.log" 2>&1; echo "profiler rc=$? (t=$((SECONDS-start)) s)"
grep -E "rc=|overlapped|events - cupti|\| (spin_cycles|scale_f32) \|" "$O/prof.log" | head -20; rm -rf "$O/prof-bundle"
timeout 150 "$here/bin/gpu-bench" roofline --array-mib 4096 --out "$O/roofline" > "$O/roofline.log" 2>&1
echo "roofline: exit $? (t=$((SECONDS-start)) s)"
grep -E "^\| (phases|HBM read|elementwise|FP64 FMA|BF16 tensor) " "$O/roofline/report.md" | cut -c1-150 | head -12
grep -iE "ridge" "$O/roofline/report.md" | head -4 | cut -c1-150
tar czf "$OUT/results-d.tgz" -C /tmp o
echo "=== done (t=$((SECONDS-start)) s)"
