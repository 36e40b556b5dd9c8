#!/usr/bin/env python3
"""`gpu-bench truth` held against Nsight Compute (issue 26), from one device
call's logs: `truth*/results.json` (one or more truth runs, e.g. concurrent
and serialized kernel records) and `ncu-launch-only.csv` (`ncu
--clock-control none --cache-control none --metrics gpu__time_duration.sum
--csv gpu-bench truth --launch-only N`: the same cases, in the same order,
N launches each).

    python3 docs/results/scripts/truth-vs-ncu.py LOGS truth truth-serial > truth-vs-ncu.md

Per case: ncu's median duration, each run's kernel mode (median) and its
difference from ncu minus the offset (ncu - kernel mode on the first case, the empty kernel since 2026-11-28 (before: a one-cycle spin),
each run its own), within max(1 %, 64 ns) or not; hot, batch and graph of
the first run, and batch - ncu (and how many cases batch reads within
max(2 %, 0.35 µs) of ncu). "Within" is inclusive: the readings are
whole nanoseconds, so a difference is rounded to a thousandth of one
before the rule (before 2026-11-28 a difference of exactly 64 ns could
read as −64.0000001 and count as a miss).

Reads files only: it loads no CUDA and no NCCL. The multicast switches are
set all the same, as in every script here:
NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
"""

import os

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
import csv
import json
import statistics
import sys


def ncu_cases(path, n_cases):
    """ncu's durations (µs) per case, in launch order, split evenly."""
    rows = []
    with open(path) as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r["Metric Name"] == "gpu__time_duration.sum":
            rows.append((r["Kernel Name"], r["Grid Size"], float(r["Metric Value"].replace(",", "")) / 1e3))
    per = len(rows) // n_cases
    if per * n_cases != len(rows):
        sys.exit(f"{len(rows)} ncu rows for {n_cases} cases: not the same launches")
    return [rows[i * per : (i + 1) * per] for i in range(n_cases)]


def modes(rec):
    return {m["mode"]: statistics.median(m["samples"]) * 1e6 for m in rec["modes"] if m["samples"]}


def within_rule(d_ns, ncu_us):
    """max(1 %, 64 ns) of ncu, inclusive, d to a thousandth of a ns."""
    return abs(round(d_ns, 3)) <= max(0.01 * ncu_us * 1e3, 64)


def key(rec):
    p = ";".join(f"{k}={v}" for k, v in rec["params"].items())
    return f"{rec['name']}{{{p}}}" if p else rec["name"]


def main():
    logs, runs = sys.argv[1], sys.argv[2:]
    reports = [json.load(open(os.path.join(logs, r, "results.json"))) for r in runs]
    cases = [[x for x in r["records"] if x["modes"]] for r in reports]
    n = len(cases[0])
    ncu = ncu_cases(os.path.join(logs, "ncu-launch-only.csv"), n)
    ncu_med = [statistics.median(d for _, _, d in c) for c in ncu]
    offsets = [ncu_med[0] - modes(c[0])["kernel"] for c in cases]
    head = "| case | grid | ncu µs |" + "".join(f" {r}: kernel µs | {r}: − (ncu − offset) ns | within |" for r in runs)
    head += " hot µs | batch µs | graph µs | batch − ncu ns |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    within = [0] * len(runs)
    batch_misses = []
    for i in range(n):
        name = key(cases[0][i])
        if any(key(c[i]) != name for c in cases):
            sys.exit(f"case {i}: the runs differ ({[key(c[i]) for c in cases]})")
        line = f"| {name} | {ncu[i][0][1]} | {ncu_med[i]:.3f} |"
        for j, c in enumerate(cases):
            k = modes(c[i])["kernel"]
            d = (k - (ncu_med[i] - offsets[j])) * 1e3
            ok = within_rule(d, ncu_med[i])
            within[j] += ok
            line += f" {k:.3f} | {d:+.0f} | {'yes' if ok else 'NO'} |"
        m = modes(cases[0][i])
        if round(abs(m["batch"] - ncu_med[i]), 6) > max(0.02 * ncu_med[i], 0.35):
            batch_misses.append(name)
        line += f" {m['hot']:.3f} | {m['batch']:.3f} | {m['graph']:.3f} | {(m['batch'] - ncu_med[i]) * 1e3:+.0f} |"
        print(line)
    print()
    for j, r in enumerate(runs):
        print(f"- {r}: offset (ncu − kernel on the first case) {offsets[j]:.3f} µs; within max(1 %, 64 ns): {within[j]} of {n}")
    print(
        f"- {runs[0]}: batch within max(2 %, 0.35 µs) of ncu: {n - len(batch_misses)} of {n}"
        + (f" (not: {', '.join(batch_misses)})" if batch_misses else "")
    )


if __name__ == "__main__":
    main()
