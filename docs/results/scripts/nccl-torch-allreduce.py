#!/usr/bin/env python3
"""PyTorch's `torch.distributed.all_reduce`, the one-process-per-GPU
reference `gpu-bench nccl` is compared with (issue 30 item 5).

Run under torchrun, one process per GPU:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
      python3 -m torch.distributed.run --standalone --nproc-per-node N nccl-torch-allreduce.py \
      [--min-bytes 8] [--max-bytes 1073741824] [--factor 2] [--warmup 5] [--iters 20]

Sizes as nccl-tests' `-b 8 -e 1G -f 2`, float32, sum, in place (PyTorch's
all_reduce has no out-of-place form). Per size, as nccl-tests and
`gpu-bench nccl` time it: `warmup` untimed calls, then events on the
process's current stream around `iters` calls; each rank's span / iters,
the longest over the ranks (an all_reduce of the times with MAX) is the
time. algbw = S / t, busbw = algbw * 2(n-1)/n (nccl-tests'
doc/PERFORMANCE.md). After the timed calls one more call on inputs of
rank + 1 is checked against n(n+1)/2 on every element: `wrong` counts the
elements that differ, summed over the ranks.

Rank 0 prints one JSON object on stdout.
"""

# NVLink multicast stays off in every process on the shared hosts
# (../shared/GPU.md, "Several GPUs"); torchrun's children inherit it, and a
# process started another way gets it here, before NCCL loads.
# As a shell would set it: NCCL_NVLS_ENABLE=0 (and the two switches peer_common lists).
# peer_common sets them on import, before anything below loads.
import peer_common

import argparse  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, default=8)
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--factor", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    dev, rank, n = peer_common.init_distributed()
    buf = torch.empty(a.max_bytes // 4, dtype=torch.float32, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rows = []
    size = a.min_bytes
    while size <= a.max_bytes:
        count = size // 4
        if count == 0:
            size *= a.factor
            continue
        x = buf[:count]
        x.fill_(1.0)
        for _ in range(a.warmup):
            dist.all_reduce(x)
        dist.barrier()
        start.record()
        for _ in range(a.iters):
            dist.all_reduce(x)
        end.record()
        end.synchronize()
        t = torch.tensor([start.elapsed_time(end) / a.iters * 1e-3], dtype=torch.float64, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        secs = t.item()
        x.fill_(float(rank + 1))
        dist.all_reduce(x)
        wrong = torch.tensor([(x != n * (n + 1) / 2).sum().item()], dtype=torch.int64, device=dev)
        dist.all_reduce(wrong)
        algbw = count * 4 / secs / 1e9
        rows.append(
            {
                "bytes": count * 4,
                "time_us": secs * 1e6,
                "algbw_gbs": algbw,
                "busbw_gbs": algbw * 2 * (n - 1) / n,
                "wrong": int(wrong.item()),
            }
        )
        size *= a.factor
    if rank == 0:
        print(
            json.dumps(
                {
                    "what": "torch.distributed.all_reduce, float32 sum, in place, one process per GPU",
                    "ranks": n,
                    "torch": torch.__version__,
                    "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                    "warmup": a.warmup,
                    "iters": a.iters,
                    "rows": rows,
                },
                indent=1,
            )
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
