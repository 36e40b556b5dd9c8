//! NCCL collectives as tracked operations (issue 30): exact results for
//! every collective over every device of the machine, ordered against
//! kernels on other streams with no wait written, buffers dropped right
//! after a collective freed only after it (the race oracle watches), the
//! refusals before anything is issued, and a group whose closure fails or
//! panics issuing nothing.
//!
//! On the simulator (`CUDA_SIM_DEVICES`, default 2) the simulated NCCL
//! answers and the oracle checks every ordering; on a GPU the real NCCL
//! does and the data is checked.

use gpu_sync::nccl::{self, CommOptions, Communicator, ReduceOp};
use gpu_sync::{Device, DeviceBuffer, Error, Stream};
use kernels::Kernels;
use sync_tests::ctx;

const N: usize = 1 << 12;

/// Every device, one communicator each, and a stream per rank; `None` (and
/// a note) with fewer than two devices.
fn clique() -> Option<(Vec<Device>, Vec<Communicator>, Vec<Stream>)> {
    let devices = Device::all().expect("devices");
    if devices.len() < 2 {
        eprintln!("{} device(s): a collective needs two", devices.len());
        return None;
    }
    let comms = Communicator::init_all(&devices).expect("ncclCommInitRankConfig for every device");
    let streams = devices.iter().map(|d| Stream::new(d).expect("stream")).collect();
    Some((devices, comms, streams))
}

/// Another stream on each device, and the kernels loaded on each: work
/// the collectives must be ordered against.
fn side_streams(devices: &[Device]) -> (Vec<Stream>, Vec<Kernels>) {
    let others = devices.iter().map(|d| Stream::new(d).expect("other")).collect();
    let ks = devices.iter().map(|d| Kernels::load(d).expect("kernels")).collect();
    (others, ks)
}

/// Adds 1 to every element of `bufs[r]` with a kernel on `others[r]`.
fn bump_all(ks: &[Kernels], others: &[Stream], bufs: &mut [DeviceBuffer<u32>], what: &str) {
    for ((k, s), b) in ks.iter().zip(others).zip(bufs.iter_mut()) {
        k.bump(s, b, 1).expect(what);
    }
}

/// Rank `r`'s input: `r * 1000 + i`.
fn input(r: usize, n: usize) -> Vec<i32> {
    (0..n).map(|i| (r * 1000 + i) as i32).collect()
}

