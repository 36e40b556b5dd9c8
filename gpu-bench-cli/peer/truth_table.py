#!/usr/bin/env python3
"""Joins what gpu-bench-cli/peer/truth_run.sh brought back into the timer-truth
targets table (markdown on stdout).

Inputs in DIR: truth/results.json (`gpu-bench truth`), ncu_hot.csv and
ncu_cold.csv (Nsight Compute's gpu__time_duration.sum of the same cases,
launched in the same order, LAUNCHES each), peers.json (truth_peer.py).

Targets (issue "timer truth"):
- kernel (CUPTI) within max(1 %, 64 ns) of ncu's median (no cache control),
  once ncu's offset from CUPTI on the empty kernel is added;
- hot and graph at most max(2 %, event-pair floor + 0.3 us) above kernel;
  hot <= cold within the noise;
- batch within max(5 %, 0.2 us) of kernel;
- spin: kernel within 0.5 % of cycles / measured clock from 1 ms up;
- every sampled mode converged, in <= 3 s.

Usage: truth_table.py DIR [--launches 200]
"""
import argparse
import csv
import json
import os
import statistics


def ncu_medians(path, launches):
    """Per case, in launch order: the median of its `launches` durations, s."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = r.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}.get(unit, 1e-9)
        rows.append((int(r["ID"]), r["Kernel Name"], float(r["Metric Value"].replace(",", "")) * scale))
    rows.sort()
    out = []
    for i in range(0, len(rows) - launches + 1, launches):
        chunk = rows[i:i + launches]
        out.append((chunk[0][1], statistics.median(v for _, _, v in chunk)))
    return out


def from_csv(d):
    """The records, rebuilt from results.csv and report.md (when results.json,
    which carries every sample, was too large to bring back)."""
    recs, index = [], {}
    with open(os.path.join(d, "truth", "results.csv"), newline="") as f:
        for row in csv.DictReader(f):
            key = (row["benchmark"], row["params"])
            if key not in index:
                params = dict(kv.split("=", 1) for kv in row["params"].split(";") if "=" in kv)
                index[key] = {"name": row["benchmark"], "params": params, "modes": [], "counters": []}
                recs.append(index[key])
            r = index[key]
            if row["mode"] and row["counter"] == "median":
                r["modes"].append({"mode": row["mode"], "summary": {"median": float(row["value"])}})
            elif not row["mode"] or row["counter"] not in ("q1", "q3", "min", "max", "mean", "stdev", "iqr"):
                r["counters"].append({"name": row["counter"], "value": float(row["value"] or "nan"),
                                      "unit": row["unit"]})
    stops = {}
    floor = None
    for line in open(os.path.join(d, "truth", "report.md")):
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 8 and cells[-2].startswith(("converged", "timeout", "max-samples")):
            words = cells[-2].split()
            stops[(cells[1], cells[2])] = (words[0], float(words[-2]))
        if "event-pair floor on a busy stream (" in line and floor is None:
            v = line.split("busy stream (")[1].split(")")[0].split()
            floor = float(v[0]) * {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3}[v[1]]
    for r in recs:
        key = r["name"] + "{" + ",".join(f"{k}={v}" for k, v in r["params"].items()) + "}"
        for m in r["modes"]:
            if (key, m["mode"]) in stops:
                m["stop"], m["sampling_s"] = stops[(key, m["mode"])]
    return {"records": recs, "resolution": {"busy_floor_s": floor}}


def us(x):
    return "—" if x is None else f"{x * 1e6:.3f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--launches", type=int, default=200)
    a = ap.parse_args()
    jp = os.path.join(a.dir, "truth", "results.json")
    if os.path.exists(jp + ".gz"):
        import gzip
        rep = json.load(gzip.open(jp + ".gz"))
    elif os.path.exists(jp):
        rep = json.load(open(jp))
    else:
        rep = from_csv(a.dir)
    floor = (rep.get("resolution") or {}).get("busy_floor_s")
    recs = [r for r in rep["records"] if r["name"] != "CUPTI host cost per launch"]
    hot = ncu_medians(os.path.join(a.dir, "ncu_hot.csv"), a.launches)
    cold_list = ncu_medians(os.path.join(a.dir, "ncu_cold.csv"), a.launches)
    peers = []
    p = os.path.join(a.dir, "peers.json")
    if os.path.exists(p):
        peers = json.load(open(p))["cases"]
    mem_i = 0
    offset = 0.0
    print(f"event-pair floor on a busy stream: {us(floor)} us\n")
    if hot:
        empty = hot[0][1]
        kmed = None
        for m in recs[0]["modes"]:
            if m["mode"] == "kernel":
                kmed = m["summary"]["median"]
        if kmed is not None:
            offset = empty - kmed
            print(f"ncu - CUPTI on the empty kernel: {(empty - kmed) * 1e9:.0f} ns "
                  f"(ncu {us(empty)} us, CUPTI {us(kmed)} us)\n")
    print("| case | ncu | ncu cold | kernel | hot | cold | batch | graph | torch events | do_bench | checks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    fails = 0
    for i, r in enumerate(recs):
        key = r["name"] + "{" + ",".join(f"{k}={v}" for k, v in r["params"].items()) + "}"
        med = {m["mode"]: m["summary"]["median"] for m in r["modes"]}
        stops = {m["mode"]: (m.get("stop"), m.get("sampling_s", 0) + m.get("warmup_s", 0)) for m in r["modes"]}
        n = hot[i][1] if i < len(hot) else None
        c = None
        if r["name"] != "spin_cycles":
            c = cold_list[mem_i][1] if mem_i < len(cold_list) else None
            mem_i += 1
        k = med.get("kernel")
        checks = []
        if k is not None and n is not None:
            # ncu's duration includes the launch's own processing, which
            # CUPTI's kernel record leaves out: held against ncu less the
            # offset measured on the empty kernel.
            ok = abs(k + offset - n) <= max(0.01 * n, 64e-9)
            checks.append(("kernel+offset≈ncu", ok))
        if k is not None:
            lim = max(0.02 * k, (floor or 0) + 0.3e-6)
            for m in ("hot", "graph"):
                if m in med:
                    checks.append((f"{m}≤k+{lim * 1e6:.2f}", med[m] - k <= lim))
            if "batch" in med:
                checks.append(("batch≈k", abs(med["batch"] - k) <= max(0.05 * k, 0.2e-6)))
        if "hot" in med and "cold" in med:
            checks.append(("hot≤cold", med["hot"] <= med["cold"] * 1.005))
        exp = next((x["value"] for x in r["counters"] if x["name"] == "expected (cycles / clock)"), None)
        if exp is not None and exp >= 1e-3 and k is not None:
            checks.append(("spin 0.5%", abs(k / exp - 1) <= 0.005))
        for m, (why, t) in stops.items():
            if m != "first-call" and (why != "converged" or t > 3.0):
                checks.append((f"{m} {why} {t:.1f}s", False))
        fails += sum(1 for _, ok in checks if not ok)
        pe = peers[i] if i < len(peers) else {}
        cells = " ".join(("✓" if ok else "✗ ") + name for name, ok in checks)
        print(f"| {key} | {us(n)} | {us(c)} | {us(k)} | {us(med.get('hot'))} | {us(med.get('cold'))} | "
              f"{us(med.get('batch'))} | {us(med.get('graph'))} | {us(pe.get('events'))} | "
              f"{us(pe.get('do_bench'))} | {cells} |")
    host = next((r for r in rep["records"] if r["name"] == "CUPTI host cost per launch"), None)
    if host:
        print()
        for x in host["counters"]:
            v = x["value"]
            print(f"- {x['name']}: " + (f"{v * 1e6:.3f} us" if x["unit"] == "seconds" else f"{v:g}"))
    print(f"\n{fails} checks failed")


if __name__ == "__main__":
    main()
