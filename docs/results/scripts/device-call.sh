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
#   nccl       `gpu-bench nccl` (every collective, 8 B-1 GiB, one process driving every GPU),
#              then in the same call nccl-tests all_reduce/all_gather/reduce_scatter/sendrecv_perf
#              -b 8 -e 1G -f 2 -g N (built by target/peers/build-nccl-tests.sh: carry a copy of
#              ../shared/peers as target/peers) and torch.distributed all_reduce under torchrun,
#              one process per GPU (nccl-torch-allreduce.py), at the same sizes (issue 30 item 5)
#   ddp        the all_reduce and ddp_overlap examples (the bundle's example test binaries, one
#              process driving every GPU; ddp_overlap at $DDP_BUCKETS x $DDP_BUCKET_MIB MiB, default
#              16 x 64, $DDP_STEPS steps), then PyTorch's peer on the same buckets under torchrun,
#              one process per GPU (ddp-overlap-torch.py: matmul and elementwise compute, works
#              waited at the end and one bucket behind) (issue 30 item 6)
#   ddpx       ddp_overlap (one process, every GPU, $DDP_BUCKETS x $DDP_BUCKET_MIB MiB) three ways:
#              scale passes on non-blocking communicators, the same on blocking ones, and
#              compute-bound passes (DDP_FMA=${DDP_FMA:-256} FMAs per float) on blocking ones
#   ncclgraph  `gpu-bench nccl` all-reduce 8 B-32 KiB captured (--graph 10), blocking and not
#   ncclbig    `gpu-bench nccl` all-reduce 16 MiB-1 GiB, non-blocking and blocking, beside nccl-tests
#              all_reduce_perf -b 16M -e 1G -g N (built in the background)
#   soak       the nccl_soak example's test for $SOAK_SECONDS (60) s over every GPU
#   ddptorch   PyTorch's DDP-style peer (ddp-overlap-torch.py, torchrun, one process per GPU)
#   testsel    only the bundle's test binaries named in $TEST_BINS (names under tests/), ignored
#              GPU tests included, each within $TEST_TIMEOUT (120 s)
#   ncclsmall  the small-message question (issue 30): `gpu-bench nccl` all-reduce 8 B-32 KiB and
#              `gpu-bench nccl --host-cost` (tracked against raw NCCL calls), each with non-blocking
#              and with blocking communicators; nccl-tests all_reduce_perf -b 8 -e 32K -g N (built
#              alone, in the background) with NCCL_COMM_BLOCKING=0 and 1, and with -G 10 (graphs)
#   gaps       issue 26: batch mode against CUPTI's kernel records of back-to-back launches (batch_gaps)
#   pace       issue 26: truth's memory kernels in batches of 10 and 50 (idle_gap_probe.cu … pace): the pace by
#              events and the range profiler's user ranges, ncu's range replay of the same batches and ncu's
#              duration of each kernel alone ($PACE_ROUNDS rounds, 7; PACE_NCU=0: the probe alone)
#   rooms      issue 26: kernel_cycle and the cycle probe with the profiler made for 256-1024 kernels a pass
#   kcncu      issue 26: ncu on the kernel_cycle example's plain launches (carried as target/cyc/kernel_cycle)
#   idle       issue 26: the empty kernel and the one-cycle spin on the range profiler, back to back and
#              each after a sync (+ 20 µs, 200 µs or 2 ms idle), in $IDLE_PROCS (3) processes
#              (idle_gap_probe.cu … idle)
#   second     issue 26: the small kernels on a second stream (probe and ncu), beside the first
#   streams    issue 26: truth's small kernels on 13 streams (idle_gap_probe.cu … streams), connections unset, 1, 32
#   anatomy    the event anatomy example (carried as target/anatomy/event_anatomy), issue 26 item 5;
#              ANATOMY_ARGS=execs runs its (g) alone: graph execs of one launch, raw and through gpu-sync;
#              ANATOMY_ARGS=sizes runs its (f) alone: hot and graph against raw pairs, 1 Ki-256 Mi
#   testf:B:F  test binary B (under tests/) filtered to F, with its output
#   ncclmed    $ROUNDS (5) rounds: ours (one process, blocking) all-reduce/all-gather/reduce-scatter/
#              send-recv 16 MiB-1 GiB beside nccl-tests -g N; ours --procs N and torch.distributed
#              all-reduce at the same sizes (the busbw target's medians)
#   smallmed   $ROUNDS rounds of all-reduce 8 B-32 KiB: ours eager and --graph 10 (blocking), nccl-tests
#              eager and -G 10, the order alternating; $SMALL_WARMUP/$SMALL_ITERS (10/50) both sides'
#              -w/-n, SMALL_GRAPH=0 eager only, SMALL_NT_TWICE=1 nccl-tests twice a round (its A/A control);
#              then --host-cost --blocking ($HC_BATCHES 11, $HC_ITERS 50); SMALL_OLD=PATH also runs
#              that gpu-bench (an earlier build) eager each round;
#              $NGPU ranks (every GPU) for a CUDA_VISIBLE_DEVICES subset
#   ddpcmp     ddp_overlap (bin/, fma, blocking; $DDP_VARIANTS "priority:reserved SMs") and
#              ddp-overlap-torch.py (matmul, wait at the end, NCCL streams at default and high priority)
#              on $DDP_BUCKETS x $DDP_BUCKET_MIB MiB (32 x 32); $DDP_C_OVER_M aims both at C ≈ R·M,
#              $DDP_GPUS (0,1) uses those GPUs only, $DDP_TORCH_PRIOS (default high), $DDP_HOLD_SHARED
#              (ddp_overlap's --hold-shared); SM clocks logged
#   procs      one process per GPU: ddp_overlap --spawn N, under torchrun --no-python, gpu-bench nccl
#              --procs N (8 B-1 MiB); the all_reduce example
#   procsblk   one process per GPU, $ROUNDS (3) interleaved rounds of all-reduce 8 B-64 MiB: ours
#              (--procs N --cupti) on non-blocking communicators, ours with NCCL_COMM_BLOCKING=1
#              NCCL_RUNTIME_CONNECT=0 in the environment (NCCL's override makes them blocking: the
#              experiment behind the 16 MiB row), torch.distributed at the same sizes
#   procsip    one process per GPU, all-reduce 8 MiB-$PI_MAX (256 MiB) in place and out of place, beside torch.distributed,
#              $ROUNDS (5) rounds (issue 30's 16 MiB row)
#   handoffab  the cross-device handoff of this bundle against target/bundle-old/b.tar.xz (an earlier
#              build), $ROUNDS (5) alternating rounds of `gpu-bench p2p --bytes 16M`, handoff-ab.py
#   handoff    `gpu-bench p2p` alone (the cross-device handoff's host ratio and its GPU time)
#   aa         $AA_REPORTS (6) `gpu-bench timer` reports (default set, every mode) on each GPU, the
#              GPUs in parallel, into timer-dD-I (compare-aa.sh pairs them on the build machine)
#   overhead   `taskset -c 2 gpu-bench overhead --repeat 7` (the tracked launch and handoff against raw)
#   procsmed   one process per GPU, $ROUNDS (5) interleaved rounds of all-reduce 8 B-1 GiB: ours
#              (--blocking --procs N: blocking ranks split from non-blocking ones, NCCL_RUNTIME_CONNECT=0)
#              and torch.distributed (N processes), no CUPTI, no tuning log
#   truthser   `gpu-bench truth --kernel-records serial` (kernel mode on CUPTI's serialized records)
#   truthprof  `gpu-bench truth --kernel-records profiler` (kernel mode on CUPTI's range profiler,
#              truth's default since 2026-11-28)
#   truthcon   `gpu-bench truth --kernel-records concurrent` (CUPTI's concurrent kernel records)
#   (smallmed and procsmed run both sides under `taskset -c $PIN` when PIN is set)
#   ncclrec    what CUPTI's kernel records cost NCCL: all-reduce 8 B-32 KiB and 16-256 MiB, one process,
#              blocking, without CUPTI, with --cupti (concurrent records) and --cupti --kernel-records serial
#   hang:B:F   test F of binary B (under tests/) in the background with NCCL_DEBUG=INFO; after
#              $HANG_AFTER (25) s, every thread's stack (gdb, else eu-stack, else /proc wchan), then killed
#   hcprocs    the host cost with one process per GPU (issue 30): `gpu-bench nccl --procs $NGPU --host-cost
#              --blocking` 8 B-32 KiB ($HC_BATCHES 21, $HC_ITERS 50): each rank's raw ncclAllReduce call
#              against its tracked all-reduce, every rank's rows; under `taskset -c $PIN` when PIN is set
#   ncclcupti  the CUPTI check of the event times (issue 30): gpu-bench nccl --cupti, all-reduce,
#              eager 8 B-32 KiB (blocking) and 16 MiB-256 MiB, then --procs N 8 B-64 MiB (non-blocking)
set -u
# Multicast stays off everywhere (../shared/GPU.md): the nccl stage runs
# NCCL (gpu-bench refuses to without NCCL_NVLS_ENABLE=0), and every other
# environment keeps the switches too.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
o=${OUT:-/tmp/device-out}
logs="$o/logs"
mkdir -p "$logs"
if [ -f target/bundle-xz/b.tar.xz ] && [ ! -x target/gpu-bundle/run.sh ]; then
  tar xJf target/bundle-xz/b.tar.xz -C target
