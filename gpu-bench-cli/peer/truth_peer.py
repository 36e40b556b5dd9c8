#!/usr/bin/env python3
"""Peers for `gpu-bench truth`: the same fatbin kernels, the same launch
configurations, timed by the tools a PyTorch user reaches for, in the same
device call.

Each case of `gpu-bench truth` (an empty spin, then per size scale_f32,
copy_u32x4, triad_f32 and read_sum_u32x4, then the spins) is launched with
CuPy (the kernels crate's fatbin loaded with RawModule) on PyTorch's current
stream, and timed by
- torch.cuda.Event pairs around one launch (median of --reps),
- triton.testing.do_bench (its L2 flush between runs; median), when triton
  is installed,
- torch.utils.benchmark.Timer.blocked_autorange (host clock around
  synchronized blocks of launches; median per launch).

Usage: truth_peer.py --fatbins DIR --clock-mhz MHZ --out DIR [--quick]
Writes DIR/peers.json: "cases", in `gpu-bench truth`'s order, each
{"case", "events", "do_bench", "blocked_autorange"} in seconds.
"""
import argparse
import json
import os
import statistics

SIZES = [(1 << 10, "1Ki"), (1 << 15, "32Ki"), (1 << 20, "1Mi"), (1 << 25, "32Mi"), (1 << 28, "256Mi")]
SPINS = [(250e-9, "250 ns"), (500e-9, "500 ns"), (1e-6, "1 µs"), (2e-6, "2 µs"), (10e-6, "10 µs"),
         (100e-6, "100 µs"), (1e-3, "1 ms"), (10e-3, "10 ms")]
BLOCK = 256
# kernels::TILE_VECTORS (kernels/src/spec.rs): 16-byte vectors a thread per tile.
TILE_VECTORS = 2


def events_median(fn, reps):
    import torch
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    times = []
    for a, b in pairs:
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fatbins", required=True)
    ap.add_argument("--clock-mhz", type=float, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()

    import numpy as np
    import torch
    import cupy as cp
    try:
        import triton.testing as tt
    except Exception:  # noqa: BLE001 - triton is optional
        tt = None
    from torch.utils.benchmark import Timer

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    max_blocks = 8 * sms

    # The launch rules of kernels/src/launch.rs: `grid_for` (read_sum_u32x4:
    # one block per 256 threads, at most eight a SM) and `grid_tiles` (the
    # tiled kernels: one block per tile of TILE_VECTORS x 256 16-byte
    # vectors, uncapped).
    def grid(threads):
        return (max(1, min((threads + BLOCK - 1) // BLOCK, max_blocks)),)

    def grid_tiles(vectors):
        tile = TILE_VECTORS * BLOCK
        return (max(1, min((vectors + tile - 1) // tile, (1 << 31) - 1)),)

    elem = cp.RawModule(path=os.path.join(args.fatbins, "elementwise.fatbin"))
    strm = cp.RawModule(path=os.path.join(args.fatbins, "stream.fatbin"))
    spin_mod = cp.RawModule(path=os.path.join(args.fatbins, "spin.fatbin"))
    scale = elem.get_function("scale_f32")
    copy = strm.get_function("copy_u32x4")
    triad = strm.get_function("triad_f32")
    read_sum = strm.get_function("read_sum_u32x4")
    spin = spin_mod.get_function("spin_cycles")

    torch_stream = torch.cuda.current_stream()
    ext = cp.cuda.ExternalStream(torch_stream.cuda_stream)
    sizes = [s for s in SIZES if not args.quick or s[0] <= 1 << 20]
    max_n = max(n for n, _ in sizes)
    with ext:
        x = cp.arange(max_n, dtype=cp.float32) % 1013 * 0.25 + 1.0
        y = x.copy()
        out_f = cp.empty(max_n, dtype=cp.float32)
        words = (cp.arange(max_n, dtype=cp.uint64) * 2654435761 % (1 << 32)).astype(cp.uint32)
        out_u = cp.empty(max_n, dtype=cp.uint32)
        acc = cp.zeros(1, dtype=cp.uint64)
        spin_out = cp.zeros(1, dtype=cp.uint64)

    def launcher(f, g, b, params):
        def run():
            with ext:
                f(g, b, params)
        return run

    cases = [("spin_cycles", "empty", launcher(spin, (1,), (1,), (np.uint64(1), spin_out)))]
    for n, label in sizes:
        n4 = n // 4
        cases += [
            ("scale_f32", label, launcher(scale, grid_tiles((n + 3) // 4), (BLOCK,), (x, out_f, np.float32(2.0), np.uint64(n)))),
            ("copy_u32x4", label, launcher(copy, grid_tiles(n4), (BLOCK,), (words, out_u, np.uint64(n4)))),
            ("triad_f32", label,
             launcher(triad, grid_tiles((n + 3) // 4), (BLOCK,), (out_f, x, y, np.float32(0.5), np.uint64(n)))),
            ("read_sum_u32x4", label, launcher(read_sum, grid(n4), (BLOCK,), (words, np.uint64(n4), acc))),
        ]
    for t, label in SPINS:
        if args.quick and t > 100e-6:
            continue
        cycles = max(1, round(t * args.clock_mhz * 1e6))
        cases.append(("spin_cycles", label, launcher(spin, (1,), (1,), (np.uint64(cycles), spin_out))))

    results = []
    for kernel, label, run in cases:
        key = f"{kernel}{{size={label}}}"
        r = {"case": key, "events": events_median(run, args.reps)}
        if tt is not None:
            r["do_bench"] = tt.do_bench(run, warmup=25, rep=100, return_mode="median") * 1e-3
        m = Timer(stmt="run()", globals={"run": run}).blocked_autorange(min_run_time=0.2)
        r["blocked_autorange"] = m.median
        results.append(r)
        print(f"{key}: " + ", ".join(f"{k} {v * 1e6:.2f} us" for k, v in r.items() if k != "case"), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cupy": cp.__version__, "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
