#!/usr/bin/env bash
# Third call of the session's final verification (the second call's
# bandwidth step ran past its 90 s limit): gpu-bench bandwidth and the
# PyTorch transfer peer in the same call, pinned to the same cores, then two
# more gated overhead runs (the launch and handoff ratios scatter between
# machine starts). Bundle in target/gpu-bundle; results in $OUT/results-c.tgz.
here=target/gpu-bundle
O=/tmp/o; mkdir -p "$O/bw"
exec > >(tee -a "$OUT/log") 2>&1
export GPU_SYNC_DRIVER=cuda
start=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
taskset -c 2-5 timeout 300 "$here/bin/gpu-bench" bandwidth --out "$O/bw/ours" > "$O/bw/ours.log" 2>&1
echo "bandwidth rc=$? (t=$((SECONDS-start)) s)"
taskset -c 2-5 timeout 120 python3 gpu-bench-cli/peer/torch_peer.py --clock-mhz 1980 --out "$O/bw/torch" > "$O/bw/torch.log" 2>&1
echo "torch_peer rc=$? (t=$((SECONDS-start)) s)"
grep -iE "pageable|pinned" "$O/bw/ours/report.md" | head -40 | cut -c1-200
tail -18 "$O/bw/torch/peer.md"
for i in 2 3; do
  taskset -c 2 timeout 120 "$here/bin/gpu-bench" overhead --repeat 7 --out "$O/overhead-gated-$i" > "$O/overhead-$i.log" 2>&1
  echo "overhead run $i rc=$? (t=$((SECONDS-start)) s)"
  grep -E "(launch|handoff) / raw (launch|handoff)\{repetition=all\} \| (median ratio|min ratio|max ratio)" "$O/overhead-gated-$i/report.md"
done
tar czf "$OUT/results-c.tgz" -C /tmp o
echo "=== done (t=$((SECONDS-start)) s)"
