#!/usr/bin/env python3
"""The 4-byte peer-copy latency measured with raw runtime calls (CuPy), the
ground truth `gpu-bench p2p`'s latency columns are checked against.

For every ordered pair (src, dst), with peer access off and then on (both
directions enabled, as `gpu-bench p2p` does): a 4-byte
`cudaMemcpyPeerAsync(dst_buf, dst, src_buf, src, 4, stream)` on a stream of
dst, timed two ways with CUDA events on that stream:
- single: one copy between an event pair, the median of 200 pairs (what
  `gpu-bench p2p` reports: the event-pair floor is inside);
- batched: 1000 copies back to back between one event pair, divided by
  1000 (what NVIDIA's p2pBandwidthLatencyTest reports), the median of 5.
An empty event pair (no copy) on the same stream gives the floor.

Prints one JSON object. Usage on the GPU host: python3 p2p-latency-peer.py
"""

# NVLink multicast stays off in every process on the shared hosts.
# As a shell would set it: NCCL_NVLS_ENABLE=0 (and the two switches peer_common lists).
# peer_common sets them on import, before anything below loads.
import peer_common  # noqa: F401

import json  # noqa: E402
import statistics  # noqa: E402

import cupy as cp  # noqa: E402

rt = cp.cuda.runtime


def timed_us(stream, body, pairs):
    out = []
    for _ in range(pairs + 1):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(stream)
        body()
        b.record(stream)
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
    return out[1:]


def main():
    n = rt.getDeviceCount()
    bufs = {}
    for d in range(n):
        with cp.cuda.Device(d):
            bufs[d] = cp.arange(4, dtype=cp.uint32) + d
    rows = []
    for src in range(n):
        for dst in range(n):
            if src == dst:
                continue
            with cp.cuda.Device(dst):
                s = cp.cuda.Stream(non_blocking=True)
                dptr, sptr = bufs[dst].data.ptr, bufs[src].data.ptr

                def one():
                    rt.memcpyPeerAsync(dptr, dst, sptr, src, 4, s.ptr)

                def many():
                    for _ in range(1000):
                        one()

                row = {"src": src, "dst": dst}
                row["floor_us"] = statistics.median(timed_us(s, lambda: None, 200))
                for state in ("off", "on"):
                    if state == "on":
                        for x, y in ((dst, src), (src, dst)):
                            with cp.cuda.Device(x):
                                try:
                                    rt.deviceEnablePeerAccess(y)
                                except rt.CUDARuntimeError:
                                    pass  # already enabled
                    row[f"single_{state}_us"] = statistics.median(timed_us(s, one, 200))
                    row[f"batched_{state}_us"] = statistics.median(timed_us(s, many, 5)) / 1000
                for x, y in ((dst, src), (src, dst)):
                    with cp.cuda.Device(x):
                        try:
                            rt.deviceDisablePeerAccess(y)
                        except rt.CUDARuntimeError:
                            pass
                rows.append(row)
    print(json.dumps({"cupy": cp.__version__, "pairs": rows}, indent=1))


if __name__ == "__main__":
    main()
