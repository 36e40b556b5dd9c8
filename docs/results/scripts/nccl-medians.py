#!/usr/bin/env python3
"""Medians over the rounds of device-call.sh's `ncclmed` and `smallmed`
stages (issue 30's targets ask for the median of >= 5 runs in one call).

    python3 docs/results/scripts/nccl-medians.py LOGS_DIR > medians.md

LOGS_DIR holds, per round r:
  ncclmed:  med-ours-r/results.json (gpu-bench nccl, one process, blocking),
            med-nt-<coll>-r.log (nccl-tests -g N), med-procs-r/results.json
            (gpu-bench nccl --procs N), med-torch-r.json (torch.distributed)
  smallmed: small-ours-r/ and small-graph-r/results.json (eager and
            --graph 10), small-nt-r.log and small-ntg-r.log (nccl-tests
            eager and -G 10), small-nt2-r.log (nccl-tests eager again: its
            A/A control, when present), small-old-r/results.json (an
            earlier build's eager sweep, device-call.sh's SMALL_OLD, when
            present)

Per size: the median over the rounds of each side's busbw (large) or time
per call (small), and the ratio of the medians; beside it the lowest and
highest per-round ratio. For the small eager all-reduce, one more table:
the ratio of each side's minimum, lower quartile and mean over the rounds,
and nccl-tests' own A/A ratio of minima (on a host whose processes settle
at one of two speeds, the median over rounds follows how many processes of
each side drew the slow one; the minima compare the fast ones).
nccl-tests' out-of-place columns are used (ours is out of place too);
torch.distributed's all_reduce is in place.
"""

import glob
import json
import os

# This script only reads logs: it loads no NCCL and starts nothing. The
# multicast switches are set all the same, as in every script here, so that
# nothing it might ever load or start could use NVLink multicast (it can take
# a shared host's GPUs out of service). As a shell would set them:
# NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
import re
import statistics
import sys


def rows_of(path):
    """gpu-bench nccl's rows: {(collective, bytes): row}."""
    out = {}

    def walk(o):
        if isinstance(o, dict):
            if "collective" in o and "bytes" in o and "busbw_gbs" in o:
                yield o
            for v in o.values():
                yield from walk(v)
        elif isinstance(o, list):
            for v in o:
                yield from walk(v)

    with open(path) as f:
        for r in walk(json.load(f)):
            out[(r["collective"], int(r["bytes"]))] = r
    return out


def nccl_tests(path):
    """nccl-tests' rows: {bytes: (time µs, busbw GB/s)}, out of place."""
    out = {}
    with open(path) as f:
        for line in f:
            x = line.split()
            if len(x) >= 9 and x[0].isdigit():
                try:
                    out[int(x[0])] = (float(x[5]), float(x[7]))
                except ValueError:
                    pass
    return out


def torch_rows(path):
    with open(path) as f:
        return {int(r["bytes"]): r for r in json.load(f).get("rows", [])}


def rounds(logs, pattern):
    """The round numbers r for which pattern % r exists."""
    found = []
    for p in glob.glob(os.path.join(logs, pattern.replace("{r}", "*"))):
        m = re.search(pattern.replace("{r}", r"(\d+)").replace(".", r"\.") + "$", p)
        if m:
            found.append(int(m.group(1)))
    return sorted(set(found))


def med(v):
    return statistics.median(v) if v else float("nan")


