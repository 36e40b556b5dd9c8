#!/bin/bash
# Session 3's verification of 3b83ec7 (issue 8), from the repository root
# with the bundle in target/gpu-bundle (plus bin/gpu-bench-before built from
# bcf1a47 and bin/null_driver_overhead). Stage "a": null driver, overhead
# before/after, every test, memcheck+synccheck over the GPU-facing binaries,
# racecheck over all but gpu_api. Stage "b": racecheck over gpu_api.
here=$(cd "$(dirname "$0")" && pwd)
export GPU_SYNC_DRIVER=cuda
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
start=$SECONDS
san() { # tool binary limit
  local b="$here/tests/$2"
  echo "=== compute-sanitizer --tool $1 $2 (t=$((SECONDS-start)) s)"
  local t0=$SECONDS
  GPU_SANITIZER=1 timeout "$3" "$cs" --tool "$1" --report-api-errors no --error-exitcode 99 --print-limit 20 "$b" --include-ignored --test-threads=1 > "$OUT/san-$1-$2.log" 2>&1
  local rc=$?
  grep -E "SUMMARY|test result|Error|error|hazard" "$OUT/san-$1-$2.log" | grep -v "^test .* ok$" | tail -8
  echo "    exit $rc in $((SECONDS-t0)) s"
}
case "$1" in
a)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  (for m in launch handoff; do for i in 1 2 3; do MODE=$m N=2000000 taskset -c 2 "$here/bin/null_driver_overhead" | tail -1; done; done) > "$OUT/null-driver.txt" 2>&1
  cat "$OUT/null-driver.txt"
  OUT=$OUT bash "$here/run.sh" overhead tests
  echo "run.sh exit $? (t=$((SECONDS-start)) s)"
  for tool in memcheck synccheck; do
    for t in gpu_api prop_programs ledger host_memory kernel_contract capture_race prefetch book; do san $tool sync-tests--$t 120; done
    san $tool kernels--gpu 120
  done
  for t in prop_programs ledger host_memory kernel_contract prefetch book; do san racecheck sync-tests--$t 120; done
  san racecheck kernels--gpu 120
  left=$((585 - SECONDS + start)); [ $left -lt 30 ] && left=30
  san racecheck sync-tests--capture_race $left
  ;;
b)
  san racecheck sync-tests--gpu_api ${2:-570}
  ;;
esac
echo "=== done (t=$((SECONDS-start)) s)"
