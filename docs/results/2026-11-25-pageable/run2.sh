#!/bin/bash
# Second device call: gpu-sync's staged pageable copies against PyTorch in
# the same call. Run from the repository root with the bundle in $B
# (default target/h2d-gpu): gpu-bench (release, stripped), pageable_probe
# (gpu-sync/examples/pageable_probe.rs), torch_peer.py and pageable_peer.py
# (gpu-bench-cli/peer/). Writes $OUT/pageable2.tgz.
B=${B:-target/h2d-gpu}
R=$OUT/r2; mkdir -p $R
CPUS=${CPUS:-2-5}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/env.txt 2>&1
echo "== gpu-bench bandwidth"; taskset -c $CPUS $B/gpu-bench bandwidth --out $R/bw > $R/bw.log 2>&1
echo "== torch_peer.py"; taskset -c $CPUS python3 $B/torch_peer.py --clock-mhz 1980 --out $R/peer > $R/peer.log 2>&1
echo "== probe"; PROBE_ROWS=final taskset -c $CPUS $B/pageable_probe 1024 > $R/probe.tsv 2> $R/probe.err
echo "== pageable_peer.py"; taskset -c $CPUS python3 $B/pageable_peer.py 1024 > $R/torch.tsv 2> $R/torch.err
grep -E "pageable" $R/bw/report.md | head -30; cat $R/peer/peer.md | tail -18
cat $R/probe.tsv; cat $R/torch.tsv
tar czf $OUT/pageable2.tgz -C $OUT r2