fi
B=target/gpu-bundle
gb=$B/bin/gpu-bench
# gpu-bench-cli's tests run the bundle's gpu-bench (the path compiled into
# them is the build machine's).
export GPU_BENCH_BIN=$PWD/$gb
{ date -u; nvidia-smi; nvidia-smi topo -m; nvidia-smi -q -d CLOCK,POWER,TEMPERATURE | head -80; } >"$logs/machine.txt" 2>&1
summary="$o/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
# The logs are packed after every stage, so a call cut short by its time
# limit still brings back what ran.
pack() { tar cJf "$o/logs.tar.xz.part" -C "$o" logs && mv "$o/logs.tar.xz.part" "$o/logs.tar.xz"; }

# Builds the idle-gap probe (docs/results/scripts/idle_gap_probe.cu) as /tmp/gap, once per call;
# sets t to the CUDA toolkit's target tree (CUPTI's headers and libcupti), which the stages'
# LD_LIBRARY_PATH uses after it.
gap_build() {
  t=/usr/local/cuda/targets/x86_64-linux
  [ -x /tmp/gap ] || "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O2 -o /tmp/gap \
    docs/results/scripts/idle_gap_probe.cu -I$t/include -L$t/lib -lcupti -lcuda >"$logs/gap-build.log" 2>&1
}
# gap_run NAME LIMIT ARGS...: the probe (after gap_build) on kernels/fatbin with ARGS, within LIMIT s,
# into $logs/NAME.txt; its exit and its output into the summary.
gap_run() {
  local name=$1 limit=$2
  shift 2
  LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout "$limit" /tmp/gap kernels/fatbin "$@" >"$logs/$name.txt" 2>&1
  say "$name probe: exit $?"
  tee -a "$summary" <"$logs/$name.txt"
}

# Per kernel of an ncu CSV (gpu__time_duration.sum): the median in ns, the count and the most
# common readings, into the summary.
ncu_summary() {
  python3 - "$1" <<'PY' 2>&1 | tee -a "$summary"
import csv, collections, statistics, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, body = rows[0], rows[1:]
k, v, u = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
scale = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6}
by = collections.defaultdict(list)
for r in body:
    by[r[k]].append(float(r[v].replace(",", "")) * scale.get(r[u], 1.0))
for name, xs in by.items():
    c = collections.Counter(xs).most_common(4)
    print("  ncu %-12s median %.1f ns over %d; most common %s" % (name, statistics.median(xs), len(xs), c))
