//! NCCL's other forms (issue 30): blocking communicators for the ranks of
//! one process, with the groups that could wait forever on the host
//! refused before anything is issued; sub-cliques (`ncclCommSplit`);
//! all-to-all; broadcast out of place; reduce to a root. Exact results on every device of the
//! machine (the simulator's `CUDA_SIM_DEVICES`, default 2; the real NCCL on
//! a GPU host), the race oracle watching.

use gpu_sync::nccl::{self, CommOptions, Communicator, ReduceOp, UniqueId};
use gpu_sync::{Device, DeviceBuffer, Error, Stream};
use sync_tests::ctx;

const N: usize = 1 << 10;

/// Every device, one communicator each with `options`, and a stream per
/// rank; `None` (and a note) with fewer than two devices.
fn clique(options: CommOptions) -> Option<(Vec<Device>, Vec<Communicator>, Vec<Stream>)> {
    let devices = Device::all().expect("devices");
    if devices.len() < 2 {
        eprintln!("{} device(s): a collective needs two", devices.len());
        return None;
    }
    let comms = Communicator::init_all_with(&devices, options).expect("communicators");
    let streams = devices.iter().map(|d| Stream::new(d).expect("stream")).collect();
    Some((devices, comms, streams))
}

fn blocking() -> CommOptions {
    CommOptions { blocking: true, ..Default::default() }
}

/// Rank `r`'s input.
fn input(r: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| (r * 1000 + i % 997) as f32).collect()
}

#[test]
fn blocking_communicators_give_the_same_results() {
    let t = ctx(0x3101);
    let Some((devices, comms, streams)) = clique(blocking()) else { return };
    let n = devices.len();
    let send: Vec<DeviceBuffer<f32>> = streams
        .iter()
        .enumerate()
        .map(|(r, s)| DeviceBuffer::from_slice(s, &input(r, N)).expect("send"))
        .collect();
    let mut recv: Vec<DeviceBuffer<f32>> =
        streams.iter().map(|s| DeviceBuffer::zeroed(s, N).expect("recv")).collect();
    for round in 0..3 {
        nccl::group(|g| {
            for (((c, s), x), y) in comms.iter().zip(&streams).zip(&send).zip(recv.iter_mut()) {
                g.all_reduce(c, s, x, y, ReduceOp::Sum)?;
            }
            Ok(())
        })
        .expect("all-reduce on blocking communicators");
        let want: Vec<f32> = (0..N).map(|i| (0..n).map(|r| input(r, N)[i]).sum()).collect();
        for (r, y) in recv.iter().enumerate() {
            assert_eq!(streams[r].to_vec(y).expect("read"), want, "round {round}, rank {r}");
        }
    }
    // A ring of sends and receives: every send meets its receive.
    let mut ring: Vec<DeviceBuffer<f32>> =
        streams.iter().map(|s| DeviceBuffer::zeroed(s, N).expect("ring")).collect();
    nccl::group(|g| {
        for (r, ((c, s), y)) in comms.iter().zip(&streams).zip(ring.iter_mut()).enumerate() {
            g.send(c, s, &send[r], (r + 1) % n)?;
            g.recv(c, s, y, (r + n - 1) % n)?;
        }
        Ok(())
    })
    .expect("a ring on blocking communicators");
    for (r, y) in ring.iter().enumerate() {
        assert_eq!(streams[r].to_vec(y).expect("read"), input((r + n - 1) % n, N), "ring, rank {r}");
    }
    t.finish();
}

