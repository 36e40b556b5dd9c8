#!/usr/bin/env bash
# Helper `roof2`'s GPU check (issue 17: the mma.sync fallback of the tensor
# ceilings, and the FP64 intensity sweep's kernel). Run from the repository
# root on the GPU machine, with a bundle built by `cargo xtask gpu-bundle` in
# target/gpu-bundle (bin/gpu-bench, tests/kernels--gpu):
#
#   bash docs/results/roofline/run-roof2.sh OUTDIR [BUNDLE]
#
# 1. the kernels' GPU test (`--include-ignored`): every kernel against its
#    CPU reference, and `roofline_sweeps_and_mma_probes_match_the_references`:
#    intensity_f64 and intensity_f32 bit-equal, mma_bf16_probe /
#    mma_f16_probe / mma_e4m3_probe within 1e-3 / 1e-3 / 5e-3 of the f64
#    reference product at three launch shapes, nothing stored without the
#    flag;
# 2. `gpu-bench roofline --only-tensor --tensor-path mma`: the tensor phase
#    alone through the forced mma.sync path (each probe checked against its
#    CPU reference first), then the same phase on the default path (wgmma on
#    an H100) as the baseline on the same card, same call.
# Everything goes into OUTDIR (env.txt, *.log, mma/ and wgmma/ with
# report.md and results.json). About 15 s; each step has its own timeout
# (60 + 30 + 30 s at most, ≤ 90 s in all only if every one runs long).
set -u
O=${1:?usage: run-roof2.sh OUTDIR [BUNDLE]}
B=${2:-target/gpu-bundle}
mkdir -p "$O"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,memory.total,power.limit --format=csv
  head -1 /proc/driver/nvidia/version
} > "$O/env.txt" 2>&1
cat "$O/env.txt"

echo "=== kernels gpu test (the new probes' CPU-reference checks included)"
SECONDS=0
timeout 40 "$B/tests/kernels--gpu" --include-ignored --test-threads 1 --nocapture > "$O/kernels-gpu-test.log" 2>&1
echo "rc=$? ${SECONDS}s"
grep -E "^test |test result|FAILED|panicked|max \|error\||skipped" "$O/kernels-gpu-test.log"

echo "=== gpu-bench roofline --only-tensor --tensor-path mma (forced mma.sync)"
SECONDS=0
( time timeout 25 "$B/bin/gpu-bench" --out "$O/mma" roofline --only-tensor --tensor-path mma ) \
  > "$O/mma.log" 2>&1
echo "rc=$? ${SECONDS}s"
grep -E "^roofline:|^real" "$O/mma.log"
grep -E "^\| (tensor path|[A-Z0-9]+ tensor) \|" "$O/mma/report.md" 2>/dev/null | cut -c1-330

echo "=== gpu-bench roofline --only-tensor (default path: wgmma on sm_90), the baseline"
SECONDS=0
( time timeout 20 "$B/bin/gpu-bench" --out "$O/wgmma" roofline --only-tensor ) > "$O/wgmma.log" 2>&1
echo "rc=$? ${SECONDS}s"
grep -E "^roofline:|^real" "$O/wgmma.log"
grep -E "^\| (tensor path|[A-Z0-9]+ tensor) \|" "$O/wgmma/report.md" 2>/dev/null | cut -c1-330
ls -la "$O"
