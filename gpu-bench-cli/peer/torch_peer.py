#!/usr/bin/env python3
"""Peer figures for gpu-bench, measured with PyTorch in the same device call.

- the spin kernel (torch.cuda._sleep of a known cycle count) at 10 us, 100 us,
  1 ms and 10 ms, timed with torch.cuda.Event pairs (median) and with
  triton.testing.do_bench when triton is installed;
- pinned and pageable Tensor.copy_(non_blocking=True), H2D and D2H, GB/s,
  from host tensors written before the copies (as gpu-bench's are).

Usage: torch_peer.py --clock-mhz 1980 --out DIR   (writes DIR/peer.json, DIR/peer.md)
The clock should be gpu-bench's measured steady clock (timer/results.json), so
both tools time the same number of cycles.
"""
import argparse
import json
import os
import statistics
import sys


def events_median(fn, reps, warmup=5):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clock-mhz", type=float, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch not available: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch sees no CUDA device", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    try:
        import triton.testing as tt
    except Exception:  # noqa: BLE001 - any import failure means "no triton"
        tt = None
    res = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
           "clock_mhz": args.clock_mhz, "spin": [], "copy": []}
    lines = [f"# PyTorch peer figures\n\n{res['device']} · torch {res['torch']} · "
             f"cycles at {args.clock_mhz:.0f} MHz\n",
             "| spin | expected | torch events | triton do_bench |", "|---|---|---|---|"]
    for length in [10e-6, 100e-6, 1e-3, 10e-3]:
        cycles = int(round(length * args.clock_mhz * 1e6))
        reps = 200 if length < 1e-3 else 50
        ev = events_median(lambda: torch.cuda._sleep(cycles), 20 if args.quick else reps)
        db = None
        if tt is not None:
            db = tt.do_bench(lambda: torch.cuda._sleep(cycles), return_mode="median") * 1e-3
        res["spin"].append({"length_s": length, "cycles": cycles, "expected_s": cycles / (args.clock_mhz * 1e6),
                            "torch_events_s": ev, "triton_do_bench_s": db})
        lines.append(f"| {length*1e6:g} us | {cycles/(args.clock_mhz):.2f} us | {ev*1e6:.2f} us | "
                     + (f"{db*1e6:.2f} us |" if db is not None else "— |"))
    lines += ["", "| copy | size | GB/s |", "|---|---|---|"]
    sizes = [1 << 20, 64 << 20] if args.quick else [1 << 20, 16 << 20, 256 << 20, 1 << 30]
    for size in sizes:
        n = size // 4
        dev = torch.empty(n, dtype=torch.float32, device="cuda")
        for pinned in (True, False):
            host = torch.empty(n, dtype=torch.float32, pin_memory=pinned)
            # Written before any copy, as gpu-bench's host buffers are: a
            # never-written pageable tensor maps every page to the kernel's
            # one zero page, which the driver's staging memcpy reads from
            # cache (18 GB/s for 1 GiB on the H100 machine against 7.6 GB/s
            # from written memory: docs/results/2026-11-25-pageable.md).
            host.fill_(7.0)
            reps = 10 if size >= (256 << 20) else 50
            h2d = events_median(lambda: dev.copy_(host, non_blocking=True), reps)
            d2h = events_median(lambda: host.copy_(dev, non_blocking=True), reps)
            kind = "pinned" if pinned else "pageable"
            for name, t in ((f"H2D {kind}", h2d), (f"D2H {kind}", d2h)):
                res["copy"].append({"what": name, "bytes": size, "seconds": t, "gbs": size / t / 1e9})
                lines.append(f"| {name} | {size >> 20} MiB | {size / t / 1e9:.1f} |")
            del host
    with open(os.path.join(args.out, "peer.json"), "w") as f:
        json.dump(res, f, indent=2)
    with open(os.path.join(args.out, "peer.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
