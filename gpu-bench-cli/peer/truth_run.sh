#!/usr/bin/env bash
# On the GPU machine, from the repository root: `gpu-bench truth` (every mode,
# kernel mode from CUPTI), Nsight Compute's own duration of the same launches
# (gpu__time_duration.sum, 200 launches per case; once with no cache control,
# once with its cache flush for cold), and the PyTorch/Triton peers on the
# same fatbin kernels, all in one device call. Files go to $OUT (or
# /tmp/truth-out): truth/{report.md,results.json.gz}, ncu_hot.csv,
# ncu_cold.csv, peers.json, log. Join them with peer/truth_table.py.
#   BUNDLE=target/truth-bundle bash gpu-bench-cli/peer/truth_run.sh
set -uo pipefail
B=${BUNDLE:-target/truth-bundle}
O=${OUT:-/tmp/truth-out}
LAUNCHES=${LAUNCHES:-200}
mkdir -p "$O/truth"
exec > >(tee -a "$O/log") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
if [ -z "${CUDA_SYS_LIBCUPTI:-}" ]; then
  for c in /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 /usr/local/cuda/lib64/libcupti.so.13 \
           $(find / -xdev -name 'libcupti.so.13' 2>/dev/null | head -3); do
    if [ -e "$c" ]; then export CUDA_SYS_LIBCUPTI=$c; break; fi
  done
fi
echo "CUDA_SYS_LIBCUPTI=${CUDA_SYS_LIBCUPTI:-<none found>}"
KERNELS='regex:^(spin_cycles|scale_f32|copy_u32x4|triad_f32|read_sum_u32x4)$'
MEM='regex:^(scale_f32|copy_u32x4|triad_f32|read_sum_u32x4)$'
echo "== gpu-bench truth"
SECONDS=0
"$B/gpu-bench" --format md --out "$O/truth" truth | tail -n 80
echo "gpu-bench truth: exit ${PIPESTATUS[0]}, ${SECONDS}s"
# Every sample is in the JSON: compressed, it comes back under the size limit.
gzip -f "$O/truth/results.json" && rm -f "$O/truth/results.csv"
echo "== ncu, no cache control ($LAUNCHES launches per case)"
SECONDS=0
ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-units base --csv \
    -k "$KERNELS" --log-file "$O/ncu_hot.csv" "$B/gpu-bench" truth --launch-only "$LAUNCHES" > /dev/null
echo "ncu hot: exit $?, ${SECONDS}s"
echo "== ncu, cache flushed before each launch (cold)"
SECONDS=0
ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum --print-units base --csv \
    -k "$MEM" --log-file "$O/ncu_cold.csv" "$B/gpu-bench" truth --launch-only "$LAUNCHES" > /dev/null
echo "ncu cold: exit $?, ${SECONDS}s"
echo "== peers"
SECONDS=0
MHZ=$(python3 -c "import gzip,json;r=json.load(gzip.open('$O/truth/results.json.gz'));c=r.get('clock') or {};print(c.get('steady_mhz') or r['device']['sm_clock_mhz'])")
PYTHONUNBUFFERED=1 python3 gpu-bench-cli/peer/truth_peer.py --fatbins kernels/fatbin --clock-mhz "$MHZ" --out "$O"
echo "peers: exit $?, ${SECONDS}s"
