"""PyTorch peers of `gpu-bench roofline`, measured in the same device call.

Writes a JSON list of {name, value, unit} (the names the roofline report's
targets table looks for) to argv[1]. Random data (never zeros), CUDA events,
median of 20 timed runs after 5 warm-up runs.
"""
import json
import os
import sys

import torch


def median_seconds(fn, runs=20, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main(out_path):
    dev = torch.device("cuda")
    peers = []

    def add(name, value, unit):
        peers.append({"name": name, "value": value, "unit": unit})
        print(f"{name:28s} {value / 1e12:10.3f} T{unit}", flush=True)

    # Each array's size: PEERS_MIB (default 1024), to match `gpu-bench
    # roofline --array-mib` in the same call.
    size = int(os.environ.get("PEERS_MIB", "1024")) << 20
    n = size // 4
    x = torch.randn(n, device=dev)
    y = torch.randn(n, device=dev)
    z = torch.empty(n, device=dev)
    gib = float(size)
    print(f"arrays of {size >> 20} MiB", flush=True)
    add("torch copy_", 2 * gib / median_seconds(lambda: z.copy_(x)), "B/s")
    add("torch sum", gib / median_seconds(lambda: x.sum()), "B/s")
    add("torch add", 3 * gib / median_seconds(lambda: torch.add(x, y, alpha=2, out=z)), "B/s")
    del x, y, z
    torch.cuda.empty_cache()
    if os.environ.get("PEERS_MEM_ONLY") == "1":  # the memory peers alone
        with open(out_path, "w") as f:
            json.dump(peers, f, indent=1)
        return

    m = 8192
    flops = 2.0 * m * m * m
    for dtype, name in [(torch.float32, "fp32"), (torch.bfloat16, "bf16"), (torch.float16, "fp16")]:
        a = torch.randn(m, m, device=dev, dtype=dtype)
        b = torch.randn(m, m, device=dev, dtype=dtype)
        add(f"torch matmul {name}", flops / median_seconds(lambda: torch.matmul(a, b)), "FLOP/s")
        del a, b
    try:
        a = torch.randn(m, m, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(m, m, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev)
        fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        add("torch _scaled_mm fp8", flops / median_seconds(fn), "FLOP/s")
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"fp8 _scaled_mm failed: {e}", flush=True)
    with open(out_path, "w") as f:
        json.dump(peers, f, indent=1)
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