#[test]
fn every_collective_is_exact_and_ordered_against_kernels_on_other_streams() {
    let t = ctx(0x3001);
    let Some((devices, comms, streams)) = clique() else { return };
    let n = devices.len();
    // Written by a kernel on another stream of each device first: each
    // rank's stream must wait for it.
    let (others, ks) = side_streams(&devices);
    let mut send: Vec<DeviceBuffer<u32>> = others
        .iter()
        .enumerate()
        .map(|(r, s)| {
            DeviceBuffer::from_slice(s, &input(r, N).iter().map(|&v| v as u32).collect::<Vec<_>>())
                .expect("send")
        })
        .collect();
    bump_all(&ks, &others, &mut send, "bump before the collective");
    let sent: Vec<Vec<u32>> = (0..n).map(|r| input(r, N).iter().map(|&v| v as u32 + 1).collect()).collect();

    // All-reduce (sum), out of place.
    let mut recv: Vec<DeviceBuffer<u32>> =
        streams.iter().map(|s| DeviceBuffer::<u32>::zeroed(s, N).expect("recv")).collect();
    nccl::group(|g| {
        for (((c, s), x), y) in comms.iter().zip(&streams).zip(&send).zip(recv.iter_mut()) {
            g.all_reduce(c, s, x, y, ReduceOp::Sum)?;
        }
        Ok(())
    })
    .expect("all_reduce");
    let want: Vec<u32> = (0..N).map(|i| sent.iter().map(|v| v[i]).sum()).collect();
    for (r, y) in recv.iter().enumerate() {
        // Read on another stream: ordered after the collective.
        assert_eq!(others[r].to_vec(y).expect("recv"), want, "all_reduce on rank {r}");
    }

    // All-gather.
    let mut gathered: Vec<DeviceBuffer<u32>> =
        streams.iter().map(|s| DeviceBuffer::<u32>::zeroed(s, N * n).expect("gathered")).collect();
    nccl::group(|g| {
        for (((c, s), x), y) in comms.iter().zip(&streams).zip(&send).zip(gathered.iter_mut()) {
            g.all_gather(c, s, x, y)?;
        }
        Ok(())
    })
    .expect("all_gather");
    let want: Vec<u32> = sent.concat();
    for (r, y) in gathered.iter().enumerate() {
        assert_eq!(others[r].to_vec(y).expect("gathered"), want, "all_gather on rank {r}");
    }

    // Reduce-scatter (max) over the gathered buffers: block r of the max.
    let mut block: Vec<DeviceBuffer<u32>> =
        streams.iter().map(|s| DeviceBuffer::<u32>::zeroed(s, N).expect("block")).collect();
    nccl::group(|g| {
        for (((c, s), x), y) in comms.iter().zip(&streams).zip(&gathered).zip(block.iter_mut()) {
            g.reduce_scatter(c, s, x, y, ReduceOp::Max)?;
        }
        Ok(())
    })
    .expect("reduce_scatter");
    for (r, y) in block.iter().enumerate() {
        assert_eq!(others[r].to_vec(y).expect("block"), sent[r], "reduce_scatter on rank {r}");
    }

    // Broadcast from the last rank, in place.
    let root = n - 1;
    nccl::group(|g| {
        for ((c, s), y) in comms.iter().zip(&streams).zip(recv.iter_mut()) {
            g.broadcast_in_place(c, s, y, root)?;
        }
        Ok(())
    })
    .expect("broadcast");
    let want: Vec<u32> = (0..N).map(|i| sent.iter().map(|v| v[i]).sum()).collect();
    for (r, y) in recv.iter().enumerate() {
        assert_eq!(others[r].to_vec(y).expect("broadcast"), want, "broadcast on rank {r}");
    }

    // Send/recv around the ring: rank r sends to r + 1.
    let mut ring: Vec<DeviceBuffer<u32>> =
        streams.iter().map(|s| DeviceBuffer::<u32>::zeroed(s, N).expect("ring")).collect();
    nccl::group(|g| {
        for (r, ((c, s), (x, y))) in
            comms.iter().zip(&streams).zip(send.iter().zip(ring.iter_mut())).enumerate()
        {
            g.send(c, s, x, (r + 1) % n)?;
            g.recv(c, s, y, (r + n - 1) % n)?;
        }
        Ok(())
    })
    .expect("send/recv");
    for (r, y) in ring.iter().enumerate() {
        assert_eq!(others[r].to_vec(y).expect("ring"), sent[(r + n - 1) % n], "recv on rank {r}");
    }

    // Kernels after the collectives, on the other streams, then dropped at
    // once: each free waits for the collective's use on the GPU.
    bump_all(&ks, &others, &mut send, "bump after the collectives");
    drop((send, recv, gathered, block, ring));
    t.finish();
}

