#!/usr/bin/env python3
"""Pageable host<->device copies in PyTorch and through the raw driver (ctypes
on libcuda), from host memory in several states, for the comparison in
docs/results/2026-11-25-pageable.md.

Rows (tab-separated, as gpu-sync/examples/pageable_probe.rs prints them):
variant, MiB, wall median GB/s, wall best GB/s, event median GB/s, reps.
Wall time is time.perf_counter() around the call and a synchronization;
event time is torch.cuda.Event pairs around the call on torch's current
stream (the legacy default stream), recorded as torch_peer.py does.

Usage: pageable_peer.py [MAX_MIB]
"""
import ctypes
import mmap
import statistics
import sys
import time

import torch

cu = ctypes.CDLL("libcuda.so.1")
u64, vp, sz = ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t
cu.cuMemcpyHtoD_v2.argtypes = [u64, vp, sz]
cu.cuMemcpyHtoDAsync_v2.argtypes = [u64, vp, sz, vp]
cu.cuMemcpyDtoH_v2.argtypes = [vp, u64, sz]
cu.cuStreamCreate.argtypes = [ctypes.POINTER(vp), ctypes.c_uint]
cu.cuStreamSynchronize.argtypes = [vp]
cu.cuCtxGetCurrent.argtypes = [ctypes.POINTER(vp)]
cu.cuMemHostRegister_v2.argtypes = [vp, sz, ctypes.c_uint]
cu.cuMemHostUnregister.argtypes = [vp]


def ck(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} returned CUresult {rc}")


def run(name, size, fn, reps, events=True):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    wall, dev = [], []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        w = time.perf_counter() - t
        b.record()
        b.synchronize()
        wall.append(w)
        dev.append(a.elapsed_time(b) * 1e-3)
    gb = size / 1e9
    ev = f"{gb / statistics.median(dev):.2f}" if events else "-"
    print(f"{name}\t{size >> 20}\t{gb / statistics.median(wall):.2f}\t{gb / min(wall):.2f}\t{ev}\t{reps}",
          flush=True)


def run_peer(name, size, fn, reps):
    """torch_peer.py's own method: events around the call, no host sync
    inside the span (the end event is recorded right after copy_ returns)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    dev = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        dev.append(a.elapsed_time(b) * 1e-3)
    gb = size / 1e9
    print(f"{name}\t{size >> 20}\t-\t-\t{gb / statistics.median(dev):.2f}\t{reps}", flush=True)


def main():
    max_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    dev0 = torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    ctx = vp()
    ck(cu.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    print(f"# {torch.cuda.get_device_name(0)} · torch {torch.__version__} · threads {torch.get_num_threads()}"
          f" · current context {'set' if ctx.value else 'NONE'}")
    print("variant\tMiB\twall_median_GBps\twall_best_GBps\tevent_median_GBps\treps")
    nb = vp()
    ck(cu.cuStreamCreate(ctypes.byref(nb), 1), "cuStreamCreate(NON_BLOCKING)")
    size = 1 << 20
    while size <= max_mib << 20:
        n = size // 4
        reps = max(5, min(40, (2 << 30) // size))
        dev = torch.empty(n, dtype=torch.float32, device="cuda")
        untouched = torch.empty(n, dtype=torch.float32)  # as torch_peer.py: never written
        touched = torch.empty(n, dtype=torch.float32)
        touched.fill_(7.0)
        out = torch.empty(n, dtype=torch.float32)
        out.fill_(1.0)
        d, hp, op = dev.data_ptr(), touched.data_ptr(), out.data_ptr()

        run_peer("H2D torch copy_ untouched host (torch_peer.py method)", size,
                 lambda: dev.copy_(untouched, non_blocking=True), reps)
        run("H2D torch copy_ untouched host", size, lambda: dev.copy_(untouched, non_blocking=True), reps)
        run_peer("H2D torch copy_ touched host (torch_peer.py method)", size,
                 lambda: dev.copy_(touched, non_blocking=True), reps)
        run("H2D torch copy_ touched host", size, lambda: dev.copy_(touched, non_blocking=True), reps)
        run("H2D torch copy_ touched host, non_blocking=False", size, lambda: dev.copy_(touched), reps)
        run("H2D raw cuMemcpyHtoD (sync), touched", size,
            lambda: ck(cu.cuMemcpyHtoD_v2(d, hp, size), "cuMemcpyHtoD"), reps)
        run("H2D raw cuMemcpyHtoDAsync legacy stream+sync, touched", size,
            lambda: (ck(cu.cuMemcpyHtoDAsync_v2(d, hp, size, None), "cuMemcpyHtoDAsync"),
                     ck(cu.cuStreamSynchronize(None), "cuStreamSynchronize")), reps)
        run("H2D raw cuMemcpyHtoDAsync non-blocking stream+sync, touched", size,
            lambda: (ck(cu.cuMemcpyHtoDAsync_v2(d, hp, size, nb), "cuMemcpyHtoDAsync"),
                     ck(cu.cuStreamSynchronize(nb), "cuStreamSynchronize")), reps, events=False)
        def reg_copy():
            ck(cu.cuMemHostRegister_v2(hp, size, 0), "cuMemHostRegister")
            ck(cu.cuMemcpyHtoDAsync_v2(d, hp, size, nb), "cuMemcpyHtoDAsync")
            ck(cu.cuStreamSynchronize(nb), "cuStreamSynchronize")
            ck(cu.cuMemHostUnregister(hp), "cuMemHostUnregister")
        try:
            run("H2D raw register+HtoDAsync+sync+unregister, touched", size, reg_copy, reps, events=False)
        except Exception as e:  # noqa: BLE001
            print(f"# register variant failed: {e}")
        # 2 MiB-aligned, madvise(MADV_HUGEPAGE), touched.
        mm = mmap.mmap(-1, size + (2 << 20))
        addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        off = (-addr) % (2 << 20)
        try:
            mm.madvise(mmap.MADV_HUGEPAGE, off, size)
        except Exception as e:  # noqa: BLE001
            print(f"# madvise failed: {e}")
        huge = torch.frombuffer(mm, dtype=torch.float32, count=n, offset=off)
        huge.fill_(7.0)
        run("H2D torch copy_ 2MiB-aligned THP touched host", size, lambda: dev.copy_(huge, non_blocking=True), reps)
        del huge

        run("H2D torch touched.cuda() (new device tensor + copy)", size, lambda: touched.cuda(), reps)
        run("D2H torch dev.cpu() (new host tensor + copy)", size, lambda: dev.cpu(), reps)
        run_peer("D2H torch copy_ touched host (torch_peer.py method)", size,
                 lambda: out.copy_(dev, non_blocking=True), reps)
        run("D2H torch copy_ touched host", size, lambda: out.copy_(dev, non_blocking=True), reps)
        run("D2H raw cuMemcpyDtoH (sync), touched", size,
            lambda: ck(cu.cuMemcpyDtoH_v2(op, d, size), "cuMemcpyDtoH"), reps)
        del dev, untouched, touched, out
        size *= 4
    with open("/proc/meminfo") as f:
        print("# " + " ".join(line.strip() for line in f if "Huge" in line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