#[test]
fn a_blocking_group_that_could_wait_forever_is_refused_before_anything_is_issued() {
    let t = ctx(0x3102);
    let Some((devices, comms, streams)) = clique(blocking()) else { return };
    let n = devices.len();
    let mut bufs: Vec<DeviceBuffer<f32>> = streams
        .iter()
        .enumerate()
        .map(|(r, s)| DeviceBuffer::from_slice(s, &input(r, N)).expect("buf"))
        .collect();
    let text = |r: Result<(), Error>| match r {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    // Rank 0 alone: the others never come.
    let (b0, rest) = bufs.split_at_mut(1);
    let m = text(nccl::group(|g| g.all_reduce_in_place(&comms[0], &streams[0], &mut b0[0], ReduceOp::Sum)));
    assert!(m.contains("no operation for rank 1"), "{m}");
    // Every rank, but rank 1 reduces with another operation.
    let m = text(nccl::group(|g| {
        g.all_reduce_in_place(&comms[0], &streams[0], &mut b0[0], ReduceOp::Sum)?;
        for (i, b) in rest.iter_mut().enumerate() {
            let op = if i == 0 { ReduceOp::Max } else { ReduceOp::Sum };
            g.all_reduce_in_place(&comms[i + 1], &streams[i + 1], b, op)?;
        }
        Ok(())
    }));
    assert!(m.contains("rank 1 other collectives"), "{m}");
    // A send with no receive on its peer (every rank takes part).
    let (x, rest) = bufs.split_at_mut(1);
    let m = text(nccl::group(|g| {
        g.send(&comms[0], &streams[0], &x[0], 1)?;
        for (i, b) in rest.iter_mut().enumerate() {
            g.send(&comms[i + 1], &streams[i + 1], b, 0)?;
        }
        Ok(())
    }));
    assert!(m.contains("from rank 0 to rank 1") && m.contains("does not receive"), "{m}");
    // A rank of another process cannot be blocking.
    let r = Communicator::init_rank(&devices[0], n, 0, &UniqueId::new().expect("id"), blocking());
    assert!(matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("blocking")), "{r:?}");
    // Nothing was issued: the buffers still hold their inputs.
    for (r, b) in bufs.iter().enumerate() {
        assert_eq!(streams[r].to_vec(b).expect("read"), input(r, N), "rank {r}");
    }
    t.finish();
}

#[test]
fn a_split_clique_reduces_over_its_own_ranks() {
    let t = ctx(0x3103);
    let Some((devices, comms, streams)) = clique(CommOptions::default()) else { return };
    let n = devices.len();
    // Even and odd ranks; the last rank joins none when there are 3 or more.
    let colors: Vec<Option<u32>> =
        (0..n).map(|r| if n > 2 && r == n - 1 { None } else { Some(r as u32 % 2) }).collect();
    let subs = Communicator::split_all(&comms, &colors).expect("split");
    for (r, (sub, color)) in subs.iter().zip(&colors).enumerate() {
        let members: Vec<usize> = (0..n).filter(|&q| colors[q].is_some() && colors[q] == *color).collect();
        match (sub, color) {
            (Some(c), Some(_)) => {
                assert_eq!(c.size(), members.len(), "rank {r}'s sub-clique");
                assert_eq!(c.rank(), members.iter().position(|&q| q == r).expect("member"), "rank {r}");
                assert_eq!(c.device().ordinal(), devices[r].ordinal());
            }
            (None, None) => {}
            other => panic!("rank {r}: {other:?}"),
        }
    }
    let mut bufs: Vec<DeviceBuffer<f32>> = streams
        .iter()
        .enumerate()
        .map(|(r, s)| DeviceBuffer::from_slice(s, &input(r, N)).expect("buf"))
        .collect();
    nccl::group(|g| {
        for ((c, s), b) in subs.iter().zip(&streams).zip(bufs.iter_mut()) {
            if let Some(c) = c {
                g.all_reduce_in_place(c, s, b, ReduceOp::Sum)?;
            }
        }
        Ok(())
    })
    .expect("all-reduce in each sub-clique");
    for (r, b) in bufs.iter().enumerate() {
        let want: Vec<f32> = match colors[r] {
            Some(c) => (0..N)
                .map(|i| (0..n).filter(|&q| colors[q] == Some(c)).map(|q| input(q, N)[i]).sum())
                .collect(),
            None => input(r, N),
        };
        assert_eq!(streams[r].to_vec(b).expect("read"), want, "rank {r}");
    }
    // Splitting part of a clique, or with a colour NCCL cannot take.
    let r = Communicator::split_all(&comms[1..], &colors[1..]);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let r = Communicator::split_all(&comms, &vec![Some(u32::MAX); n]);
    assert!(matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("colour")), "{r:?}");
    let r = comms[0].split(Some(0), 0);
    assert!(matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("split_all")), "{r:?}");
    t.finish();
}

