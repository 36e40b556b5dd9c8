#!/usr/bin/env python3
"""PyTorch peer of `gpu-bench timeline`: the same demonstration pipeline
inside torch.profiler, launching OUR fatbin kernels (the kernels crate's
scale_f32 and spin_cycles, loaded with CuPy's RawModule as
peer/truth_peer.py does) on torch's streams, and a comparer of kernel
durations between two Chrome traces.

Pipeline (as gpu-bench-cli/src/timeline.rs): per chunk, an H2D copy on an
h2d stream, scale_f32 then spin_cycles on a compute stream, a D2H copy on a
d2h stream; two device slots per direction with the cross-stream waits
torch needs spelled out (events); once with pinned host memory
(non_blocking copies), once with pageable (synchronous copies). Host ranges
"pinned", "pageable" and "chunk i" are torch.profiler.record_function.

Usage:
  profile_peer.py run --fatbins DIR --out DIR --chunks N --chunk-bytes B --spin-cycles C
      writes DIR/torch_trace.json (export_chrome_trace) and
      DIR/torch_summary.json; prints the kernel durations as JSON.
  profile_peer.py compare OURS.json THEIRS.json [--kernels scale_f32,spin_cycles] [--out FILE.md]
      both Chrome traces' kernel durations side by side (calls, avg, min,
      max per kernel name; avg difference in %), markdown on stdout.
"""
import argparse
import json
import os
import statistics
import sys


