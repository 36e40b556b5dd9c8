#!/usr/bin/env bash
# Device call 1 of the roofline work (issue 17), from the repository root on
# the GPU machine, with the bundle in target/roofline-bundle/: PyTorch peers,
# `gpu-bench roofline --tune` (tuning search + every phase), and the SASS of
# the committed fatbins disassembled by the machine's cuobjdump (13.0).
set -u
B=target/roofline-bundle
W=/tmp/rlw
mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,clocks.max.mem,memory.total,power.limit --format=csv
  head -1 /proc/driver/nvidia/version
  nvcc --version | tail -2
  cuobjdump --version | tail -1
} > "$W/env.txt" 2>&1
cat "$W/env.txt"
echo "=== peers"
PYTHONUNBUFFERED=1 timeout 100 python3 "$B/peers.py" "$W/peers.json" 2>&1 | tee "$W/peers.log"
echo "=== gpu-bench roofline --tune"
( time timeout 170 "$B/gpu-bench" roofline --tune --keep-going --peers "$W/peers.json" --out "$W/tune" ) > "$W/tune.log" 2>&1
echo "rc=$?"
grep -E "^roofline:|^real|rc=" "$W/tune.log"
echo "=== SASS (sm_90, machine's cuobjdump)"
for f in "$B"/fatbin/*.fatbin; do
  n=$(basename "$f" .fatbin)
  cuobjdump -sass -arch sm_90 "$f" > "$W/sass-$n.txt" 2>&1
  printf '%s: LDG.E.128 %s, FFMA %s, DFMA %s, HFMA2 %s, HGMMA %s\n' "$n" \
    "$(grep -c 'LDG.E.128' "$W/sass-$n.txt")" "$(grep -c ' FFMA ' "$W/sass-$n.txt")" \
    "$(grep -c ' DFMA ' "$W/sass-$n.txt")" "$(grep -c 'HFMA2' "$W/sass-$n.txt")" "$(grep -c 'HGMMA' "$W/sass-$n.txt")"
done | tee "$W/sass-summary.txt"
echo "=== wgmma experiment (tc/tensor.cu, built here with nvcc for sm_90a)"
for v in "" "-DTC_SWAP"; do
  nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a $v -I "$B/tc" -o "$W/tc_host$v" "$B/tc/tc_host.cu" > "$W/tc-build$v.txt" 2>&1 || cat "$W/tc-build$v.txt"
  echo "--- layout ${v:-(LBO 128, SBO 256)}"
  timeout 60 "$W/tc_host$v" 2>&1 | tee "$W/tc$v.txt"
done
cuobjdump -sass "$W/tc_host" | grep -cE "HGMMA|QGMMA"
tar czf "$OUT/roofline-call1.tgz" -C "$W" .
cp "$W/tune/report.md" "$OUT/report.md" 2>/dev/null
sed -n '/## Ceilings/,/## Peers/p' "$W/tune/report.md" 2>/dev/null
