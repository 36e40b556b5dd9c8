#!/usr/bin/env bash
# One device call of the 2026-11-26 (fifth) session, from the repository root
# of the carried tree: unpacks the GPU bundle, records the machine, then runs
# the stages named on the command line, each logging under $OUT, and packs the
# logs into $OUT/logs.tar.xz (the device tool returns at most 8 files).
#
#   bash docs/results/scripts/device-call.sh tests sanitize ncu timers:SECONDS p2p
#
#   tests      every test binary of the bundle against the real driver
#   sanitize   compute-sanitizer over $SAN_BINS with $SAN_TOOLS (run.sh's stage)
#   ncu        `gpu-bench truth --launch-only $NCU_LAUNCHES` (200) under Nsight Compute
#              (issue 26 items 1 and 2)
#   truth      `gpu-bench truth` (every mode, kernel mode on CUPTI) for the same cases
#   timers:S   `gpu-bench timer` reports, one after another, for S seconds (their
#              results.json files are compared pairwise by `gpu-bench compare` later,
#              on the build machine: the A/A false-verdict rate, issue 26)
#   p2p        `gpu-bench p2p` beside the PyTorch peer (docs/results/scripts/p2p-peers.py)
#   p2p1g      `gpu-bench p2p --bytes 1073741824`
#   p2plat     the 4-byte latency with raw runtime calls (p2p-latency-peer.py, CuPy)
set -u
# Multicast stays off everywhere (../shared/GPU.md): nothing here runs NCCL,
# but every environment keeps the switches.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
o=${OUT:-/tmp/device-out}
logs="$o/logs"
mkdir -p "$logs"
if [ -f target/bundle-xz/b.tar.xz ] && [ ! -x target/gpu-bundle/run.sh ]; then
  tar xJf target/bundle-xz/b.tar.xz -C target
fi
B=target/gpu-bundle
gb=$B/bin/gpu-bench
{ date -u; nvidia-smi; nvidia-smi topo -m; nvidia-smi -q -d CLOCK,POWER,TEMPERATURE | head -80; } >"$logs/machine.txt" 2>&1
summary="$o/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
# The logs are packed after every stage, so a call cut short by its time
# limit still brings back what ran.
pack() { tar cJf "$o/logs.tar.xz.part" -C "$o" logs && mv "$o/logs.tar.xz.part" "$o/logs.tar.xz"; }
trap 'say "stopped by a signal"; pack; exit 124' TERM INT
say "machine: $(nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tr '\n' ';')"
for stage in "$@"; do
  t0=$SECONDS
  case $stage in
    tests)
      OUT="$logs/bundle" timeout "${TESTS_TIMEOUT:-300}" bash $B/run.sh tests >"$logs/tests.log" 2>&1
      say "tests: exit $? in $((SECONDS - t0)) s; $(grep -c '^=== test' "$logs/tests.log") binaries; $(grep -E '^=== (ALL PASSED|FAILED)' "$logs/tests.log")"
      ;;
    sanitize)
      OUT="$logs/bundle" timeout "${SAN_TIMEOUT:-300}" bash $B/run.sh sanitize >"$logs/sanitize.log" 2>&1
      say "sanitize: exit $? in $((SECONDS - t0)) s; $(grep -c '^=== compute-sanitizer' "$logs/sanitize.log") passes; $(grep -E '^=== (ALL PASSED|FAILED)' "$logs/sanitize.log")"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/sanitize.log" | sort | uniq -c | tee -a "$summary"
      ;;
    ncu)
      ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      n=${NCU_LAUNCHES:-200}
      timeout "${NCU_TIMEOUT:-400}" "$ncu" --clock-control none --cache-control none --metrics gpu__time_duration.sum \
        --csv "$gb" truth --launch-only "$n" >"$logs/ncu-launch-only.csv" 2>"$logs/ncu-launch-only.err"
      rc=$?
      say "ncu truth --launch-only $n: exit $rc in $((SECONDS - t0)) s; $(grep -c gpu__time_duration "$logs/ncu-launch-only.csv") kernel rows"
      tail -3 "$logs/ncu-launch-only.err" | tee -a "$summary"
      ;;
    truth)
      timeout "${TRUTH_TIMEOUT:-240}" "$gb" truth --out "$logs/truth" >"$logs/truth.log" 2>&1
      say "gpu-bench truth: exit $? in $((SECONDS - t0)) s"
      ;;
    timers:*)
      budget=${stage#timers:}
      n=0
      while [ $((SECONDS - t0)) -lt "$budget" ]; do
        "$gb" timer --out "$logs/timer-$n" >/dev/null 2>"$logs/timer-$n.err" || say "timer $n: exit $?"
        n=$((n + 1))
      done
      say "timers: $n reports in $((SECONDS - t0)) s"
      ;;
    p2p)
      timeout 240 "$gb" p2p --out "$logs/p2p" >"$logs/p2p.log" 2>&1
      say "gpu-bench p2p: exit $? in $((SECONDS - t0)) s"
      timeout 200 python3 docs/results/scripts/p2p-peers.py >"$logs/p2p-peers.json" 2>"$logs/p2p-peers.err"
      say "p2p peers (PyTorch): exit $? in $((SECONDS - t0)) s"
      ;;
    p2p1g)
      timeout 240 "$gb" p2p --bytes 1073741824 --out "$logs/p2p-1g" >"$logs/p2p-1g.log" 2>&1
      say "gpu-bench p2p --bytes 1 GiB: exit $? in $((SECONDS - t0)) s"
      ;;
    p2plat)
      timeout 200 python3 docs/results/scripts/p2p-latency-peer.py >"$logs/p2p-latency.json" 2>"$logs/p2p-latency.err"
      say "p2p latency (CuPy, raw runtime calls): exit $? in $((SECONDS - t0)) s"
      ;;
    *) say "unknown stage $stage" ;;
  esac
  pack
done
rm -rf "$logs"
