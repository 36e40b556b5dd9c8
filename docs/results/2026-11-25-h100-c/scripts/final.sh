#!/usr/bin/env bash
# The third session's final verification on one warm GPU machine, from the
# repository root, with the bundle unpacked in target/gpu-bundle (cargo xtask
# gpu-bundle; carried packed as target/bundle-xz/b.tar.xz). Everything goes
# to /tmp/o and comes back as $OUT/results-<stage>.tgz with the log beside it.
#   stage a: every test binary (--include-ignored), then memcheck and
#            synccheck over the GPU-facing binaries, racecheck over all but
#            gpu_api
#   stage b: overhead (three runs, two phases: CUPTI never attached, then
#            attached), the timer-truth table (event modes first, kernel mode
#            in a second pass), the roofline main job with its PyTorch peers
here=target/gpu-bundle
O=/tmp/o; mkdir -p "$O"
exec > >(tee -a "$OUT/log") 2>&1
export GPU_SYNC_DRIVER=cuda
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
start=$SECONDS
late() { [ $((SECONDS-start)) -gt "$1" ]; }
san() { # tool binary limit
  local b="$here/tests/$2"
  [ -x "$b" ] || { echo "=== (no $2)"; return; }
  if late 540; then echo "=== skipped (time): $1 $2"; return; fi
  echo "=== compute-sanitizer --tool $1 $2 (t=$((SECONDS-start)) s)"
  local t0=$SECONDS
  GPU_SANITIZER=1 timeout "$3" "$cs" --tool "$1" --report-api-errors no --error-exitcode 99 --print-limit 20 \
    "$b" --include-ignored --test-threads=1 > "$O/san-$1-$2.log" 2>&1
  local rc=$?
  grep -E "SUMMARY|test result|hazard|unavailable" "$O/san-$1-$2.log" | tail -6
  echo "    exit $rc in $((SECONDS-t0)) s"
}
pack() { tar czf "$OUT/results-$1.tgz" -C /tmp o; ls -la "$OUT"; }
case "$1" in
a)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  TEST_TIMEOUT=150 OUT=$O/bundle bash "$here/run.sh" tests > "$O/bundle.log" 2>&1
  echo "run.sh tests: exit $? (t=$((SECONDS-start)) s)"
  grep -E "^=== |test result|FAILED|panicked" "$O/bundle.log" | grep -v "test result: ok" | tail -40
  echo "test binaries ok: $(grep -c 'test result: ok' "$O/bundle.log")"
  for tool in memcheck synccheck; do
    for t in gpu_api host_memory twins trace kernel_contract capture_race handoff prop_programs ledger prefetch book bench_kernels; do
      san $tool sync-tests--$t 90
    done
    san $tool kernels--gpu 120
  done
  for t in host_memory twins trace kernel_contract handoff prefetch book prop_programs capture_race ledger bench_kernels; do
    san racecheck sync-tests--$t 90
  done
  san racecheck kernels--gpu 120
  pack a
  ;;
b)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  gb="$here/bin/gpu-bench"
  for i in 1 2 3; do
    taskset -c 2 timeout 100 "$gb" overhead --repeat 7 --out "$O/overhead-$i" > "$O/overhead-$i.log" 2>&1
    echo "overhead run $i rc=$? (t=$((SECONDS-start)) s)"
    grep -E "median per submission|(launch|handoff)\{repetition=all\} \| (median|min|max) ratio" "$O/overhead-$i/report.md" \
      | sed 's/{submission=[^}]*}//' | cut -c1-110
  done
  echo "=== timer truth (t=$((SECONDS-start)) s)"
  timeout 240 "$gb" truth --out "$O/truth" > "$O/truth.log" 2>&1; echo "truth rc=$? (t=$((SECONDS-start)) s)"
  grep -E "event floor|over kernel" "$O/truth/report.md" | head -4
  echo "=== roofline main job + PyTorch peers (t=$((SECONDS-start)) s)"
  PEERS_MIB=4096 PYTHONUNBUFFERED=1 timeout 90 python3 docs/results/roofline/peers.py "$O/roofline-peers.json" > "$O/roofline-peers.log" 2>&1
  echo "roofline peers rc=$?"
  timeout 150 "$gb" roofline --array-mib 4096 --peers "$O/roofline-peers.json" --out "$O/roofline" > "$O/roofline.log" 2>&1
  echo "roofline: exit $? (t=$((SECONDS-start)) s)"
  grep -E "^\| " "$O/roofline/report.md" | grep -iE "HBM|FMA|tensor|L2|elementwise|torch|driver|phases" | cut -c1-170 | head -40
  grep -E "phases" "$O/roofline/report.md"
  pack b
  ;;
esac
echo "=== done (t=$((SECONDS-start)) s)"