def kernel_durations(trace_path, kinds=("kernel",)):
    """{name: [durations in µs]} of the complete events of category `kinds`,
    leaving out kernels that ran inside a replayed graph (gpu-bench's traces
    mark them with args.graph; the PyTorch pipeline replays no graph)."""
    with open(trace_path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    out = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in kinds:
            continue
        if "graph" in (e.get("args") or {}):
            continue
        out.setdefault(e["name"], []).append(float(e["dur"]))
    return out


def summarize(durs):
    return {
        name: {
            "calls": len(v),
            "total_us": sum(v),
            "avg_us": sum(v) / len(v),
            "median_us": statistics.median(v),
            "min_us": min(v),
            "max_us": max(v),
        }
        for name, v in sorted(durs.items())
    }


def run(args):
    import numpy as np
    import torch
    import cupy as cp
    from torch.profiler import ProfilerActivity, profile, record_function

    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    block = 256
    n = args.chunk_bytes // 4
    chunks = args.chunks
    grid = (max(1, min((n + block - 1) // block, 8 * sms)),)

    elem = cp.RawModule(path=os.path.join(args.fatbins, "elementwise.fatbin"))
    spin_mod = cp.RawModule(path=os.path.join(args.fatbins, "spin.fatbin"))
    scale = elem.get_function("scale_f32")
    spin = spin_mod.get_function("spin_cycles")

    h2d, compute, d2h = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    host = (torch.arange(chunks * n, dtype=torch.float32) % 1013) * 0.25 + 1.0
    pinned_in = host.pin_memory()
    pinned_out = [torch.empty(n, dtype=torch.float32).pin_memory() for _ in range(chunks)]
    pageable_out = torch.full((chunks * n,), -1.0, dtype=torch.float32)  # pages touched before timing
    slots_in = [torch.zeros(n, dtype=torch.float32, device=dev) for _ in range(2)]
    slots_out = [torch.zeros(n, dtype=torch.float32, device=dev) for _ in range(2)]
    spin_out = torch.zeros(1, dtype=torch.int64, device=dev)
    cx = lambda t: cp.asarray(t)  # noqa: E731 - zero-copy views for CuPy

    def launch_compute(s):
        with cp.cuda.ExternalStream(compute.cuda_stream):
            scale(grid, (block,), (cx(slots_in[s]), cx(slots_out[s]), np.float32(2.0), np.uint64(n)))
            spin((1,), (1,), (np.uint64(args.spin_cycles), cx(spin_out)))

    # Untimed first launches (module load).
    launch_compute(0)
    torch.cuda.synchronize()

    def pipeline(pinned):
        up_done = [torch.cuda.Event() for _ in range(2)]
        comp_done = [torch.cuda.Event() for _ in range(2)]
        down_done = [torch.cuda.Event() for _ in range(2)]
        for i in range(chunks):
            with record_function(f"chunk {i}"):
                s = i % 2
                src = (pinned_in if pinned else host)[i * n:(i + 1) * n]
                with torch.cuda.stream(h2d):
                    if i >= 2:
                        h2d.wait_event(comp_done[s])  # slot_in[s] read by chunk i-2's compute
                    slots_in[s].copy_(src, non_blocking=pinned)
                    up_done[s].record(h2d)
                compute.wait_event(up_done[s])
                if i >= 2:
                    compute.wait_event(down_done[s])  # slot_out[s] read by chunk i-2's download
                launch_compute(s)
                comp_done[s].record(compute)
                with torch.cuda.stream(d2h):
                    d2h.wait_event(comp_done[s])
                    if pinned:
                        pinned_out[i].copy_(slots_out[s], non_blocking=True)
                    else:
                        pageable_out[i * n:(i + 1) * n].copy_(slots_out[s])
                    down_done[s].record(d2h)
        torch.cuda.synchronize()

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 profile_memory=True) as prof:
        with record_function("pinned"):
            pipeline(True)
        with record_function("pageable"):
            pipeline(False)
    ok = all(torch.equal(pinned_out[i], host[i * n:(i + 1) * n] * 2) for i in range(chunks))
    ok = ok and torch.equal(pageable_out, host * 2)
    os.makedirs(args.out, exist_ok=True)
    trace = os.path.join(args.out, "torch_trace.json")
    prof.export_chrome_trace(trace)
    durs = kernel_durations(trace)
    copies = kernel_durations(trace, kinds=("gpu_memcpy",))
    summary = {
        "torch": torch.__version__,
        "cupy": cp.__version__,
        "results_correct": ok,
        "chunks": chunks,
        "chunk_bytes": args.chunk_bytes,
        "spin_cycles": args.spin_cycles,
        "kernels": summarize(durs),
        "copies": summarize(copies),
        "table": prof.key_averages().table(sort_by="cuda_time_total", row_limit=15),
    }
    with open(os.path.join(args.out, "torch_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({"kernels": summary["kernels"], "results_correct": ok}, indent=1))
    print(summary["table"])
    return 0 if ok else 4


def compare(args):
    ours, theirs = kernel_durations(args.ours), kernel_durations(args.theirs)
    names = args.kernels.split(",") if args.kernels else sorted(set(ours) & set(theirs))
    lines = [
        "| kernel | calls (ours / torch) | avg ours | avg torch | min ours / torch | max ours / torch | avg diff |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = []
    for k in names:
        a, b = ours.get(k, []), theirs.get(k, [])
        if not a or not b:
            lines.append(f"| {k} | {len(a)} / {len(b)} | — | — | — | — | — |")
            continue
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        d = (ma / mb - 1) * 100
        rows.append({"kernel": k, "ours_avg_us": ma, "torch_avg_us": mb, "diff_pct": d})
        lines.append(
            f"| {k} | {len(a)} / {len(b)} | {ma:.2f} µs | {mb:.2f} µs | {min(a):.2f} / {min(b):.2f} µs "
            f"| {max(a):.2f} / {max(b):.2f} µs | {d:+.2f} % |"
        )
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--fatbins", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--chunks", type=int, default=8)
    r.add_argument("--chunk-bytes", type=int, default=32 << 20)
    r.add_argument("--spin-cycles", type=int, required=True)
    c = sub.add_parser("compare")
    c.add_argument("ours")
    c.add_argument("theirs")
    c.add_argument("--kernels", default="")
    c.add_argument("--out", default="")
    args = ap.parse_args()
    return run(args) if args.cmd == "run" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