PY
}
# nccl-tests (every *_perf), built once per call in the background against
# the wheel's libnccl (target/peers/build-nccl-tests.sh: carry a copy of
# ../shared/peers as target/peers); `ntwait` waits for it and says whether
# it is there. `nt` is its folder, `nccl_lib` the library's.
nt=/tmp/nccl-tests
nccl_lib=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2>/dev/null)/lib
ntpid=""
ntstart() {
  [ -n "$ntpid" ] || [ -x "$nt/all_reduce_perf" ] && return 0
  bash target/peers/build-nccl-tests.sh "$nt" >"$logs/nccl-tests-build.log" 2>&1 &
  ntpid=$!
}
ntwait() {
  ntstart
  if [ -n "$ntpid" ]; then
    wait "$ntpid"
    say "nccl-tests build: exit $? ($(tail -1 "$logs/nccl-tests-build.log" | cut -c1-80))"
    ntpid=""
  fi
  [ -x "$nt/all_reduce_perf" ]
}
# One line per variant of ddp-overlap-torch.py's JSON, into the summary.
torch_ddp_summary() {
  python3 - "$1" <<'PY' 2>&1 | tee -a "$summary"
import json, sys
r = json.load(open(sys.argv[1]))
for v in r["variants"]:
    print("  torch %-11s wait %-4s n=%s C %.3f ms M %.3f ms C/M %.2f step %.3f ms ideal/step %.3f hidden %.1f %% "
          "max reserved %.1f MiB (operands %.1f MiB) wrong %d" % (
          v["compute"], v["wait"], v.get("matrix", v.get("passes")), v["c_s"] * 1e3, v["m_s"] * 1e3,
          v["c_over_m"], v["step_s"] * 1e3, v["ideal_over_step"], v["hidden"] * 100,
          v["max_memory_reserved"] / 2**20, v["operand_bytes"] / 2**20, v["wrong"]))
    if "cold_step_s" in v:
        print("    cache emptied just before: step %.3f ms ideal/step %.3f hidden %.1f %%" % (
              v["cold_step_s"] * 1e3, v["cold_ideal_over_step"], v["cold_hidden"] * 100))
PY
}
# One nccl-tests binary: ntrun NAME LOG ARGS…
ntrun() {
  local name=$1 log=$2
  shift 2
  LD_LIBRARY_PATH="$nccl_lib:${LD_LIBRARY_PATH:-}" ${NTPIN:-} timeout 150 "$nt/${name}_perf" "$@" >"$log" 2>&1
}
# The SM clock, power and throttle reasons of every GPU every 100 ms, into
# a CSV, while a run goes (clocks_start FILE … clocks_stop), and a line per
# GPU of what it read (clocks_summary FILE: the SM clock's median and range
# while power was above 150 W, that is while the GPU worked).
clkpid=""
clocks_start() {
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader,nounits -lms 100 >"$1" 2>/dev/null &
  clkpid=$!
}
clocks_stop() {
  [ -n "$clkpid" ] && kill "$clkpid" 2>/dev/null && wait "$clkpid" 2>/dev/null
  clkpid=""
}
clocks_summary() {
  python3 - "$1" <<'PY' 2>&1 | tee -a "$summary"
import collections, statistics, sys
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    try:
        by[int(f[1])].append((float(f[2]), float(f[4]), f[6]))
    except (ValueError, IndexError):
        pass
for g, rows in sorted(by.items()):
    busy = [r for r in rows if r[1] > 150] or rows
    clk = [r[0] for r in busy]
    reasons = collections.Counter(r[2] for r in busy).most_common(2)
    print("  clocks GPU %d: SM %d MHz median (%d-%d) over %d samples above 150 W (of %d), power max %.0f W, throttle %s"
          % (g, statistics.median(clk), min(clk), max(clk), len(busy), len(rows), max(r[1] for r in rows), reasons))
PY
}
trap 'clocks_stop; say "stopped by a signal"; pack; exit 124' TERM INT
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
    nccl)
      # The same switches, again where NCCL runs (gpu-bench nccl checks them).
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      timeout "${NCCL_TIMEOUT:-500}" "$gb" nccl --max-bytes 1G --out "$logs/nccl" >"$logs/nccl.log" 2>&1
      say "gpu-bench nccl ($ngpu GPUs, 8 B-1 GiB, one process): exit $? in $((SECONDS - t0)) s"
      grep -A8 '^## Summary' "$logs/nccl/report.md" | tee -a "$summary"
      if ntwait; then
        for t in all_reduce all_gather reduce_scatter sendrecv; do
          ntrun $t "$logs/nccl-tests-$t.log" -b 8 -e 1G -f 2 -g "$ngpu"
          say "nccl-tests ${t}_perf -g $ngpu: exit $?; $(grep 'Avg bus bandwidth' "$logs/nccl-tests-$t.log")"
        done
      fi
      timeout 300 python3 -m torch.distributed.run --standalone --nproc-per-node "$ngpu" \
        docs/results/scripts/nccl-torch-allreduce.py --max-bytes 1073741824 \
        >"$logs/nccl-torch.json" 2>"$logs/nccl-torch.err"
      say "torch.distributed all_reduce ($ngpu processes, torchrun): exit $? in $((SECONDS - t0)) s"
      ;;
    ddp)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      db=${DDP_BUCKETS:-16} dm=${DDP_BUCKET_MIB:-64} ds=${DDP_STEPS:-7}
      # The examples' #[test] runs their main against the driver run.sh
      # names; ddp_overlap takes its sizes from the environment.
      GPU_SYNC_DRIVER=cuda timeout 120 $B/tests/gpu-sync-examples--all_reduce --exact runs_on_the_simulator \
        --nocapture >"$logs/all-reduce-example.log" 2>&1
      say "all_reduce example ($ngpu GPUs): exit $?; $(grep -m1 '^all-reduce over' "$logs/all-reduce-example.log")"
      GPU_SYNC_DRIVER=cuda DDP_BUCKETS=$db DDP_BUCKET_MIB=$dm DDP_STEPS=$ds timeout "${DDP_TIMEOUT:-300}" \
        $B/tests/gpu-sync-examples--ddp_overlap --exact runs_on_the_simulator --nocapture >"$logs/ddp-overlap.log" 2>&1
      say "ddp_overlap ($ngpu GPUs, one process, $db x $dm MiB, $ds steps): exit $? in $((SECONDS - t0)) s"
      grep -E '^(DDP|  )' "$logs/ddp-overlap.log" | tee -a "$summary"
      timeout "${DDP_TORCH_TIMEOUT:-400}" python3 -m torch.distributed.run --standalone --nproc-per-node "$ngpu" \
        docs/results/scripts/ddp-overlap-torch.py --buckets "$db" --bucket-mib "$dm" --steps "$ds" \
        >"$logs/ddp-overlap-torch.json" 2>"$logs/ddp-overlap-torch.err"
      say "PyTorch DDP-style overlap ($ngpu processes, torchrun): exit $? in $((SECONDS - t0)) s"
      torch_ddp_summary "$logs/ddp-overlap-torch.json"
      ;;
    ncclgraph)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      for m in non-blocking blocking; do
        flag=""; [ $m = blocking ] && flag=--blocking
        timeout 150 "$gb" nccl --collectives all-reduce --min-bytes 8 --max-bytes 32K --warmup-iters 10 --iters 50 \
          --graph 10 $flag --out "$logs/nccl-graph-$m" >"$logs/nccl-graph-$m.log" 2>&1
        say "gpu-bench nccl all-reduce 8 B-32 KiB --graph 10, $m: exit $? in $((SECONDS - t0)) s"
        grep -E '^\| [0-9]' "$logs/nccl-graph-$m/report.md" | awk -F'|' '{printf "  %s B %s us;", $2, $4}' | tee -a "$summary"
        echo | tee -a "$summary"
      done
      ;;
    ncclbig)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      ntstart
      for m in non-blocking blocking; do
        flag=""; [ $m = blocking ] && flag=--blocking
        timeout 150 "$gb" nccl --collectives all-reduce --min-bytes 16M --max-bytes 1G $flag \
          --out "$logs/nccl-big-$m" >"$logs/nccl-big-$m.log" 2>&1
        say "gpu-bench nccl all-reduce 16 MiB-1 GiB, $m: exit $? in $((SECONDS - t0)) s"
        grep -E '^\| [0-9]' "$logs/nccl-big-$m/report.md" | awk -F'|' '{printf "  %s B %s us %s GB/s;", $2, $4, $7}' | tee -a "$summary"
        echo | tee -a "$summary"
      done
      if ntwait; then
        ntrun all_reduce "$logs/nccl-tests-big.log" -b 16M -e 1G -f 2 -g "$ngpu"
        say "nccl-tests all_reduce_perf -b 16M -e 1G -g $ngpu: exit $?"
        grep -E '^ +[0-9]+ ' "$logs/nccl-tests-big.log" | awk '{printf "  %s B %s us %s GB/s;", $1, $6, $8}' | tee -a "$summary"
        echo | tee -a "$summary"
      fi
      ;;
    soak)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      GPU_SYNC_DRIVER=cuda SOAK_SECONDS=${SOAK_SECONDS:-60} timeout $((${SOAK_SECONDS:-60} + 60)) \
        $B/tests/sync-tests--nccl_soak --exact a_short_soak_loses_nothing --nocapture >"$logs/nccl-soak.log" 2>&1
      say "nccl_soak (${SOAK_SECONDS:-60} s): exit $? in $((SECONDS - t0)) s"
      grep -E 'nccl soak|RSS' "$logs/nccl-soak.log" | tail -4 | tee -a "$summary"
      ;;
    ddptorch)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      db=${DDP_BUCKETS:-16} dm=${DDP_BUCKET_MIB:-64} ds=${DDP_STEPS:-7}
      timeout "${DDP_TORCH_TIMEOUT:-200}" python3 -m torch.distributed.run --standalone --nproc-per-node "$ngpu" \
        docs/results/scripts/ddp-overlap-torch.py --buckets "$db" --bucket-mib "$dm" --steps "$ds" \
        >"$logs/ddp-overlap-torch.json" 2>"$logs/ddp-overlap-torch.err"
      say "PyTorch DDP-style overlap ($ngpu processes, torchrun): exit $? in $((SECONDS - t0)) s"
      torch_ddp_summary "$logs/ddp-overlap-torch.json"
      ;;
    ddpx)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      db=${DDP_BUCKETS:-16} dm=${DDP_BUCKET_MIB:-64} ds=${DDP_STEPS:-7}
      for v in "scale 0 0" "scale 1 0" "fma 1 ${DDP_FMA:-256}"; do
        set -- $v
        GPU_SYNC_DRIVER=cuda DDP_BUCKETS=$db DDP_BUCKET_MIB=$dm DDP_STEPS=$ds DDP_BLOCKING=$2 DDP_FMA=$3 \
          timeout "${DDP_TIMEOUT:-120}" $B/tests/gpu-sync-examples--ddp_overlap --exact runs_on_the_simulator \
          --nocapture >"$logs/ddp-$1-b$2.log" 2>&1
        say "ddp_overlap ($ngpu GPUs, $1, blocking $2, fma $3): exit $? in $((SECONDS - t0)) s"
        grep -E '^(DDP|  )' "$logs/ddp-$1-b$2.log" | tee -a "$summary"
      done
      ;;
    testsel)
      for b in ${TEST_BINS:-}; do
        t=$B/tests/$b
        [ -x "$t" ] || { say "test $b: not in the bundle"; continue; }
        GPU_SYNC_DRIVER=cuda RUST_BACKTRACE=1 timeout "${TEST_TIMEOUT:-120}" "$t" --include-ignored --test-threads=1 \
          >"$logs/test-$b.log" 2>&1
        say "test $b: exit $?; $(grep -E '^test result' "$logs/test-$b.log" | tail -1)"
      done
      ;;
    ncclsmall)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      ntstart
      for m in non-blocking blocking; do
        flag=""; [ $m = blocking ] && flag=--blocking
        timeout 150 "$gb" nccl --collectives all-reduce --min-bytes 8 --max-bytes 32K --warmup-iters 10 --iters 50 \
          $flag --out "$logs/nccl-small-$m" >"$logs/nccl-small-$m.log" 2>&1
        say "gpu-bench nccl all-reduce 8 B-32 KiB, $m: exit $? in $((SECONDS - t0)) s"
        grep -E '^\| [0-9]' "$logs/nccl-small-$m/report.md" | awk -F'|' '{printf "  %s B %s us;", $2, $4}' | tee -a "$summary"
        echo | tee -a "$summary"
        timeout 150 "$gb" nccl --host-cost --min-bytes 8 --max-bytes 32K --iters 50 $flag \
          --out "$logs/host-cost-$m" >"$logs/host-cost-$m.log" 2>&1
        say "gpu-bench nccl --host-cost, $m: exit $? in $((SECONDS - t0)) s"
        grep -E '^\| [0-9]' "$logs/host-cost-$m/host-cost.md" | tee -a "$summary"
      done
      if ntwait; then
        for b in 0 1; do
          for g in "" "-G 10"; do
            NCCL_COMM_BLOCKING=$b ntrun all_reduce "$logs/nccl-tests-small-b$b${g:+-graph}.log" \
              -b 8 -e 32K -f 2 -g "$ngpu" -w 10 -n 50 $g
            say "nccl-tests all_reduce_perf -b 8 -e 32K -g $ngpu ${g} NCCL_COMM_BLOCKING=$b: exit $?"
            grep -E '^ +[0-9]+ ' "$logs/nccl-tests-small-b$b${g:+-graph}.log" | awk '{printf "  %s B %s us;", $1, $6}' | tee -a "$summary"
            echo | tee -a "$summary"
          done
        done
      fi
      ;;
    anatomy)
      # The event anatomy (issue 26 item 5): gpu-bench's example, built on the
      # build machine (cargo build --release -p gpu-bench --features kernels
      # --example event_anatomy) and carried as target/anatomy/event_anatomy.
      if [ -x target/anatomy/event_anatomy ]; then
        # shellcheck disable=SC2086 # ANATOMY_ARGS: `sizes` runs (f) alone, `execs` (g)
        timeout "${ANATOMY_TIMEOUT:-240}" target/anatomy/event_anatomy ${ANATOMY_ARGS:-} >"$logs/anatomy.md" 2>"$logs/anatomy.err"
        say "event_anatomy ${ANATOMY_ARGS:-}: exit $? in $((SECONDS - t0)) s"
        grep -E "^- \((f|g)\)" "$logs/anatomy.md" | tee -a "$summary"
      else
        say "event_anatomy: target/anatomy/event_anatomy was not carried"
      fi
      ;;
    testf:*)
      # One test of one binary: testf:BINARY:FILTER (ignored GPU tests included).
      spec=${stage#testf:}; b=${spec%%:*}; f=${spec#*:}
      GPU_SYNC_DRIVER=cuda RUST_BACKTRACE=1 timeout "${TEST_TIMEOUT:-120}" $B/tests/$b "$f" --include-ignored \
        --test-threads=1 --nocapture >"$logs/test-$b-$f.log" 2>&1
      say "test $b $f: exit $?; $(grep -E '^test result' "$logs/test-$b-$f.log" | tail -1)"
      grep -E 'µs|clock' "$logs/test-$b-$f.log" | head -5 | tee -a "$summary"
      ;;
    sanf:*)
      # One test of one binary under compute-sanitizer: sanf:TOOL:BINARY:FILTER.
      spec=${stage#sanf:}; tool=${spec%%:*}; spec=${spec#*:}; b=${spec%%:*}; f=${spec#*:}
      cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      GPU_SYNC_DRIVER=cuda timeout "${TEST_TIMEOUT:-120}" "$cs" --tool "$tool" --report-api-errors no \
        --error-exitcode 99 --print-limit 20 $B/tests/$b "$f" --include-ignored --test-threads=1 --nocapture \
        >"$logs/san-$tool-$b-$f.log" 2>&1
      say "compute-sanitizer --tool $tool $b $f: exit $?; $(grep -E '^test result|SUMMARY' "$logs/san-$tool-$b-$f.log" | tr '\n' ' ')"
      ;;
    phases)
      # Issue 26: the range profiler's CUPTI calls, each timed, over one case's life.
      t=/usr/local/cuda/targets/x86_64-linux
      cl=$t/lib
      "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O2 -arch=sm_90 -o /tmp/phases \
        docs/results/scripts/profiler_phases.cu -I$t/include -L$cl -lcupti -lcuda >"$logs/phases-build.log" 2>&1 ||
        say "phases probe: build failed"
      LD_LIBRARY_PATH=$cl:${LD_LIBRARY_PATH:-} timeout 120 /tmp/phases "${PHASES_N:-256}" >"$logs/phases.txt" 2>&1
      say "phases probe: exit $?"
      tee -a "$summary" <"$logs/phases.txt"
      ;;
    cycle)
      # Issue 26: the empty spin and scale_f32 1 Ki launch by launch on the range profiler, then under ncu.
      gap_build
      for m in cycle cycleact; do
        gap_run "$m" 120 512 "$m"
      done
      ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout 200 "$ncu" --clock-control none --cache-control none \
        --metrics gpu__time_duration.sum --csv /tmp/gap kernels/fatbin 100 smallplain >"$logs/cycle-ncu.csv" 2>"$logs/cycle-ncu.err"
      say "ncu cycle probe: exit $?"
      ncu_summary "$logs/cycle-ncu.csv"
      ;;
    streams)
      # Issue 26: the small kernels on 13 streams of one process, with CUDA_DEVICE_MAX_CONNECTIONS unset, 1 and 32.
      gap_build
      for c in unset 1 32; do
        if [ $c = unset ]; then env=(); else env=(CUDA_DEVICE_MAX_CONNECTIONS=$c); fi
        env "${env[@]}" LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout 120 /tmp/gap kernels/fatbin 256 streams \
          >"$logs/streams-$c.txt" 2>&1
        say "streams probe (connections $c): exit $?"
        tee -a "$summary" <"$logs/streams-$c.txt"
      done
      ;;
    pace)
      # Issue 26: batch mode's pace against one kernel's duration, three clocks on the same batches.
      gap_build
      pr=${PACE_ROUNDS:-7}
      gap_run pace 200 "$pr" pace
      if [ "${PACE_NCU:-1}" != 0 ]; then
        ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
        LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout 300 "$ncu" --replay-mode range --clock-control none \
          --cache-control none --metrics gpu__time_duration.sum --csv /tmp/gap kernels/fatbin "$pr" pacencu \
          >"$logs/pace-ranges.csv" 2>"$logs/pace-ranges.err"
        say "ncu range replay: exit $?"
        LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout 200 "$ncu" --clock-control none --cache-control none \
          --metrics gpu__time_duration.sum --csv /tmp/gap kernels/fatbin 20 paceplain \
          >"$logs/pace-plain.csv" 2>"$logs/pace-plain.err"
        say "ncu kernel replay: exit $?"
        python3 - "$logs/pace-ranges.csv" "$logs/pace-plain.csv" "$pr" <<'PY' 2>&1 | tee -a "$summary"
