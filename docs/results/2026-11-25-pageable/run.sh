#!/bin/bash
# One device call: where the time of a pageable copy goes.
# Run from the repository root with the bundle in $B (default target/h2d-gpu):
# pageable_probe (gpu-sync/examples/pageable_probe.rs, release, stripped) and
# pageable_peer.py (gpu-bench-cli/peer/). Writes $OUT/pageable.tgz.
B=${B:-target/h2d-gpu}
R=$OUT/r; mkdir -p $R
CPUS=${CPUS:-2-5}
{ date -u; nvidia-smi; nvidia-smi topo -m; lscpu; numactl -H; nproc;
  cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag;
  grep -i -E "huge|MemTotal|MemFree" /proc/meminfo; uname -a; which nsys ncu;
  ls /usr/local/cuda/bin 2>/dev/null | head -50; } > $R/env.txt 2>&1
echo "== rust 1 (taskset -c $CPUS)"; taskset -c $CPUS $B/pageable_probe 1024 > $R/rust1.tsv 2> $R/rust1.err
echo "== torch (taskset -c $CPUS)"; taskset -c $CPUS python3 $B/pageable_peer.py 1024 > $R/torch.tsv 2> $R/torch.err
echo "== rust 2"; taskset -c $CPUS $B/pageable_probe 1024 > $R/rust2.tsv 2> $R/rust2.err
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
  echo "== nsys $NSYS"
  timeout 120 $NSYS profile --trace=cuda --sample=none --cpuctxsw=none -o $R/probe64 --force-overwrite true \
    taskset -c $CPUS $B/pageable_probe 64 > $R/nsys-probe.tsv 2>&1
  timeout 60 $NSYS stats --report cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,cuda_api_sum --format csv \
    -o $R/probe64 $R/probe64.nsys-rep > $R/nsys-stats.txt 2>&1
  timeout 60 $NSYS stats --report cuda_gpu_trace --format csv -o $R/probe64 $R/probe64.nsys-rep >> $R/nsys-stats.txt 2>&1
  rm -f $R/probe64.sqlite
fi
tail -n +1 $R/*.tsv | head -150
tar czf $OUT/pageable.tgz -C $OUT r
