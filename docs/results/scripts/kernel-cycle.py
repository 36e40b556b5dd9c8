#!/usr/bin/env python3
"""Kernel mode's readings of small kernels, launch by launch (issue 26): the
two levels they sit on, the share on the upper one, and how often a reading
is on the same level as the one 4 and 8 launches before (an 8-launch cycle
of 4 low and 4 high reads about 0 and 1).

    python3 docs/results/scripts/kernel-cycle.py LOGS/truth/results.json [CASES]

CASES (default 13): the first cases of truth's fixed order (the empty spin,
then the memory kernels from 1 Ki up). A reading is "upper" when it lies
more than 64 ns above the case's minimum (two 32 ns ticks; the levels are
about 100 ns apart).

Reads files only: it loads no CUDA and no NCCL. The multicast switches are
set all the same, as in every script here:
NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
"""

import os

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
import json
import statistics
import sys


def main():
    report = json.load(open(sys.argv[1]))
    n_cases = int(sys.argv[2]) if len(sys.argv) > 2 else 13
    print("| case | readings | lower level ns | upper level ns | share upper | same as 4 before | same as 8 before | median ns |")
    print("|---|---|---|---|---|---|---|---|")
    for rec in [r for r in report["records"] if r["modes"]][:n_cases]:
        kernel = [m for m in rec["modes"] if m["mode"] == "kernel"]
        if not kernel:
            continue
        ns = [round(x * 1e9) for x in kernel[0]["samples"]]
        floor = min(ns)
        up = [x > floor + 64 for x in ns]
        lo = [x for x, u in zip(ns, up) if not u]
        hi = [x for x, u in zip(ns, up) if u]
        same = lambda k: sum(up[i] == up[i + k] for i in range(len(up) - k)) / max(1, len(up) - k)
        p = ";".join(f"{k}={v}" for k, v in rec["params"].items())
        print(
            f"| {rec['name']}{{{p}}} | {len(ns)} | {statistics.median(lo):.0f} | "
            f"{statistics.median(hi) if hi else float('nan'):.0f} | {len(hi) / len(ns):.2f} | {same(4):.2f} | "
            f"{same(8):.2f} | {statistics.median(ns):.0f} |"
        )


if __name__ == "__main__":
    main()