import csv, statistics, sys
# The probe's order: per size, per kernel; ranges: rounds x (10, 50); plain: 20 launches.
names = [f"{k} {s}" for s in ("1 Mi", "32 Mi", "256 Mi")
         for k in ("scale_f32", "copy_u32x4", "triad_f32", "read_sum_u32x4")]
scale = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6}
def values(path):
    rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
    if not rows:
        return []
    head, body = rows[0], rows[1:]
    v, u = head.index("Metric Value"), head.index("Metric Unit")
    return [float(r[v].replace(",", "")) * scale.get(r[u], 1.0) for r in body]
rng, plain, rounds = values(sys.argv[1]), values(sys.argv[2]), int(sys.argv[3])
print(f"  ncu: {len(rng)} ranges (want {2 * rounds * len(names)}), {len(plain)} kernels (want {20 * len(names)})")
print("  %-22s %12s %12s %12s %12s" % ("kernel (ns)", "ncu alone", "range 50/k", "range pace", "pace - alone"))
for i, n in enumerate(names):
    r = rng[2 * rounds * i: 2 * rounds * (i + 1)]
    a = plain[20 * i: 20 * (i + 1)]
    if len(r) < 2 * rounds or len(a) < 20:
        print(f"  {n}: missing readings")
        continue
    pace = statistics.median((r[2 * j + 1] - r[2 * j]) / 40 for j in range(rounds))
    alone = statistics.median(a)
    k50 = statistics.median(r[2 * j + 1] for j in range(rounds)) / 50
    print("  %-22s %12.1f %12.1f %12.1f %+12.1f" % (n, alone, k50, pace, pace - alone))