#[test]
fn each_ranks_call_made_alone_is_ordered_as_a_group_is() {
    // A group of one operation (one process per GPU; `Communicator::
    // all_reduce`) takes the engine's single-stream path: it must wait for
    // a kernel's write on another stream, and a read, a kernel and a free
    // after it must wait for it, as after a group of every rank.
    let t = ctx(0x3005);
    let Some((devices, comms, streams)) = clique() else { return };
    let n = devices.len();
    let (others, ks) = side_streams(&devices);
    // The first use of a clique connects its ranks, which a rank's call
    // made alone would wait for on the host (every rank is in this
    // thread): one group of every rank first, of the same collectives and
    // size. After it, each call made alone only enqueues (on the GPU the
    // test hung without it).
    let mut warm: Vec<DeviceBuffer<u32>> =
        streams.iter().map(|s| DeviceBuffer::<u32>::zeroed(s, N).expect("warm")).collect();
    let mut warm_out: Vec<DeviceBuffer<u32>> =
        streams.iter().map(|s| DeviceBuffer::<u32>::zeroed(s, N).expect("warm out")).collect();
    nccl::group(|g| {
        for (((c, s), x), y) in comms.iter().zip(&streams).zip(&warm).zip(warm_out.iter_mut()) {
            g.all_reduce(c, s, x, y, ReduceOp::Sum)?;
        }
        Ok(())
    })
    .expect("the group that connects the ranks");
    nccl::group(|g| {
        for ((c, s), x) in comms.iter().zip(&streams).zip(warm.iter_mut()) {
            g.all_reduce_in_place(c, s, x, ReduceOp::Prod)?;
        }
        Ok(())
    })
    .expect("in place, the same");
    drop((warm, warm_out));
    for round in 0..3u32 {
        let mut send: Vec<DeviceBuffer<u32>> = others
            .iter()
            .enumerate()
            .map(|(r, s)| DeviceBuffer::from_slice(s, &vec![r as u32 + round; N]).expect("send"))
            .collect();
        bump_all(&ks, &others, &mut send, "bump before");
        let mut recv: Vec<DeviceBuffer<u32>> =
            streams.iter().map(|s| DeviceBuffer::<u32>::zeroed(s, N).expect("recv")).collect();
        for r in 0..n {
            comms[r]
                .all_reduce(&streams[r], &send[r], &mut recv[r], ReduceOp::Sum)
                .expect("all_reduce alone");
        }
        let want = (0..n as u32).map(|r| r + round + 1).sum::<u32>();
        for r in 0..n {
            assert_eq!(others[r].to_vec(&recv[r]).expect("recv"), vec![want; N], "rank {r}, round {round}");
        }
        // A write after the collective's read, then the buffers freed at
        // once: both ordered after it on the GPU.
        bump_all(&ks, &others, &mut send, "bump after");
        // In place, each rank alone, the buffer dropped right after.
        let mut bufs: Vec<DeviceBuffer<u32>> =
            streams.iter().map(|s| DeviceBuffer::from_slice(s, &vec![2; N]).expect("bufs")).collect();
        for r in 0..n {
            comms[r].all_reduce_in_place(&streams[r], &mut bufs[r], ReduceOp::Prod).expect("in place alone");
        }
        assert_eq!(others[0].to_vec(&bufs[0]).expect("in place"), vec![1 << n; N]);
        // All-to-all alone per rank (its sends and receives in a group of
        // their own inside the operation): block j of rank i's input is
        // block i of rank j's output.
        let b = N / n;
        let blocks: Vec<DeviceBuffer<u32>> = streams
            .iter()
            .enumerate()
            .map(|(r, s)| {
                let v: Vec<u32> = (0..N).map(|i| (r * N + i) as u32 + round).collect();
                DeviceBuffer::from_slice(s, &v).expect("blocks")
            })
            .collect();
        let mut swapped: Vec<DeviceBuffer<u32>> =
            streams.iter().map(|s| DeviceBuffer::<u32>::zeroed(s, N).expect("swapped")).collect();
        if round == 0 {
            // Its first use, every rank in one group (the connections).
            nccl::group(|g| {
                for (((c, s), x), y) in comms.iter().zip(&streams).zip(&blocks).zip(swapped.iter_mut()) {
                    g.all_to_all(c, s, x, y)?;
                }
                Ok(())
            })
            .expect("all_to_all, grouped");
        }
        for r in 0..n {
            nccl::group(|g| g.all_to_all(&comms[r], &streams[r], &blocks[r], &mut swapped[r]))
                .expect("all_to_all alone");
        }
        for (j, y) in swapped.iter().enumerate() {
            let want: Vec<u32> =
                (0..n).flat_map(|i| (0..b).map(move |k| (i * N + j * b + k) as u32 + round)).collect();
            assert_eq!(others[j].to_vec(y).expect("swapped"), want, "all_to_all on rank {j}, round {round}");
        }
        drop((send, recv, bufs, blocks, swapped));
    }
    t.finish();
}

