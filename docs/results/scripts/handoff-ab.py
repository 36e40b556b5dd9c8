#!/usr/bin/env python3
"""The cross-device handoff of two builds, A/B (device-call.sh's `handoffab`).

    handoff-ab.py LOGS

Reads LOGS/hab-{old,new}-R/results.json (`gpu-bench p2p` reports, one per
build and round) and prints, per ordered pair and build: each round's host
ratio (ours / raw, per hop), the median of the rounds, how many rounds are
within 1.10, the median host µs per hop of ours and of raw, and the median
GPU difference (ours − raw, µs per hop). The raw chain is the same code in
both builds, so it also shows how steady the host was between them.
"""
import glob
import json
import os
import statistics
import sys


def val(fig):
    return fig.get("value") if isinstance(fig, dict) else None


def main():
    logs = sys.argv[1]
    runs = {}
    for path in sorted(glob.glob(os.path.join(logs, "hab-*-*/results.json"))):
        name = os.path.basename(os.path.dirname(path))
        _, build, rnd = name.split("-")
        with open(path) as f:
            rep = json.load(f)
        for p in rep["pairs"]:
            h, rh = val(p["handoff_host_us"]), val(p["handoff_raw_host_us"])
            g, rg = val(p["handoff_gpu_us"]), val(p["handoff_raw_gpu_us"])
            if None in (h, rh, g, rg):
                continue
            runs.setdefault((p["src"], p["dst"], build), []).append((int(rnd), h, rh, g - rg))
    if not runs:
        print("handoff-ab: no report with handoff figures under", logs)
        return 1
    print("| chain | build | host ratio per round | median | within 1.10 | ours µs/hop | raw µs/hop | GPU ours − raw µs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (s, d, b) in sorted(runs):
        rows = sorted(runs[(s, d, b)])
        ratios = [h / rh for _, h, rh, _ in rows]
        print(
            f"| {s} → {d} | {b} | {', '.join(f'{x:.3f}' for x in ratios)} | {statistics.median(ratios):.3f} | "
            f"{sum(x <= 1.10 for x in ratios)} of {len(ratios)} | "
            f"{statistics.median(h for _, h, _, _ in rows):.2f} | {statistics.median(rh for _, _, rh, _ in rows):.2f} | "
            f"{statistics.median(dg for *_, dg in rows):+.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
