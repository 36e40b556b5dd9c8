#!/usr/bin/env bash
# After the review: the shared-memory limit comes from the driver (the
# kernel's static shared memory counted) and the bulk wrappers raise it once.
# 1. The new GPU test against the old wrappers (threshold 48 KiB, raised on
#    every launch: expected to fail at 6 x 8 KiB) and the new ones.
# 2. gpu_api (the limit's getter, on the GPU), the sanitizers over the new
#    test. First run (review-1): BINS and SAN unset. Second (review-2): the
#    GPU test moved to gpu-bench's gpu.rs, BINS="gpu-bench-gpu-new probes-new
#    gpu_api-new" SAN=gpu-bench-gpu-new MAIN=0 (the main job ran in the first).
# 3. The PyTorch peers and the main job.
# Binaries built here (cargo test --release --no-run; cargo build --release
# -p gpu-bench-cli), carried in target/dev. Results in /tmp/r, back as
# $OUT/review.tgz.
O=/tmp/r; mkdir -p $O; export GPU_SYNC_DRIVER=cuda
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $O/gpu.txt
for b in ${BINS:-probes-old probes-new gpu_api-new}; do
  timeout 120 target/dev/$b --include-ignored --test-threads=1 > $O/$b.log 2>&1
  echo "$b: exit $?"; grep -E "^test |test result|panicked at|CUDA_ERROR" $O/$b.log | head -8
done
SAN=${SAN:-probes-new}
for tool in memcheck racecheck synccheck; do
  GPU_SANITIZER=1 timeout 120 "$cs" --tool $tool --report-api-errors no --error-exitcode 99 target/dev/$SAN --include-ignored --test-threads=1 > $O/san-$tool-$SAN.log 2>&1
  echo "$tool $SAN: exit $?"; grep -E "SUMMARY|test result" $O/san-$tool-$SAN.log
done
if [ "${MAIN:-1}" = 1 ]; then
PEERS_MIB=4096 PYTHONUNBUFFERED=1 timeout 90 python3 docs/results/roofline/peers.py "$O/roofline-peers.json" > "$O/roofline-peers.log" 2>&1; echo "peers rc=$?"
timeout 150 target/dev/gpu-bench roofline --array-mib 4096 --peers "$O/roofline-peers.json" --out "$O/roofline" > "$O/roofline.log" 2>&1; echo "roofline rc=$?"
grep -E "^\| (HBM|driver D2D|L2|BF16 tensor|phases)" "$O/roofline/report.md" | cut -c1-170
fi
tar czf $OUT/review.tgz -C /tmp r