#[test]
fn in_place_all_reduce_in_f32_and_a_buffer_dropped_right_after_it() {
    let t = ctx(0x3002);
    let Some((devices, comms, streams)) = clique() else { return };
    let n = devices.len() as f32;
    for round in 0..4 {
        let mut bufs: Vec<DeviceBuffer<f32>> = streams
            .iter()
            .enumerate()
            .map(|(r, s)| DeviceBuffer::from_slice(s, &vec![(r + round) as f32; N]).expect("upload"))
            .collect();
        nccl::group(|g| {
            for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
                g.all_reduce_in_place(c, s, b, ReduceOp::Avg)?;
            }
            Ok(())
        })
        .expect("all_reduce_in_place");
        let want = (0..devices.len()).map(|r| (r + round) as f32).sum::<f32>() / n;
        let reader = Stream::new(&devices[0]).expect("reader");
        assert!(reader.to_vec(&bufs[0]).expect("read").iter().all(|&v| (v - want).abs() < 1e-5), "avg");
        // Dropped with the collective perhaps still in flight on the
        // other ranks: freed stream-ordered after it.
        drop(bufs);
    }
    t.finish();
}

#[test]
fn bad_arguments_are_refused_and_a_failed_collect_issues_nothing() {
    let t = ctx(0x3003);
    let Some((devices, comms, streams)) = clique() else { return };
    let x = DeviceBuffer::<i32>::zeroed(&streams[0], N).expect("x");
    let mut short = DeviceBuffer::<i32>::zeroed(&streams[0], N / 2).expect("short");
    // Lengths.
    let r = nccl::group(|g| g.all_reduce(&comms[0], &streams[0], &x, &mut short, ReduceOp::Sum));
    assert!(matches!(r, Err(Error::LengthMismatch { .. })), "{r:?}");
    // A stream of another device than the communicator's.
    let mut y = DeviceBuffer::<i32>::zeroed(&streams[1], N).expect("y");
    let r = nccl::group(|g| g.all_reduce_in_place(&comms[0], &streams[1], &mut y, ReduceOp::Sum));
    assert!(matches!(r, Err(Error::DeviceMismatch { .. })), "{r:?}");
    // A root that is no rank.
    let r = nccl::group(|g| g.broadcast_in_place(&comms[0], &streams[0], &mut y, devices.len()));
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // The closure fails after collecting rank 0's part: nothing is issued
    // (rank 0 alone would wait for ever for the others).
    let mut z = DeviceBuffer::<i32>::zeroed(&streams[0], N).expect("z");
    let r: gpu_sync::Result<()> = nccl::group(|g| {
        g.all_reduce_in_place(&comms[0], &streams[0], &mut z, ReduceOp::Sum)?;
        Err(Error::InvalidArgument("the caller changed its mind".into()))
    });
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // A panic inside the closure: nothing issued either.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        nccl::group(|g| -> gpu_sync::Result<()> {
            g.all_reduce_in_place(&comms[0], &streams[0], &mut z, ReduceOp::Sum)?;
            panic!("collect panicked")
        })
    }));
    assert!(caught.is_err());
    // The communicators still work.
    let mut bufs: Vec<DeviceBuffer<i32>> =
        streams.iter().map(|s| DeviceBuffer::from_slice(s, &vec![2i32; N]).expect("bufs")).collect();
    nccl::group(|g| {
        for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
            g.all_reduce_in_place(c, s, b, ReduceOp::Prod)?;
        }
        Ok(())
    })
    .expect("after the refusals");
    let want = 2i32.pow(devices.len() as u32);
    assert!(streams[0].to_vec(&bufs[0]).expect("read").iter().all(|&v| v == want));
    t.finish();
}

#[test]
fn a_rank_that_never_comes_is_a_timeout_not_a_hang() {
    let t = ctx(0x3004);
    let devices = Device::all().expect("devices");
    if devices.len() < 2 {
        eprintln!("{} device(s): nothing to test", devices.len());
        return;
    }
    // Rank 0 of two, alone: the other rank never joins.
    let id = nccl::UniqueId::new().expect("ncclGetUniqueId");
    let start = std::time::Instant::now();
    let r = Communicator::init_rank(
        &devices[0],
        2,
        0,
        &id,
        CommOptions { timeout: std::time::Duration::from_secs(2), ..Default::default() },
    );
    assert!(matches!(r, Err(Error::NcclTimeout { .. })), "{r:?}");
    assert!(start.elapsed() < std::time::Duration::from_secs(30), "returned after {:?}", start.elapsed());
    t.finish();
}
