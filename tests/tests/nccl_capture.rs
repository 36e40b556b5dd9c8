//! NCCL collectives captured into CUDA graphs (issue 30): an NCCL group on
//! every rank's capturing stream is captured, one graph per device
//! (`gpu_sync::capture_each`); launching every rank's graph runs the
//! collective with exact results at every replay, ordered after the kernel
//! captured before it and after eager work on other streams. A group over
//! capturing and non-capturing streams is refused, and one rank's graph
//! launched alone is an error after the simulator's peer timeout, not a
//! hang (its peer's late launch still completes it).
//!
//! On the simulator the machine has four devices (unless
//! `CUDA_SIM_DEVICES` says otherwise) and each test runs over two and four
//! of them, with the race oracle checking every ordering; on a GPU the
//! data is checked.

use gpu_sync::nccl::{self, Communicator, ReduceOp};
use gpu_sync::{Device, DeviceBuffer, Error, GraphExec, Stream, capture_each};
use kernels::Kernels;
use sync_tests::{Ctx, on_sim};

const N: usize = 1 << 10;
/// Launches of each graph.
const LAUNCHES: u32 = 4;

/// Picks the driver and, on the simulator, a machine of four devices unless
/// `CUDA_SIM_DEVICES` is set (before the first `cuInit` of the process:
/// every test comes here first); then opens a session.
fn ctx(seed: u64) -> Ctx {
    static MACHINE: std::sync::Once = std::sync::Once::new();
    MACHINE.call_once(|| {
        if on_sim() && std::env::var_os(cuda_sim::DEVICES_ENV).is_none() {
            let config = cuda_sim::Config { devices: 4, ..cuda_sim::Config::default() };
            if let Err(e) = cuda_sim::configure(config) {
                panic!("a machine of four simulated devices: {e}");
            }
        }
    });
    sync_tests::ctx(seed)
}

/// One rank per device of the first `n`: devices, communicators, a stream
/// each; `None` (and a note) when the machine has fewer.
fn clique(n: usize) -> Option<(Vec<Device>, Vec<Communicator>, Vec<Stream>)> {
    let devices = Device::all().expect("devices");
    if devices.len() < n {
        eprintln!("{} device(s), {n} needed", devices.len());
        return None;
    }
    let devices = devices[..n].to_vec();
    let comms = Communicator::init_all(&devices).expect("communicators");
    let streams = devices.iter().map(|d| Stream::new(d).expect("stream")).collect();
    Some((devices, comms, streams))
}

/// Rank `r`'s input: `r * 1000 + i`.
fn input(r: usize) -> Vec<u32> {
    (0..N).map(|i| (r * 1000 + i) as u32).collect()
}

/// Launches every rank's graph on its stream.
fn launch_all(execs: &[GraphExec], streams: &[Stream]) {
    for (e, s) in execs.iter().zip(streams) {
        e.launch(s).expect("cuGraphLaunch");
    }
}

/// Each rank's send buffer (its input) and a zeroed receive buffer.
fn buffers(streams: &[Stream]) -> (Vec<DeviceBuffer<u32>>, Vec<DeviceBuffer<u32>>) {
    let send = streams
        .iter()
        .enumerate()
        .map(|(r, s)| DeviceBuffer::from_slice(s, &input(r)).expect("send"))
        .collect();
    let recv = streams.iter().map(|s| DeviceBuffer::zeroed(s, N).expect("recv")).collect();
    (send, recv)
}

/// A captured all-reduce over `n` ranks, each graph bumping its send buffer
/// by a kernel first: launch `i` sums `input(r) + i` over the ranks, and a
/// kernel on another stream that bumps the send buffers by 100 before the
/// third launch is ordered before it too.
fn all_reduce_replays(n: usize) {
    let Some((devices, comms, streams)) = clique(n) else { return };
    let ks: Vec<Kernels> = devices.iter().map(|d| Kernels::load(d).expect("kernels")).collect();
    let others: Vec<Stream> = devices.iter().map(|d| Stream::new(d).expect("other")).collect();
    let (mut send, mut recv) = buffers(&streams);
    let graphs = capture_each(&streams, || {
        for ((k, s), b) in ks.iter().zip(&streams).zip(send.iter_mut()) {
            k.bump(s, b, 1)?;
        }
        nccl::group(|g| {
            for (((c, s), x), y) in comms.iter().zip(&streams).zip(&send).zip(recv.iter_mut()) {
                g.all_reduce(c, s, x, y, ReduceOp::Sum)?;
            }
            Ok(())
        })
    })
    .expect("capturing the all-reduce on every device's stream");
    assert_eq!(graphs.len(), n);
    // Nothing ran while captured.
    assert_eq!(others[0].to_vec(&recv[0]).expect("recv"), vec![0; N]);
    let execs: Vec<GraphExec> = graphs.iter().map(|g| g.instantiate().expect("instantiate")).collect();
    let mut extra = 0u32;
    for i in 1..=LAUNCHES {
        if i == 3 {
            // Eager kernels on other streams: each launch must wait for them.
            for ((k, s), b) in ks.iter().zip(&others).zip(send.iter_mut()) {
                k.bump(s, b, 100).expect("bump on another stream");
            }
            extra = 100;
        }
        launch_all(&execs, &streams);
        let want: Vec<u32> = (0..N)
            .map(|j| (0..n).map(|r| (r * 1000 + j) as u32 + i + extra).fold(0u32, u32::wrapping_add))
            .collect();
        for (r, (s, y)) in others.iter().zip(&recv).enumerate() {
            assert_eq!(s.to_vec(y).expect("read recv"), want, "rank {r} after launch {i}");
        }
    }
}

