#!/usr/bin/env python3
"""PyTorch's peer copies, the reference `gpu-bench p2p` is compared with.

For every ordered pair of GPUs (src, dst): a cross-device `y.copy_(x)` of
256 MiB and 1 GiB (x on src, y on dst), one way, and both ways as two
copies on two streams at once (src -> dst on a stream of dst, dst -> src on
a stream of src, as PyTorch queues a cross-device copy_ on the current
stream of the destination). Each figure is the median of 20 runs timed
with CUDA events (one warmup run first); a both-ways run spans two devices,
whose events cannot be subtracted, so its time is the longer of the two
devices' spans. Every copy is checked after the timed runs.

Prints one JSON object on stdout. Usage on the GPU host:

    python3 p2p-peers.py > p2p-torch.json
"""

# NVLink multicast stays off in every process on the shared hosts, even
# one that never calls NCCL (../shared/GPU.md, "Several GPUs").
# As a shell would set it: NCCL_NVLS_ENABLE=0 (and the two switches peer_common lists).
# peer_common sets them on import, before anything below loads.
import peer_common  # noqa: F401

import json  # noqa: E402
import statistics  # noqa: E402

import torch  # noqa: E402

SIZES = [256 << 20, 1 << 30]
REPEATS = 20


def span_ms(start, end):
    end.synchronize()
    return start.elapsed_time(end)


def measure(src, dst, nbytes, both):
    n = nbytes // 4
    a_src = torch.full((n,), 0x5000 + 16 * src + dst, dtype=torch.int32, device=f"cuda:{src}")
    b_dst = torch.zeros(n, dtype=torch.int32, device=f"cuda:{dst}")
    b_src = torch.full((n,), 0x6000 + 16 * dst + src, dtype=torch.int32, device=f"cuda:{dst}")
    a_dst = torch.zeros(n, dtype=torch.int32, device=f"cuda:{src}")
    s_dst = torch.cuda.Stream(device=dst)
    s_src = torch.cuda.Stream(device=src)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    ev = lambda d: torch.cuda.Event(enable_timing=True)  # noqa: E731
    with torch.cuda.device(dst):
        e0, e1 = ev(dst), ev(dst)
    with torch.cuda.device(src):
        f0, f1 = ev(src), ev(src)
    runs = []
    for i in range(REPEATS + 1):
        with torch.cuda.device(dst), torch.cuda.stream(s_dst):
            e0.record(s_dst)
            b_dst.copy_(a_src, non_blocking=True)
            e1.record(s_dst)
        if both:
            with torch.cuda.device(src), torch.cuda.stream(s_src):
                f0.record(s_src)
                a_dst.copy_(b_src, non_blocking=True)
                f1.record(s_src)
        ms = span_ms(e0, e1)
        if both:
            ms = max(ms, span_ms(f0, f1))
        if i > 0:
            runs.append(ms)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    ok = bool(torch.equal(b_dst.cpu(), a_src.cpu()))
    if both:
        ok = ok and bool(torch.equal(a_dst.cpu(), b_src.cpu()))
    if not ok:
        raise SystemExit(f"check failed: {src} -> {dst}, {nbytes} bytes, both={both}")
    ms = statistics.median(runs)
    moved = nbytes * (2 if both else 1)
    return {"median_ms": ms, "gbs": moved / (ms * 1e-3) / 1e9, "runs_ms": runs}


def main():
    count = torch.cuda.device_count()
    out = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "devices": [torch.cuda.get_device_name(i) for i in range(count)],
        "repeats": REPEATS,
        "method": "y.copy_(x) across devices on the destination's stream; both ways: "
        "two copies on two streams at once, the longer device span; median of events",
        "pairs": [],
    }
    for src in range(count):
        for dst in range(count):
            if src == dst:
                continue
            row = {
                "src": src,
                "dst": dst,
                "can_access_peer": torch.cuda.can_device_access_peer(dst, src),
            }
            for nbytes in SIZES:
                row[f"one_way_{nbytes}"] = measure(src, dst, nbytes, both=False)
                row[f"both_ways_{nbytes}"] = measure(src, dst, nbytes, both=True)
            out["pairs"].append(row)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
