#!/usr/bin/env bash
# The session's final verification on one warm GPU machine, from the
# repository root, with the bundle in target/gpu-bundle (cargo xtask
# gpu-bundle, plus bin/gpu-bench-before built from c7632f7: the commit
# before this session). Everything goes
# to /tmp/o and comes back as $OUT/results.tgz with the log beside it.
#   stage a: every test (--include-ignored), overhead before/after,
#            memcheck + synccheck over the GPU-facing binaries, racecheck over
#            all but gpu_api (the sanitizer's own multi-thread hang, see
#            docs/results/2026-11-23-h200), kernel mode under the sanitizer
#   stage b: gpu-bench truth + ncu + peers; the roofline main job + peers
here=target/gpu-bundle
O=/tmp/o; mkdir -p "$O"
exec > >(tee -a "$OUT/log") 2>&1
export GPU_SYNC_DRIVER=cuda
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
start=$SECONDS
san() { # tool binary limit
  local b="$here/tests/$2"
  [ -x "$b" ] || { echo "=== (no $2)"; return; }
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
  OUT=$O/bundle bash "$here/run.sh" tests overhead > "$O/bundle.log" 2>&1
  echo "run.sh tests overhead: exit $? (t=$((SECONDS-start)) s)"
  grep -E "^=== |test result|FAILED|panicked|ratio|within" "$O/bundle.log" | grep -v "test result: ok" | tail -60
  grep -c "test result: ok" "$O/bundle.log"
  for tool in memcheck synccheck; do
    for t in gpu_api prop_programs ledger host_memory kernel_contract capture_race prefetch book handoff; do
      san $tool sync-tests--$t 120
    done
    san $tool kernels--gpu 120
  done
  for t in prop_programs ledger host_memory kernel_contract prefetch book capture_race handoff; do
    san racecheck sync-tests--$t 120
  done
  san racecheck kernels--gpu 120
  san memcheck gpu-bench--gpu 120
  echo "=== kernel mode under memcheck: which branch"
  GPU_SANITIZER=1 timeout 120 "$cs" --tool memcheck "$here/tests/gpu-bench--gpu" --include-ignored --nocapture 2>&1 \
    | grep -iE "unavailable|cupti|test result|SUMMARY" | head -5
  pack a
  ;;
b)
  OUT=$O/truth BUNDLE=$here/bin bash gpu-bench-cli/peer/truth_run.sh > "$O/truth.log" 2>&1
  echo "truth: exit $? (t=$((SECONDS-start)) s)"
  tail -5 "$O/truth.log"
  # PyTorch peers: everything over 1 GiB arrays, the memory peers again over
  # 4 GiB (the main job's array size), merged (docs/results/roofline/run-pass2b.sh).
  PYTHONUNBUFFERED=1 timeout 60 python3 docs/results/roofline/peers.py "$O/peers-1g.json" > "$O/roofline-peers.log" 2>&1
  PEERS_MIB=4096 PEERS_MEM_ONLY=1 PYTHONUNBUFFERED=1 timeout 45 python3 docs/results/roofline/peers.py "$O/peers-4g.json" >> "$O/roofline-peers.log" 2>&1
  python3 -c "
import json
mem=json.load(open('$O/peers-4g.json')); names={p['name'] for p in mem}
rest=[p for p in json.load(open('$O/peers-1g.json')) if p['name'] not in names]
json.dump(mem+rest, open('$O/roofline-peers.json','w'), indent=1)"
  echo "roofline peers: exit $? (t=$((SECONDS-start)) s)"
  timeout 150 "$here/bin/gpu-bench" roofline --array-mib 4096 --peers "$O/roofline-peers.json" --out "$O/roofline" > "$O/roofline.log" 2>&1
  echo "roofline: exit $? (t=$((SECONDS-start)) s)"
  grep -E "^\| " "$O/roofline/report.md" | grep -iE "HBM|FMA|tensor|L2|elementwise|torch|driver" | cut -c1-160 | head -40
  pack b
  ;;
esac
echo "=== done (t=$((SECONDS-start)) s)"
