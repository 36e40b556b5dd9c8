#!/usr/bin/env python3
"""PyTorch's peer of examples/examples/ddp_overlap/main.rs (issue 30 item 6): a
DDP-style step, gradient buckets all-reduced with
`dist.all_reduce(async_op=True)` on NCCL's stream while the next bucket's
compute runs, one process per GPU.

Run under torchrun, one process per GPU:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
      python3 -m torch.distributed.run --standalone --nproc-per-node N ddp-overlap-torch.py \
      [--buckets 16] [--bucket-mib 64] [--steps 7] [--compute matmul,elementwise] [--wait end,lag1]
      [--high-priority-stream] [--c-over-m R]

Per step, B buckets of `bucket-mib` MiB of float32. Bucket i is allocated
and produced on the current (compute) stream, then all-reduced (sum,
in place) with async_op=True. The compute of a bucket, sized so that C
(compute alone) ≈ M (communication alone) — C ≈ R·M with --c-over-m R —, is
one of:

  matmul      one bf16 product of n x n matrices (n calibrated: 8192 scaled
              by the cube root of M's bucket time over an 8192^3 product's,
              to a multiple of 256, then refined once), then a fill of the
              bucket with its value: the issue's workload (16 bf16 products
              of 8192^3 beside 16 x 64 MiB buckets).
  elementwise `passes` launches of `torch.mul(ones, value, out=bucket)`,
              passes calibrated as the Rust example does (M / one pass): the
              same bandwidth-bound kernel as the example's `scale`.

The works are waited for (`work.wait()`: the current stream waits for the
all-reduce on the GPU, the host does not block):

  end   every work after the last bucket, as DDP does at the end of
        backward: each bucket is held (by its work, PyTorch's
        TORCH_NCCL_AVOID_RECORD_STREAMS) until then.
  lag1  work i-1 right after bucket i is issued, the Rust example's
        schedule: bucket i-1 is freed once the current stream has waited
        for its all-reduce.

Timing, per rank, with CUDA events on the current stream (its end comes
after the waits, so it covers NCCL's stream too), the longest over the
ranks (all_reduce MAX), the median over `steps` repetitions of: C (every
bucket's compute, no collective), M (every bucket's all-reduce over buckets
made beforehand, no compute), and the step. ideal/step = max(C, M) / step;
hidden = (C + M - step) / min(C, M). Memory: torch.cuda.max_memory_reserved
and max_memory_allocated over the step (after empty_cache and
reset_peak_memory_stats), the largest over the ranks; `operand_bytes` is
what the compute holds besides the buckets (the matrices, or `ones`).

Correctness: one untimed step per variant reads every reduced bucket back
and compares it exactly with the integer-valued sum ((r + 1) * (i % 7 + 1)
summed over the ranks); `wrong` sums the differing elements over the ranks.
The exit status is 1 if any is wrong.

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
import statistics  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def grad_value(r, i):
    return float((r + 1) * (i % 7 + 1))


class Run:
    def __init__(self, a):
        self.a = a
        self.dev, self.rank, self.n = peer_common.init_distributed(a.high_priority_stream)
        self.elems = a.bucket_mib * (1 << 20) // 4

    def sync(self):
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()

    def longest(self, secs):
        t = torch.tensor([secs], dtype=torch.float64, device=self.dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    def total(self, count):
        t = torch.tensor([count], dtype=torch.int64, device=self.dev)
        dist.all_reduce(t)
        return int(t.item())

    def timed(self, body):
        """`body` between two events on the current stream; the longest
        span over the ranks, in seconds."""
        self.sync()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = body()
        end.record()
        end.synchronize()
        return self.longest(start.elapsed_time(end) * 1e-3), out

    # The compute of one bucket.
    def make_bucket(self, mode, i):
        v = grad_value(self.rank, i)
        if mode == "matmul":
            torch.matmul(self.mat_a, self.mat_b, out=self.mat_c)
            return torch.full((self.elems,), v, dtype=torch.float32, device=self.dev)
        b = torch.empty(self.elems, dtype=torch.float32, device=self.dev)
        for _ in range(self.passes):
            torch.mul(self.ones, v, out=b)
        return b

    def compute_alone(self, mode):
        def body():
            for i in range(self.a.buckets):
                self.make_bucket(mode, i)

        return self.timed(body)[0]

    def comm_alone(self):
        sets = [torch.zeros(self.elems, dtype=torch.float32, device=self.dev) for _ in range(self.a.buckets)]

        def body():
            works = [dist.all_reduce(b, async_op=True) for b in sets]
            for w in works:
                w.wait()

        t = self.timed(body)[0]
        del sets
        return t

    def step(self, mode, wait, check=False):
        """One step; with `check`, the wrong elements of every bucket (read
        after the step, so the step's schedule is unchanged)."""
        kept = []

        def body():
            works, pending = [], None
            for i in range(self.a.buckets):
                b = self.make_bucket(mode, i)
                w = dist.all_reduce(b, async_op=True)
                if check:
                    kept.append((i, b))
                if wait == "lag1":
                    if pending is not None:
                        pending.wait()
                    pending = w
                else:
                    works.append(w)
                del b
            if pending is not None:
                pending.wait()
            for w in works:
                w.wait()

        t = self.timed(body)[0]
        wrong = 0
        for i, b in kept:
            want = sum(grad_value(r, i) for r in range(self.n))
            wrong += int((b != want).sum().item())
        return t, wrong

    def calibrate(self, mode, m):
        """Sizes one bucket's compute so that C ≈ R·M (R: --c-over-m, 1 by
        default); returns what it chose."""
        m = m * self.a.c_over_m
        per_bucket = m / self.a.buckets
        if mode == "elementwise":
            self.ones = torch.ones(self.elems, dtype=torch.float32, device=self.dev)
            self.passes = 1
            c1 = statistics.median(self.compute_alone(mode) for _ in range(3))
            self.passes = self.a.passes or max(1, round(m / c1))
            return {"passes": self.passes, "one_pass_c_s": c1}, self.elems * 4
        n = self.a.matrix or 8192
        for _ in range(1 if self.a.matrix else 2):
            self.mat_a = torch.randn(n, n, dtype=torch.bfloat16, device=self.dev)
            self.mat_b = torch.randn(n, n, dtype=torch.bfloat16, device=self.dev)
            self.mat_c = torch.empty(n, n, dtype=torch.bfloat16, device=self.dev)
            c = statistics.median(self.compute_alone(mode) for _ in range(3)) / self.a.buckets
            if self.a.matrix:
                break
            # A product's time goes as n^3; the fill is part of the bucket's time too.
            n = max(256, round(n * (per_bucket / c) ** (1 / 3) / 256) * 256)
        else:
            self.mat_a = torch.randn(n, n, dtype=torch.bfloat16, device=self.dev)
            self.mat_b = torch.randn(n, n, dtype=torch.bfloat16, device=self.dev)
            self.mat_c = torch.empty(n, n, dtype=torch.bfloat16, device=self.dev)
        return {"matrix": n, "dtype": "bfloat16"}, 3 * n * n * 2

    def drop_operands(self):
        for name in ("ones", "mat_a", "mat_b", "mat_c"):
            if hasattr(self, name):
                delattr(self, name)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--bucket-mib", type=int, default=64)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--compute", default="matmul,elementwise")
    ap.add_argument("--wait", default="end,lag1")
    ap.add_argument("--passes", type=int, default=0, help="elementwise passes per bucket (0: calibrate)")
    ap.add_argument("--matrix", type=int, default=0, help="matmul size n (0: calibrate)")
    ap.add_argument(
        "--c-over-m", type=float, default=1.0, help="the calibration's aim for C / M (the Rust example's --c-over-m)"
    )
    ap.add_argument(
        "--high-priority-stream",
        action="store_true",
        help="NCCL's streams at the device's greatest priority (ProcessGroupNCCL.Options.is_high_priority_stream)",
    )
    a = ap.parse_args()
    run = Run(a)
    # Warm-up: NCCL's connections, the allocator, the kernels.
    run.comm_alone()
    m_cal = statistics.median(run.comm_alone() for _ in range(3))
    variants, failed = [], False
    for mode in a.compute.split(","):
        sizing, operand_bytes = run.calibrate(mode, m_cal)
        for wait in a.wait.split(","):
            _, wrong = run.step(mode, wait, check=True)
            wrong = run.total(wrong)
            failed |= wrong > 0
            cs, ms, steps, colds, reserved, allocated = [], [], [], [], 0, 0
            for _ in range(a.steps):
                ms.append(run.comm_alone())
                cs.append(run.compute_alone(mode))
                run.sync()
                # The memory step, the cache emptied first (its peaks are the
                # memory figures), then the timed step with the cache as a
                # training loop finds it (the Rust example does the same).
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                t, _ = run.step(mode, wait)
                colds.append(t)
                reserved = max(reserved, run.longest(float(torch.cuda.max_memory_reserved())))
                allocated = max(allocated, run.longest(float(torch.cuda.max_memory_allocated())))
                t, _ = run.step(mode, wait)
                steps.append(t)
            c, m, s = statistics.median(cs), statistics.median(ms), statistics.median(steps)
            k = statistics.median(colds)
            variants.append(
                {
                    "compute": mode,
                    "wait": wait,
                    **sizing,
                    "c_s": c,
                    "m_s": m,
                    "c_over_m": c / m,
                    "step_s": s,
                    "ideal_over_step": max(c, m) / s,
                    "hidden": (c + m - s) / min(c, m),
                    "cold_step_s": k,
                    "cold_ideal_over_step": max(c, m) / k,
                    "cold_hidden": (c + m - k) / min(c, m),
                    "max_memory_reserved": int(reserved),
                    "max_memory_allocated": int(allocated),
                    "operand_bytes": operand_bytes,
                    "wrong": wrong,
                    "c_all_s": cs,
                    "m_all_s": ms,
                    "step_all_s": steps,
                    "cold_step_all_s": colds,
                }
            )
        run.drop_operands()
    if run.rank == 0:
        print(
            json.dumps(
                {
                    "what": "DDP-style overlap: all_reduce(async_op=True) of float32 buckets beside compute, "
                    "one process per GPU",
                    "ranks": run.n,
                    "torch": torch.__version__,
                    "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                    "device": torch.cuda.get_device_name(),
                    "buckets": a.buckets,
                    "bucket_bytes": run.elems * 4,
                    "steps": a.steps,
                    "high_priority_stream": a.high_priority_stream,
                    "m_calibration_s": m_cal,
                    "variants": variants,
                },
                indent=1,
            )
        )
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