def table(title, header, lines):
    print(f"## {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for line in lines:
        print("| " + " | ".join(line) + " |")
    print()


def fmt(x, d=1):
    return "—" if x != x else f"{x:.{d}f}"


def compare(sizes, ours, peer, key, higher_is_better):
    """Lines: size, ours median, peer median, ratio of medians, per-round
    ratio range. `ours`, `peer`: per round {bytes: value}."""
    lines = []
    for b in sizes:
        o = [r[b] for r in ours if b in r]
        p = [r[b] for r in peer if b in r]
        per = [x / y for x, y in zip((r.get(b) for r in ours), (r.get(b) for r in peer)) if x and y]
        ratio = med(o) / med(p) if o and p else float("nan")
        lo, hi = (min(per), max(per)) if per else (float("nan"), float("nan"))
        lines.append([str(b), fmt(med(o), 2), fmt(med(p), 2), fmt(ratio, 3), f"{fmt(lo, 3)}–{fmt(hi, 3)}", f"{len(o)}/{len(p)}"])
    return lines


def order_statistics(sizes, ours, peer, aa, n, kind="eager"):
    """The small eager table by order statistics over the rounds: ours ÷
    nccl-tests by the minimum, the lower quartile and the mean, and (when
    nccl-tests ran twice a round) nccl-tests' second ÷ first by the minimum."""

    def q1(v):
        return statistics.quantiles(v, n=4, method="inclusive")[0] if len(v) > 1 else (v[0] if v else float("nan"))

    lines = []
    for b in sizes:
        o = [x[b] for x in ours if b in x]
        p = [x[b] for x in peer if b in x]
        if not o or not p:
            continue
        a = aa.get(b, [])
        lines.append(
            [
                str(b),
                fmt(min(o), 2),
                fmt(min(p), 2),
                fmt(min(o) / min(p), 3),
                fmt(q1(o) / q1(p), 3),
                fmt(statistics.mean(o) / statistics.mean(p), 3),
                fmt(min(a) / min(p), 3) if a else "—",
            ]
        )
    table(
        f"all_reduce 8 B–32 KiB, {kind}: ours (blocking) vs nccl-tests by order statistics over {n} rounds",
        ["bytes", "ours (min)", "nccl-tests (min)", "ratio of minima", "of lower quartiles", "of means", "A/A ratio of minima"],
        lines,
    )


def main():
    logs = sys.argv[1]
    names = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter", "send_recv": "sendrecv"}
    rs = rounds(logs, "med-ours-{r}/results.json")
    if rs:
        ours = [rows_of(f"{logs}/med-ours-{r}/results.json") for r in rs]
        for coll, nt in names.items():
            o = [{b: row["busbw_gbs"] for (c, b), row in x.items() if c == coll} for x in ours]
            p = []
            for r in rs:
                path = f"{logs}/med-nt-{nt}-{r}.log"
                p.append({b: v[1] for b, v in nccl_tests(path).items()} if os.path.exists(path) else {})
            sizes = sorted({b for x in o for b in x})
            table(
                f"{coll}: busbw GB/s, ours (one process, blocking) vs nccl-tests -g N, {len(rs)} rounds",
                ["bytes", "ours (median)", "nccl-tests (median)", "ours / nccl-tests", "per round", "rounds"],
                compare(sizes, o, p, "busbw", True),
            )
    rp = rounds(logs, "med-procs-{r}/results.json")
    if rp:
        o = []
        for r in rp:
            x = rows_of(f"{logs}/med-procs-{r}/results.json")
            o.append({b: row["busbw_gbs"] for (c, b), row in x.items() if c == "all_reduce"})
        p = []
        for r in rp:
            path = f"{logs}/med-torch-{r}.json"
            try:
                p.append({b: row["busbw_gbs"] for b, row in torch_rows(path).items()})
            except (OSError, ValueError):
                p.append({})
        sizes = sorted({b for x in o for b in x})
        table(
            f"all_reduce: busbw GB/s, ours (one process per GPU, --procs) vs torch.distributed, {len(rp)} rounds",
            ["bytes", "ours (median)", "torch (median)", "ours / torch", "per round", "rounds"],
            compare(sizes, o, p, "busbw", True),
        )
    # nccl-tests against itself (device-call.sh SMALL_NT_TWICE=1): the
    # same table with its second process of each round in ours' place.
    r2 = rounds(logs, "small-nt2-{r}.log")
    if r2:
        a = [{b: v[0] for b, v in nccl_tests(f"{logs}/small-nt2-{r}.log").items()} for r in r2]
        p = [{b: v[0] for b, v in nccl_tests(f"{logs}/small-nt-{r}.log").items()} for r in r2]
        sizes = sorted({b for x in a for b in x})
        table(
            f"all_reduce 8 B–32 KiB, eager: µs per call, nccl-tests against itself (A/A: its second process "
            f"of each round vs its first), {len(r2)} rounds",
            ["bytes", "second (median)", "first (median)", "second / first", "per round", "rounds"],
            compare(sizes, a, p, "time", False),
        )
    kinds = (
        ("eager", "small-ours-{r}", "small-nt-{r}.log"),
        ("eager, the earlier build (SMALL_OLD)", "small-old-{r}", "small-nt-{r}.log"),
        ("graph", "small-graph-{r}", "small-ntg-{r}.log"),
    )
    for kind, ours_pat, nt_pat in kinds:
        rr = rounds(logs, ours_pat + "/results.json")
        if not rr:
            continue
        o = []
        for r in rr:
            x = rows_of(f"{logs}/{ours_pat.format(r=r)}/results.json")
            o.append({b: row["time_us"] for (c, b), row in x.items() if c == "all_reduce"})
        p = []
        for r in rr:
            path = f"{logs}/{nt_pat.format(r=r)}"
            p.append({b: v[0] for b, v in nccl_tests(path).items()} if os.path.exists(path) else {})
        sizes = sorted({b for x in o for b in x})
        peer = "nccl-tests -G 10" if kind == "graph" else "nccl-tests"
        if kind != "graph":
            aa = {}
            if r2:
                aa = {b: [x[b] for x in a if b in x] for b in sizes}
            order_statistics(sizes, o, p, aa, len(rr), kind)
        table(
            f"all_reduce 8 B–32 KiB, {kind}: µs per call, ours (blocking) vs {peer}, {len(rr)} rounds (lower is better)",
            ["bytes", "ours (median)", f"{peer} (median)", "ours / peer", "per round", "rounds"],
            compare(sizes, o, p, "time", False),
        )


if __name__ == "__main__":
    main()