PY
      fi
      ;;
    idle)
      gap_build
      for i in $(seq "${IDLE_PROCS:-3}"); do
        gap_run "idle-$i" 120 512 idle
      done
      ;;
    second)
      # Issue 26: the small kernels on a second stream (made after the first had work, as the timer's),
      # on the range profiler, then under ncu on the first stream and on the second.
      gap_build
      for m in cycle second; do
        gap_run "$m" 120 512 "$m"
      done
      ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      for m in smallplain secondplain; do
        LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout 200 "$ncu" --clock-control none --cache-control none \
          --metrics gpu__time_duration.sum --csv /tmp/gap kernels/fatbin 100 $m >"$logs/$m-ncu.csv" 2>"$logs/$m-ncu.err"
        say "ncu $m: exit $?"
        ncu_summary "$logs/$m-ncu.csv"
      done
      ;;
    kcncu)
      # Issue 26: Nsight Compute on the kernel_cycle example's plain launches (gpu-sync's launch path,
      # gpu-bench's process): does ncu read the spin there as our range profiler does, or as on raw launches?
      t=/usr/local/cuda/targets/x86_64-linux
      ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      GPU_SYNC_DRIVER=cuda LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout 200 "$ncu" --clock-control none \
        --cache-control none --metrics gpu__time_duration.sum --csv target/cyc/kernel_cycle plain \
        >"$logs/kcycle-ncu.csv" 2>"$logs/kcycle-ncu.err"
      say "ncu kernel_cycle plain: exit $?"
      ncu_summary "$logs/kcycle-ncu.csv"
      ;;
    kcycle)
      # Issue 26: gpu-bench's kernel_cycle example (built on the build machine: cargo build --release
      # -p gpu-bench --features kernels --example kernel_cycle; carried as target/cyc/kernel_cycle).
      GPU_SYNC_DRIVER=cuda timeout 200 target/cyc/kernel_cycle >"$logs/kcycle.txt" 2>&1
      say "kernel_cycle: exit $?"
      tee -a "$summary" <"$logs/kcycle.txt"
      ;;
    gaps)
      # Issue 26: batch mode against CUPTI's kernel records of back-to-back launches: the gap between
      # kernels (gpu-bench's batch_gaps example, carried as target/cyc/batch_gaps).
      GPU_SYNC_DRIVER=cuda timeout 300 target/cyc/batch_gaps >"$logs/gaps.txt" 2>&1
      say "batch_gaps: exit $?"
      tee -a "$summary" <"$logs/gaps.txt"
      ;;
    rooms)
      # Issue 26: does the room the range profiler is made for (maxRangesPerPass) change a small kernel's
      # reading? kernel_cycle with 512 and 1024; the raw probe's cycle with 256, 512 and 1024 launches
      # (its profiler is made for as many as it launches per pass).
      for r in 512 1024; do
        KC_MAX_KERNELS=$r GPU_SYNC_DRIVER=cuda timeout 200 target/cyc/kernel_cycle >"$logs/kcycle-$r.txt" 2>&1
        say "kernel_cycle, room $r: exit $?"
        head -10 "$logs/kcycle-$r.txt" | tee -a "$summary"
      done
      gap_build
      for n in 256 512 1024; do
        LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout 120 /tmp/gap kernels/fatbin $n cycle >"$logs/cycle-$n.txt" 2>&1
        say "cycle probe, $n launches per pass: exit $?"
        grep -v "SMs in order\|smid_probe raw" "$logs/cycle-$n.txt" | tee -a "$summary"
      done
      ls -l /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* $t/lib/libcupti.so* 2>&1 | tee -a "$summary"
      ;;
    place)
      # Issue 26: does where a 1 GiB buffer sits change a kernel's time (range profiler)?
      gap_build
      LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout 200 /tmp/gap kernels/fatbin "${PLACE_N:-20}" place \
        >"$logs/place.txt" 2>&1
      say "placement probe: exit $?"
      tee -a "$summary" <"$logs/place.txt"
      ;;
    gap)
      # Issue 26: does a kernel after an idle GPU run longer (as under ncu)?
      t=/usr/local/cuda/targets/x86_64-linux
      "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O2 -o /tmp/gap docs/results/scripts/idle_gap_probe.cu \
        -I$t/include -L$t/lib -lcupti -lcuda >"$logs/gap-build.log" 2>&1 || say "gap probe: build failed"
      gap_run gap 120 "${GAP_N:-50}"
      LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout 120 /tmp/gap kernels/fatbin "${GAP_N:-50}" prof \
        >"$logs/gap-prof.txt" 2>&1
      say "gap probe on the range profiler: exit $?"
      tee -a "$summary" <"$logs/gap-prof.txt"
      ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      LD_LIBRARY_PATH=$t/lib:${LD_LIBRARY_PATH:-} timeout 200 "$ncu" --clock-control none --cache-control none \
        --metrics gpu__time_duration.sum --csv /tmp/gap kernels/fatbin "${GAP_N:-50}" plain >"$logs/gap-ncu.csv" 2>"$logs/gap-ncu.err"
      say "ncu gap probe plain: exit $?; $(grep -c gpu__time_duration "$logs/gap-ncu.csv") rows"
      ncu_summary "$logs/gap-ncu.csv"
      ;;
    ncclmed)
      # Issue 30's busbw target wants the median of >= 5 runs in the same call:
      # $ROUNDS rounds, each ours (one process, blocking) over four collectives
      # 16 MiB-1 GiB and nccl-tests -g N on the same; ours one process per GPU
      # (--procs N) and torch.distributed (N processes) on all-reduce. Only the
      # first round checks outputs (--check-iters 0 after it).
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      ntstart
      for r in $(seq 1 "${ROUNDS:-5}"); do
        # Round 1 checks every output and names NCCL's algorithms (its tuning
        # log on); later rounds do neither.
        chk=""; [ "$r" -gt 1 ] && chk="--check-iters 0 --no-algorithms"
        [ $((SECONDS - t0)) -gt "${MED_BUDGET:-100000}" ] && { say "ncclmed: stopped before round $r (MED_BUDGET)"; break; }
        timeout 200 "$gb" nccl --collectives all-reduce,all-gather,reduce-scatter,send-recv --min-bytes 16M \
          --max-bytes 1G --blocking $chk --out "$logs/med-ours-$r" >"$logs/med-ours-$r.log" 2>&1
        say "round $r: ours (one process, blocking): exit $? at $((SECONDS - t0)) s"
        if ntwait; then
          for t in all_reduce all_gather reduce_scatter sendrecv; do
            ntrun $t "$logs/med-nt-$t-$r.log" -b 16M -e 1G -f 2 -g "$ngpu" || say "nccl-tests $t: exit $?"
          done
          say "round $r: nccl-tests: at $((SECONDS - t0)) s"
        fi
        timeout 200 "$gb" nccl --procs "$ngpu" --collectives all-reduce --min-bytes 16M --max-bytes 1G $chk \
          --out "$logs/med-procs-$r" >"$logs/med-procs-$r.log" 2>&1
        say "round $r: ours (--procs $ngpu): exit $? at $((SECONDS - t0)) s"
        timeout 200 python3 -m torch.distributed.run --standalone --nproc-per-node "$ngpu" \
          docs/results/scripts/nccl-torch-allreduce.py --min-bytes 16777216 --max-bytes 1073741824 \
          >"$logs/med-torch-$r.json" 2>"$logs/med-torch-$r.err"
        say "round $r: torch.distributed all_reduce: exit $? at $((SECONDS - t0)) s"
        pack
      done
      ;;
    smallmed)
      # Small messages, $ROUNDS interleaved rounds: ours (blocking) eager and
      # captured (--graph 10), nccl-tests eager and -G 10; then the host cost.
      # Odd rounds run ours first, even rounds nccl-tests first.
      # $SMALL_WARMUP / $SMALL_ITERS (10 / 50) are both sides' -w / -n;
      # SMALL_GRAPH=0 skips the captured runs; $HC_BATCHES / $HC_ITERS (11 /
      # 50) are the host cost's; $NGPU (every GPU nvidia-smi lists) the
      # ranks, for a CUDA_VISIBLE_DEVICES subset.
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=${NGPU:-$(nvidia-smi -L | wc -l)}
      sw=${SMALL_WARMUP:-10}; sn=${SMALL_ITERS:-50}
      ntstart
      # The timed rounds without NCCL's tuning log (it writes a line per call
      # on the host); one more run with it names the algorithms.
      small="--collectives all-reduce --min-bytes 8 --max-bytes 32K --warmup-iters $sw --iters $sn --blocking"
      pin=""; [ -n "${PIN:-}" ] && pin="taskset -c $PIN"
      timeout 100 "$gb" nccl $small --out "$logs/small-algo" >"$logs/small-algo.log" 2>&1 || say "small-algo: exit $?"
      ntwait || say "no nccl-tests: ours alone"
      clocks_start "$logs/clocks-small.csv"
      small_ours() {
        $pin timeout 100 "$gb" nccl $small --no-algorithms --out "$logs/small-ours-$1" >"$logs/small-ours-$1.log" 2>&1 \
          || say "round $1 ours: exit $?"
        [ "${SMALL_GRAPH:-1}" = 0 ] || $pin timeout 100 "$gb" nccl $small --no-algorithms --graph 10 \
          --out "$logs/small-graph-$1" >"$logs/small-graph-$1.log" 2>&1 || say "round $1 graph: exit $?"
      }
      small_nt() {
        [ -x "$nt/all_reduce_perf" ] || return 0
        NTPIN="$pin" ntrun all_reduce "$logs/small-nt-$1.log" -b 8 -e 32K -f 2 -g "$ngpu" -w "$sw" -n "$sn" \
          || say "round $1 nccl-tests: exit $?"
        # nccl-tests against itself (SMALL_NT_TWICE=1): how far two of its
        # own processes differ, the A/A control of the ratio.
        [ "${SMALL_NT_TWICE:-0}" = 0 ] || NTPIN="$pin" ntrun all_reduce "$logs/small-nt2-$1.log" -b 8 -e 32K -f 2 \
          -g "$ngpu" -w "$sw" -n "$sn" || say "round $1 nccl-tests again: exit $?"
        [ "${SMALL_GRAPH:-1}" = 0 ] || NTPIN="$pin" ntrun all_reduce "$logs/small-ntg-$1.log" -b 8 -e 32K -f 2 \
          -g "$ngpu" -w "$sw" -n "$sn" -G 10 || say "round $1 -G: exit $?"
      }
      # SMALL_OLD=PATH: that gpu-bench (an earlier build) eager too, each
      # round, into small-old-r (the A/B of a change to the sweep).
      small_old() {
        [ -n "${SMALL_OLD:-}" ] || return 0
        $pin timeout 100 "$SMALL_OLD" nccl $small --no-algorithms --out "$logs/small-old-$1" \
          >"$logs/small-old-$1.log" 2>&1 || say "round $1 the earlier build: exit $?"
      }
      for r in $(seq 1 "${ROUNDS:-5}"); do
        if [ $((r % 2)) = 1 ]; then small_ours "$r"; small_nt "$r"; small_old "$r"
        else small_old "$r"; small_nt "$r"; small_ours "$r"; fi
        say "small round $r: at $((SECONDS - t0)) s"
      done
      $pin timeout 300 "$gb" nccl --host-cost --min-bytes 8 --max-bytes 32K --iters "${HC_ITERS:-50}" \
        --batches "${HC_BATCHES:-11}" --blocking --no-algorithms \
        --out "$logs/host-cost" >"$logs/host-cost.log" 2>&1
      say "gpu-bench nccl --host-cost --blocking: exit $? at $((SECONDS - t0)) s"
      clocks_stop
      clocks_summary "$logs/clocks-small.csv"
      grep -E '^\| [0-9]|^Added' "$logs/host-cost/host-cost.md" | tee -a "$summary"
      ;;
    hcprocs)
      ngpu=${NGPU:-$(nvidia-smi -L | wc -l)}
      pin=""; [ -n "${PIN:-}" ] && pin="taskset -c $PIN"
      $pin timeout 300 "$gb" nccl --procs "$ngpu" --host-cost --blocking --min-bytes 8 --max-bytes 32K \
        --iters "${HC_ITERS:-50}" --batches "${HC_BATCHES:-21}" --no-algorithms \
        --out "$logs/host-cost-procs" >"$logs/host-cost-procs.log" 2>&1
      say "gpu-bench nccl --procs $ngpu --host-cost --blocking: exit $? at $((SECONDS - t0)) s"
      grep -E '^\| [0-9]|^Added' "$logs/host-cost-procs/host-cost.md" | tee -a "$summary"
      ;;
    procsblk)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      pb="--procs $ngpu --collectives all-reduce --min-bytes 8 --max-bytes 64M --no-algorithms --cupti"
      for r in $(seq 1 "${ROUNDS:-3}"); do
        chk=""; [ "$r" -gt 1 ] && chk="--check-iters 0"
        timeout 150 "$gb" nccl $pb $chk --out "$logs/pb-nb-$r" >"$logs/pb-nb-$r.log" 2>&1
        say "round $r: ours --procs $ngpu non-blocking: exit $? at $((SECONDS - t0)) s"
        NCCL_COMM_BLOCKING=1 NCCL_RUNTIME_CONNECT=0 timeout 150 "$gb" nccl $pb $chk --out "$logs/pb-b-$r" \
          >"$logs/pb-b-$r.log" 2>&1
        say "round $r: ours --procs $ngpu NCCL_COMM_BLOCKING=1 NCCL_RUNTIME_CONNECT=0: exit $? at $((SECONDS - t0)) s"
        timeout 200 python3 -m torch.distributed.run --standalone --nproc-per-node "$ngpu" \
          docs/results/scripts/nccl-torch-allreduce.py --min-bytes 8 --max-bytes 67108864 \
          >"$logs/pb-torch-$r.json" 2>"$logs/pb-torch-$r.err"
        say "round $r: torch.distributed all_reduce 8 B-64 MiB: exit $? at $((SECONDS - t0)) s"
        pack
      done
      for d in pb-nb-1 pb-b-1; do
        echo "$d:" | tee -a "$summary"
        grep -E '^\| [0-9]' "$logs/$d/report.md" 2>/dev/null | cut -c1-160 | tee -a "$summary"
      done
      ;;
    handoff)
      timeout 240 "$gb" p2p --out "$logs/handoff" >"$logs/handoff.log" 2>&1
      say "gpu-bench p2p: exit $? in $((SECONDS - t0)) s"
      grep -i -A16 'handoff' "$logs/handoff/report.md" 2>/dev/null | head -24 | tee -a "$summary"
      ;;
    aa)
      ngpu=$(nvidia-smi -L | wc -l)
      for d in $(seq 0 $((ngpu - 1))); do
        (
          for i in $(seq 0 $((${AA_REPORTS:-6} - 1))); do
            "$gb" --device "$d" timer --out "$logs/timer-d$d-$i" >/dev/null 2>"$logs/timer-d$d-$i.err" \
              || echo "timer d$d $i: exit $?" >>"$logs/aa-errors.txt"
          done
        ) &
      done
      wait
      say "aa: ${AA_REPORTS:-6} timer reports on each of $ngpu GPUs in $((SECONDS - t0)) s; $(cat "$logs/aa-errors.txt" 2>/dev/null | wc -l) failed"
      ;;
    overhead)
      taskset -c 2 timeout "${OVERHEAD_TIMEOUT:-200}" "$gb" overhead --repeat 7 --out "$logs/overhead" \
        >"$logs/overhead.log" 2>&1
      say "gpu-bench overhead --repeat 7 (taskset -c 2): exit $? in $((SECONDS - t0)) s"
      grep -iE 'ratio|median|launch|handoff' "$logs/overhead/report.md" 2>/dev/null | head -12 | tee -a "$summary"
      ;;
    procsmed)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      pin=""; [ -n "${PIN:-}" ] && pin="taskset -c $PIN"
      for r in $(seq 1 "${ROUNDS:-5}"); do
        chk=""; [ "$r" -gt 1 ] && chk="--check-iters 0"
        $pin timeout 200 "$gb" nccl --blocking --collectives all-reduce --min-bytes 8 --max-bytes 1G --no-algorithms \
          $chk --out "$logs/pm-ours-$r" --procs "$ngpu" >"$logs/pm-ours-$r.log" 2>&1
        say "round $r: ours --blocking --procs $ngpu: exit $? at $((SECONDS - t0)) s"
        $pin timeout 200 python3 -m torch.distributed.run --standalone --nproc-per-node "$ngpu" \
          docs/results/scripts/nccl-torch-allreduce.py --min-bytes 8 --max-bytes 1073741824 \
          >"$logs/pm-torch-$r.json" 2>"$logs/pm-torch-$r.err"
        say "round $r: torch.distributed all_reduce 8 B-1 GiB: exit $? at $((SECONDS - t0)) s"
        pack
      done
      ;;
    procsip)
      # One process per GPU, in place against out of place (issue 30's
      # 16 MiB row: torch.distributed.all_reduce runs in place), $ROUNDS (5)
      # interleaved rounds of all-reduce 8 MiB-$PI_MAX (256 MiB) beside torch.distributed.
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      pin=""; [ -n "${PIN:-}" ] && pin="taskset -c $PIN"
      for r in $(seq 1 "${ROUNDS:-5}"); do
        for form in ip oop; do
          ip=""; [ $form = ip ] && ip="--in-place"
          $pin timeout 150 "$gb" nccl --blocking --collectives all-reduce --min-bytes 8388608 --max-bytes "${PI_MAX:-268435456}" \
            --no-algorithms $ip --out "$logs/pi-$form-$r" --procs "$ngpu" >"$logs/pi-$form-$r.log" 2>&1
          say "round $r: ours --blocking --procs $ngpu ($form): exit $? at $((SECONDS - t0)) s"
        done
        $pin timeout 150 python3 -m torch.distributed.run --standalone --nproc-per-node "$ngpu" \
          docs/results/scripts/nccl-torch-allreduce.py --min-bytes 8388608 --max-bytes "${PI_MAX:-268435456}" \
          >"$logs/pi-torch-$r.json" 2>"$logs/pi-torch-$r.err"
        say "round $r: torch.distributed all_reduce 8-256 MiB: exit $? at $((SECONDS - t0)) s"
        pack
      done
      ;;
    handoffab)
      # The cross-device handoff, this bundle (new) against the one carried
      # as target/bundle-old/b.tar.xz (old), $ROUNDS (5) rounds in
      # alternating order, each `gpu-bench p2p --bytes 16M` pinned to one
      # core (taskset -c ${AB_CORE:-2}): the host ratio of each chain per run.
      # AB_BUILDS=new runs this bundle alone (no old bundle needed).
      builds=${AB_BUILDS:-old new}
      if [ "$builds" != new ]; then
        mkdir -p /tmp/old-bundle
        [ -x /tmp/old-bundle/gpu-bundle/bin/gpu-bench ] || tar xJf target/bundle-old/b.tar.xz -C /tmp/old-bundle
      fi
      for r in $(seq 1 "${ROUNDS:-5}"); do
        order=$builds; [ $((r % 2)) = 0 ] && order=$(echo "$builds" | tr ' ' '\n' | tac | tr '\n' ' ')
        for v in $order; do
          g=$gb; [ $v = old ] && g=/tmp/old-bundle/gpu-bundle/bin/gpu-bench
          taskset -c "${AB_CORE:-2}" timeout 120 "$g" --format json p2p --bytes 16777216 --out "$logs/hab-$v-$r" \
            >"$logs/hab-$v-$r.json" 2>"$logs/hab-$v-$r.err"
          say "round $r: p2p ($v): exit $? at $((SECONDS - t0)) s"
        done
        pack
      done
      python3 docs/results/scripts/handoff-ab.py "$logs" | tee -a "$summary"
      ;;
    truthcon)
      timeout "${TRUTH_TIMEOUT:-240}" "$gb" truth --kernel-records concurrent --out "$logs/truth-concurrent" \
        >"$logs/truth-concurrent.log" 2>&1
      say "gpu-bench truth --kernel-records concurrent: exit $? in $((SECONDS - t0)) s"
      ;;
    truthprof)
      timeout "${TRUTH_TIMEOUT:-240}" "$gb" truth --kernel-records profiler --out "$logs/truth-profiler" \
        >"$logs/truth-profiler.log" 2>&1
      say "gpu-bench truth --kernel-records profiler: exit $? in $((SECONDS - t0)) s"
      ;;
    truthser)
      timeout "${TRUTH_TIMEOUT:-240}" "$gb" truth --kernel-records serial --out "$logs/truth-serial" \
        >"$logs/truth-serial.log" 2>&1
      say "gpu-bench truth --kernel-records serial: exit $? in $((SECONDS - t0)) s"
      ;;
    ncclrec)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      for v in "plain:" "concurrent:--cupti" "serial:--cupti --kernel-records serial"; do
        name=${v%%:*} flags=${v#*:}
        timeout 100 "$gb" nccl --collectives all-reduce --min-bytes 8 --max-bytes 32K --warmup-iters 10 --iters 50 \
          --blocking --no-algorithms $flags --out "$logs/rec-small-$name" >"$logs/rec-small-$name.log" 2>&1
        say "nccl 8 B-32 KiB, $name: exit $? at $((SECONDS - t0)) s"
        timeout 150 "$gb" nccl --collectives all-reduce --min-bytes 16M --max-bytes 256M --blocking --no-algorithms \
          $flags --out "$logs/rec-large-$name" >"$logs/rec-large-$name.log" 2>&1
        say "nccl 16-256 MiB, $name: exit $? at $((SECONDS - t0)) s"
        grep -E '^\| [0-9]' "$logs/rec-large-$name/report.md" | head -12 | cut -c1-120 | tee -a "$summary"
      done
      pack
      ;;
    hang:*)
      spec=${stage#hang:}; b=${spec%%:*}; f=${spec#*:}
      GPU_SYNC_DRIVER=cuda NCCL_DEBUG=INFO RUST_BACKTRACE=1 $B/tests/$b "$f" --include-ignored --test-threads=1 \
        --nocapture >"$logs/hang-$b.log" 2>&1 &
      hp=$!
      sleep "${HANG_AFTER:-25}"
      if kill -0 "$hp" 2>/dev/null; then
        say "hang $b $f: still running after ${HANG_AFTER:-25} s; stacks in hang-$b-stacks.txt"
        { command -v gdb >/dev/null && gdb -p "$hp" -batch -ex "thread apply all bt 30" 2>&1; } >"$logs/hang-$b-stacks.txt" \
          || { command -v eu-stack >/dev/null && eu-stack -p "$hp" >"$logs/hang-$b-stacks.txt" 2>&1; } \
          || for t in /proc/$hp/task/*; do echo "$t $(cat "$t/comm") $(cat "$t/wchan") $(cat "$t/syscall" 2>/dev/null)"; done \
            >"$logs/hang-$b-stacks.txt"
        kill -9 "$hp"
      else
        wait "$hp"; say "hang $b $f: ended, exit $?"
      fi
      grep -E "NCCL WARN|init.cc|Init COMPLETE|comm 0x" "$logs/hang-$b.log" | tail -8 | cut -c1-160 | tee -a "$summary"
      ;;
    ncclcupti)
      # Each row's event time against the NCCL kernels' own span and busy
      # time on CUPTI's clock: small eager sizes (the ~4 us that 4 GPUs read
      # over nccl-tests), large ones, and one process per GPU (the 16 MiB
      # row that non-blocking groups slow).
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      timeout 120 "$gb" nccl --collectives all-reduce --min-bytes 8 --max-bytes 32K --warmup-iters 10 --iters 50 \
        --blocking --no-algorithms --cupti --out "$logs/cupti-small" >"$logs/cupti-small.log" 2>&1
      say "gpu-bench nccl --cupti (8 B-32 KiB, blocking): exit $? at $((SECONDS - t0)) s"
      timeout 150 "$gb" nccl --collectives all-reduce --min-bytes 16M --max-bytes 256M --blocking --no-algorithms \
        --cupti --out "$logs/cupti-large" >"$logs/cupti-large.log" 2>&1
      say "gpu-bench nccl --cupti (16-256 MiB, blocking): exit $? at $((SECONDS - t0)) s"
      timeout 150 "$gb" nccl --procs "$ngpu" --collectives all-reduce --min-bytes 8 --max-bytes 64M --no-algorithms \
        --cupti --out "$logs/cupti-procs" >"$logs/cupti-procs.log" 2>&1
      say "gpu-bench nccl --procs $ngpu --cupti (8 B-64 MiB): exit $? at $((SECONDS - t0)) s"
      for d in cupti-small cupti-large cupti-procs; do
        grep -A30 -i 'cupti' "$logs/$d/report.md" 2>/dev/null | head -40 | tee -a "$summary"
      done
      pack
      ;;
    ddpcmp)
      # The DDP-style step, ours and PyTorch's on the same buckets
      # ($DDP_BUCKETS x $DDP_BUCKET_MIB MiB, default 32 x 32): ours
      # compute-bound (fma $DDP_FMA) on blocking communicators, one process,
      # for each "priority:reserved SMs" of $DDP_VARIANTS; PyTorch's bf16
      # matmul, works waited at the end, one process per GPU, its NCCL
      # streams at default and at high priority.
      # $DDP_C_OVER_M aims both calibrations at C ≈ R·M (ours: the FMAs per
      # float of one pass; PyTorch's: the matrix size); $DDP_GPUS (say 0,1)
      # runs both on those GPUs of the host only (CUDA_VISIBLE_DEVICES).
      # The SM clock, power and throttle reasons of every GPU are logged
      # every 100 ms beside each run (ddp-clocks-*.csv).
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      tag=""
      if [ -n "${DDP_GPUS:-}" ]; then
        export CUDA_VISIBLE_DEVICES=$DDP_GPUS
        ngpu=$(echo "$DDP_GPUS" | tr ',' '\n' | wc -l)
        tag="-g${DDP_GPUS//,/}"
      fi
      com=""; [ -n "${DDP_C_OVER_M:-}" ] && com="--c-over-m $DDP_C_OVER_M" && tag="$tag-r$DDP_C_OVER_M"
      # DDP_HOLD_SHARED=0 runs reserved SMs the earlier way (ours reads it).
      [ -n "${DDP_HOLD_SHARED:-}" ] && tag="$tag-h$DDP_HOLD_SHARED"
      db=${DDP_BUCKETS:-32} dm=${DDP_BUCKET_MIB:-32} ds=${DDP_STEPS:-7}
      say "ddpcmp: $ngpu GPUs ${DDP_GPUS:+($DDP_GPUS) }${com:-(C ~ M)}, $db x $dm MiB, $ds steps"
      # A variant "priority:reserved SMs[:CTAs]" with CTAs runs NCCL with
      # NCCL_MAX_CTAS=CTAs (its blocks capped, so they fit the SMs left).
      for v in ${DDP_VARIANTS:-default:0 high:0 default:24 default:40}; do
        prio=${v%%:*} rest=${v#*:} res=${v#*:} ctas=""
        case $rest in *:*) res=${rest%%:*} ctas=${rest#*:} ;; esac
        # NCCL's init log (its channels) beside each run; INIT writes nothing per call.
        v="$prio-$res-${ctas:-all}$tag"
        clocks_start "$logs/ddp-clocks-ours-$v.csv"
        env GPU_SYNC_DRIVER=cuda ${ctas:+NCCL_MAX_CTAS=$ctas} NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
          NCCL_DEBUG_FILE="$logs/ddp-nccl-$v.%p.log" timeout "${DDP_TIMEOUT:-120}" $B/bin/ddp_overlap \
          --buckets "$db" --bucket-mib "$dm" $com \
          --steps "$ds" --fma "${DDP_FMA:-256}" --blocking 1 --comm-priority "$prio" --reserve-sms "$res" \
          >"$logs/ddp-ours-$v.log" 2>&1
        st=$?
        clocks_stop
        say "ddp_overlap ($ngpu GPUs, fma, blocking, $prio priority, $res SMs reserved, NCCL_MAX_CTAS=${ctas:-unset}${com:+, $com}): exit $st at $((SECONDS - t0)) s"
        grep -E '^(DDP|  )' "$logs/ddp-ours-$v.log" | tee -a "$summary"
        clocks_summary "$logs/ddp-clocks-ours-$v.csv"
      done
      for prio in ${DDP_TORCH_PRIOS:-default high}; do
        hp=""; [ $prio = high ] && hp=--high-priority-stream
        clocks_start "$logs/ddp-clocks-torch-$prio$tag.csv"
        timeout "${DDP_TORCH_TIMEOUT:-200}" python3 -m torch.distributed.run --standalone --nproc-per-node "$ngpu" \
          docs/results/scripts/ddp-overlap-torch.py --buckets "$db" --bucket-mib "$dm" --steps "$ds" $com \
          --compute matmul --wait end $hp >"$logs/ddp-torch-$prio$tag.json" 2>"$logs/ddp-torch-$prio$tag.err"
        st=$?
        clocks_stop
        say "PyTorch DDP-style overlap ($ngpu processes, $prio priority${com:+, $com}): exit $st at $((SECONDS - t0)) s"
        torch_ddp_summary "$logs/ddp-torch-$prio$tag.json"
        clocks_summary "$logs/ddp-clocks-torch-$prio$tag.csv"
        pack
      done
      unset CUDA_VISIBLE_DEVICES
      ;;
    procs)
      # One process per GPU, the three ways in: ddp_overlap --spawn N,
      # ddp_overlap under torchrun --no-python (NCCL's own rendezvous),
      # gpu-bench nccl --procs N (every collective, 8 B-1 MiB, checked);
      # and the all_reduce example, one process.
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      ngpu=$(nvidia-smi -L | wc -l)
      small="--buckets 8 --bucket-mib 16 --steps 3"
      GPU_SYNC_DRIVER=cuda timeout 120 $B/bin/ddp_overlap --spawn "$ngpu" $small >"$logs/procs-spawn.log" 2>&1
      say "ddp_overlap --spawn $ngpu: exit $? at $((SECONDS - t0)) s"
      grep -E '^(DDP|  )' "$logs/procs-spawn.log" | tee -a "$summary"
      GPU_SYNC_DRIVER=cuda NCCL_COMM_ID=127.0.0.1:29511 timeout 120 python3 -m torch.distributed.run \
        --nproc-per-node "$ngpu" --master-port 29510 --no-python $B/bin/ddp_overlap $small \
        >"$logs/procs-torchrun.log" 2>&1
      say "torchrun --no-python ddp_overlap ($ngpu): exit $? at $((SECONDS - t0)) s"
      grep -E '^(DDP|  )' "$logs/procs-torchrun.log" | tee -a "$summary"
      timeout 150 "$gb" nccl --procs "$ngpu" --max-bytes 1M --out "$logs/procs-nccl" >"$logs/procs-nccl.log" 2>&1
      say "gpu-bench nccl --procs $ngpu (8 B-1 MiB): exit $? at $((SECONDS - t0)) s"
      grep -A8 '^## Summary' "$logs/procs-nccl/report.md" | tee -a "$summary"
      GPU_SYNC_DRIVER=cuda timeout 60 $B/bin/all_reduce >"$logs/all-reduce.log" 2>&1
      say "all_reduce example: exit $?; $(grep -m1 '^all-reduce over' "$logs/all-reduce.log")"
      ;;
    *) say "unknown stage $stage" ;;
  esac
  pack
done
rm -rf "$logs"
