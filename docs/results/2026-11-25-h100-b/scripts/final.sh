#!/usr/bin/env bash
# The second session's final verification on one warm GPU machine, from the
# repository root, with the bundle in target/gpu-bundle (cargo xtask
# gpu-bundle; bin/gpu-bench-before built from e2e9913, the previous
# session's last commit, when present). Everything goes to /tmp/o and comes
# back as $OUT/results-<stage>.tgz with the log beside it.
#   stage a: every test (--include-ignored), overhead (recording off/on;
#            before/after), memcheck + synccheck over the GPU-facing
#            binaries, racecheck over all but gpu_api
#   stage b: pageable transfers against PyTorch (same call), the profiler's
#            timeline with both backends + the PyTorch profiler peer, the
#            roofline main job + peers, the mma.sync fallback check
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
  TEST_TIMEOUT=150 OUT=$O/bundle bash "$here/run.sh" tests overhead > "$O/bundle.log" 2>&1
  echo "run.sh tests overhead: exit $? (t=$((SECONDS-start)) s)"
  grep -E "^=== |test result|FAILED|panicked|ratio|within|recording" "$O/bundle.log" | grep -v "test result: ok" | tail -70
  echo "test binaries ok: $(grep -c 'test result: ok' "$O/bundle.log")"
  for tool in memcheck synccheck; do
    for t in gpu_api host_memory twins trace kernel_contract capture_race handoff prop_programs ledger prefetch book; do
      san $tool sync-tests--$t 90
    done
    san $tool kernels--gpu 90
  done
  for t in host_memory twins trace kernel_contract handoff prefetch book prop_programs capture_race ledger; do
    san racecheck sync-tests--$t 90
  done
  san racecheck kernels--gpu 90
  pack a
  ;;
b)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  echo "=== pageable and pinned transfers, gpu-bench then PyTorch (t=$((SECONDS-start)) s)"
  mkdir -p "$O/bw"
  taskset -c 2-5 timeout 90 "$here/bin/gpu-bench" bandwidth --out "$O/bw/ours" > "$O/bw/ours.log" 2>&1; echo "bandwidth rc=$?"
  taskset -c 2-5 timeout 90 python3 gpu-bench-cli/peer/torch_peer.py --clock-mhz 1980 --out "$O/bw/torch" > "$O/bw/torch.log" 2>&1; echo "torch_peer rc=$?"
  grep -iE "pageable|pinned" "$O/bw/ours/report.md" | head -24; tail -18 "$O/bw/torch/peer.md"
  echo "=== profiler: timeline (both backends), PyTorch profiler peer, GPU tests (t=$((SECONDS-start)) s)"
  mkdir -p "$O/prof-bundle/fatbin"
  cp "$here/bin/gpu-bench" "$O/prof-bundle/"; cp gpu-bench-cli/peer/profile_peer.py "$O/prof-bundle/"
  cp kernels/fatbin/*.fatbin "$O/prof-bundle/fatbin/"
  cp "$here"/tests/gpu-bench--profile_gpu "$O/prof-bundle/profile_gpu" 2>/dev/null
  cp "$here"/tests/gpu-bench-cli--timeline "$O/prof-bundle/timeline_test" 2>/dev/null
  OUT=$O/prof timeout 240 bash docs/results/2026-11-25-profiler/run.sh "$O/prof-bundle" > "$O/prof.log" 2>&1; echo "profiler rc=$?"
  tail -60 "$O/prof.log"; rm -rf "$O/prof-bundle"
  echo "=== mma.sync fallback (t=$((SECONDS-start)) s)"
  timeout 100 bash docs/results/roofline/run-roof2.sh "$O/roof2" > "$O/roof2.log" 2>&1; echo "roof2 rc=$?"
  tail -30 "$O/roof2.log"
  echo "=== roofline main job + PyTorch peers (t=$((SECONDS-start)) s)"
  PEERS_MIB=4096 PYTHONUNBUFFERED=1 timeout 75 python3 docs/results/roofline/peers.py "$O/roofline-peers.json" > "$O/roofline-peers.log" 2>&1
  echo "roofline peers rc=$?"
  timeout 150 "$here/bin/gpu-bench" roofline --array-mib 4096 --peers "$O/roofline-peers.json" --out "$O/roofline" > "$O/roofline.log" 2>&1
  echo "roofline: exit $? (t=$((SECONDS-start)) s)"
  grep -E "^\| " "$O/roofline/report.md" | grep -iE "HBM|FMA|tensor|L2|elementwise|scale|torch|driver|sweep|ridge|main job" | cut -c1-170 | head -50
  pack b
  ;;
esac
echo "=== done (t=$((SECONDS-start)) s)"