#[test]
fn a_captured_all_reduce_is_exact_at_every_launch_on_two_and_four_devices() {
    let t = ctx(0x3101);
    all_reduce_replays(2);
    all_reduce_replays(4);
    t.finish();
}

/// A captured ring of sends and receives over `n` ranks: each rank bumps
/// its send buffer, then sends it to the next rank and receives from the
/// previous one.
fn ring_replays(n: usize) {
    let Some((devices, comms, streams)) = clique(n) else { return };
    let ks: Vec<Kernels> = devices.iter().map(|d| Kernels::load(d).expect("kernels")).collect();
    let (mut send, mut recv) = buffers(&streams);
    let graphs = capture_each(&streams, || {
        for ((k, s), b) in ks.iter().zip(&streams).zip(send.iter_mut()) {
            k.bump(s, b, 1)?;
        }
        nccl::group(|g| {
            for (r, ((c, s), (x, y))) in
                comms.iter().zip(&streams).zip(send.iter().zip(recv.iter_mut())).enumerate()
            {
                g.send(c, s, x, (r + 1) % n)?;
                g.recv(c, s, y, (r + n - 1) % n)?;
            }
            Ok(())
        })
    })
    .expect("capturing the ring on every device's stream");
    let execs: Vec<GraphExec> = graphs.iter().map(|g| g.instantiate().expect("instantiate")).collect();
    for i in 1..=LAUNCHES {
        launch_all(&execs, &streams);
        for (r, y) in recv.iter().enumerate() {
            let from = (r + n - 1) % n;
            let want: Vec<u32> = input(from).iter().map(|v| v + i).collect();
            let got = streams[r].to_vec(y).expect("read recv");
            assert_eq!(got, want, "rank {r} after launch {i}");
        }
    }
}

#[test]
fn a_captured_send_recv_ring_is_exact_at_every_launch_on_two_and_four_devices() {
    let t = ctx(0x3102);
    ring_replays(2);
    ring_replays(4);
    t.finish();
}

#[test]
fn a_group_over_capturing_and_non_capturing_streams_is_refused() {
    let t = ctx(0x3103);
    let Some((_, comms, streams)) = clique(2) else { return };
    let mut bufs: Vec<DeviceBuffer<u32>> = streams
        .iter()
        .enumerate()
        .map(|(r, s)| DeviceBuffer::from_slice(s, &input(r)).expect("buf"))
        .collect();
    // Stream 0 captures, stream 1 does not.
    let mut refused = None;
    let graph = streams[0]
        .capture(|_| {
            refused = Some(nccl::group(|g| {
                for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
                    g.all_reduce_in_place(c, s, b, ReduceOp::Sum)?;
                }
                Ok(())
            }));
            Ok(())
        })
        .expect("the capture itself ends");
    match refused {
        Some(Err(Error::Capturing { op })) => {
            assert!(op.contains("some of which capture"), "the refusal names the rule: {op}")
        }
        other => panic!("expected the mixed group refused, got {other:?}"),
    }
    // Nothing was captured or issued: the graph is empty, and an eager
    // group afterwards pairs its ranks as the first collective.
    assert_eq!(graph.node_count().expect("nodes"), 0);
    nccl::group(|g| {
        for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
            g.all_reduce_in_place(c, s, b, ReduceOp::Sum)?;
        }
        Ok(())
    })
    .expect("an eager group after the refusal");
    let want: Vec<u32> = (0..N).map(|j| (j as u32) * 2 + 1000).collect();
    for (s, b) in streams.iter().zip(&bufs) {
        assert_eq!(s.to_vec(b).expect("read"), want);
    }
    t.finish();
}

#[test]
fn one_ranks_graph_launched_alone_is_an_error_not_a_hang() {
    let t = ctx(0x3104);
    let Some((_, comms, streams)) = clique(2) else { return };
    let mut bufs: Vec<DeviceBuffer<u32>> = streams
        .iter()
        .enumerate()
        .map(|(r, s)| DeviceBuffer::from_slice(s, &input(r)).expect("buf"))
        .collect();
    let graphs = capture_each(&streams, || {
        nccl::group(|g| {
            for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
                g.all_reduce_in_place(c, s, b, ReduceOp::Sum)?;
            }
            Ok(())
        })
    })
    .expect("capture");
    let execs: Vec<GraphExec> = graphs.iter().map(|g| g.instantiate().expect("instantiate")).collect();
    execs[0].launch(&streams[0]).expect("rank 0's launch is queued");
    if t.sim() {
        // Rank 1's graph is never launched: the wait fails after the
        // simulator's peer timeout with a report, instead of hanging.
        let start = std::time::Instant::now();
        let r = streams[0].synchronize();
        assert!(r.is_err(), "a collective whose peer never came completed: {r:?}");
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "after {:?}", start.elapsed());
        let reports = t.session.as_ref().map(|s| s.deadlocks()).unwrap_or_default();
        assert!(reports.iter().any(|d| d.contains("never")), "{reports:?}");
    }
    // The peer's late launch completes the collective.
    execs[1].launch(&streams[1]).expect("rank 1's launch");
    let want: Vec<u32> = (0..N).map(|j| (j as u32) * 2 + 1000).collect();
    for (s, b) in streams.iter().zip(&bufs) {
        assert_eq!(s.to_vec(b).expect("read after both launches"), want);
    }
    t.finish();
}