#[test]
fn all_to_all_and_broadcast_out_of_place_are_exact() {
    let t = ctx(0x3104);
    let Some((devices, comms, streams)) = clique(CommOptions::default()) else { return };
    let n = devices.len();
    let block = 96;
    let send: Vec<DeviceBuffer<f32>> = streams
        .iter()
        .enumerate()
        .map(|(r, s)| DeviceBuffer::from_slice(s, &input(r, block * n)).expect("send"))
        .collect();
    let mut recv: Vec<DeviceBuffer<f32>> =
        streams.iter().map(|s| DeviceBuffer::zeroed(s, block * n).expect("recv")).collect();
    nccl::group(|g| {
        for (((c, s), x), y) in comms.iter().zip(&streams).zip(&send).zip(recv.iter_mut()) {
            g.all_to_all(c, s, x, y)?;
        }
        Ok(())
    })
    .expect("all-to-all");
    for (j, y) in recv.iter().enumerate() {
        let want: Vec<f32> =
            (0..n).flat_map(|i| input(i, block * n)[j * block..(j + 1) * block].to_vec()).collect();
        assert_eq!(streams[j].to_vec(y).expect("read"), want, "all-to-all on rank {j}");
    }
    // Not a whole block per rank.
    let mut odd = DeviceBuffer::<f32>::zeroed(&streams[0], block * n + 1).expect("odd");
    let odd_send = DeviceBuffer::<f32>::zeroed(&streams[0], block * n + 1).expect("odd send");
    let r = nccl::group(|g| g.all_to_all(&comms[0], &streams[0], &odd_send, &mut odd));
    assert!(matches!(r, Err(Error::LengthMismatch { .. })), "{r:?}");

    // Broadcast from the last rank, out of place: its `send` is only read.
    let root = n - 1;
    nccl::group(|g| {
        for (r, ((c, s), y)) in comms.iter().zip(&streams).zip(recv.iter_mut()).enumerate() {
            g.broadcast(c, s, (r == root).then_some(&send[r]), y, root)?;
        }
        Ok(())
    })
    .expect("broadcast");
    for (r, y) in recv.iter().enumerate() {
        assert_eq!(streams[r].to_vec(y).expect("read"), input(root, block * n), "broadcast on rank {r}");
    }
    assert_eq!(streams[root].to_vec(&send[root]).expect("read"), input(root, block * n), "the root's send");
    // A send buffer on a rank that is not the root, and none on the root.
    let r = nccl::group(|g| g.broadcast(&comms[0], &streams[0], Some(&send[0]), &mut recv[0], root));
    assert!(matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("not the root")), "{r:?}");
    let none: Option<&DeviceBuffer<f32>> = None;
    let r = nccl::group(|g| g.broadcast(&comms[root], &streams[root], none, &mut recv[root], root));
    assert!(matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("needs a send buffer")), "{r:?}");
    t.finish();
}

/// Reduce to one root: the root's `recv` is the sum and is written by the
/// collective, so a read on another stream of its device is ordered after
/// it with no wait written (the race oracle watching); every rank's `send`
/// is only read; a receive buffer on a rank that is not the root is
/// refused, as is none on the root.
#[test]
fn reduce_writes_the_roots_buffer_and_orders_a_read_on_another_stream() {
    let t = ctx(0x3105);
    let Some((devices, comms, streams)) = clique(CommOptions::default()) else { return };
    let n = devices.len();
    let root = n - 1;
    let send: Vec<DeviceBuffer<f32>> = streams
        .iter()
        .enumerate()
        .map(|(r, s)| DeviceBuffer::from_slice(s, &input(r, N)).expect("send"))
        .collect();
    let mut out = DeviceBuffer::<f32>::zeroed(&streams[root], N).expect("out");
    let reader = Stream::new(&devices[root]).expect("reader");
    for round in 0..3 {
        let mut root_out = Some(&mut out);
        nccl::group(|g| {
            for (r, ((c, s), x)) in comms.iter().zip(&streams).zip(&send).enumerate() {
                let y = if r == root { root_out.take() } else { None };
                g.reduce(c, s, x, y, ReduceOp::Sum, root)?;
            }
            Ok(())
        })
        .expect("reduce");
        let want: Vec<f32> = (0..N).map(|i| (0..n).map(|r| input(r, N)[i]).sum()).collect();
        assert_eq!(reader.to_vec(&out).expect("read"), want, "round {round}: the root's sum");
    }
    for (r, x) in send.iter().enumerate() {
        assert_eq!(streams[r].to_vec(x).expect("read"), input(r, N), "rank {r}'s send is only read");
    }
    let r = nccl::group(|g| g.reduce(&comms[0], &streams[0], &send[0], Some(&mut out), ReduceOp::Sum, root));
    assert!(matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("not the root")), "{r:?}");
    let none: Option<&mut DeviceBuffer<f32>> = None;
    let r = nccl::group(|g| g.reduce(&comms[root], &streams[root], &send[root], none, ReduceOp::Sum, root));
    assert!(matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("needs a recv buffer")), "{r:?}");
    t.finish();
}
