//! Blocking communicators with one rank per process (issue 30): made only
//! with NCCL's connections at init (`NCCL_RUNTIME_CONNECT=0`), collectives
//! exact through them, and the operations that could wait for another
//! process on the host refused before anything is issued — sends,
//! receives, all-to-all, a split.
//!
//! The ranks are two threads of this process, each making its rank with
//! `Communicator::init_rank` (on the simulator, and on a GPU host with two
//! devices or more). One test in this binary: it sets the environment
//! before any other thread runs.

use gpu_sync::nccl::{self, CommOptions, Communicator, ReduceOp, UniqueId};
use gpu_sync::{Device, DeviceBuffer, Error, Stream};
use sync_tests::ctx;

const N: usize = 1 << 10;

fn blocking() -> CommOptions {
    CommOptions { blocking: true, timeout: std::time::Duration::from_secs(30) }
}

fn refusal(r: Result<impl std::fmt::Debug, Error>) -> String {
    match r {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// Rank `rank` of two on `device`: an all-reduce per round, exact; then the
/// refusals. Returns what rank 0 reads.
fn rank_main(device: Device, rank: usize, id: &UniqueId) -> Vec<f32> {
    let comm = Communicator::init_rank(&device, 2, rank, id, blocking()).expect("a blocking rank");
    assert_eq!((comm.rank(), comm.size()), (rank, 2));
    let stream = Stream::new(&device).expect("stream");
    let mine: Vec<f32> = (0..N).map(|i| (rank * 1000 + i) as f32).collect();
    let mut buf = DeviceBuffer::from_slice(&stream, &mine).expect("buffer");
    let want: Vec<f32> = (0..N).map(|i| (i + (1000 + i)) as f32).collect();
    let mut out = Vec::new();
    for round in 0..3 {
        let mut x = DeviceBuffer::from_slice(&stream, &mine).expect("input");
        nccl::group(|g| g.all_reduce_in_place(&comm, &stream, &mut x, ReduceOp::Sum)).expect("all-reduce");
        out = stream.to_vec(&x).expect("read");
        assert_eq!(out, want, "rank {rank}, round {round}");
    }
    // Point to point could wait for the other process on the host: refused.
    let peer = 1 - rank;
    let m = refusal(nccl::group(|g| g.send(&comm, &stream, &buf, peer)));
    assert!(m.contains("blocking communicator with ranks in other processes"), "{m}");
    let m = refusal(nccl::group(|g| g.recv(&comm, &stream, &mut buf, peer)));
    assert!(m.contains("sends or receives"), "{m}");
    let m = refusal(comm.split(Some(0), 0).map(|_| ()));
    assert!(m.contains("split a non-blocking one"), "{m}");
    // Nothing was issued: the buffer still holds the input.
    assert_eq!(stream.to_vec(&buf).expect("read"), mine, "rank {rank}");
    out
}

#[test]
fn a_blocking_rank_per_process_needs_connections_at_init_and_reduces_exactly() {
    let t = ctx(0x3120);
    let devices = Device::all().expect("devices");
    if devices.len() < 2 {
        eprintln!("{} device(s): a collective needs two", devices.len());
        return;
    }
    let id = UniqueId::new().expect("ncclGetUniqueId");
    // Without NCCL_RUNTIME_CONNECT=0: refused, naming the variable, before
    // NCCL is called (rank 0 alone would otherwise wait for rank 1).
    assert!(std::env::var_os("NCCL_RUNTIME_CONNECT").is_none(), "run this test without NCCL_RUNTIME_CONNECT");
    let m = refusal(Communicator::init_rank(&devices[0], 2, 0, &id, blocking()));
    assert!(m.contains("NCCL_RUNTIME_CONNECT=0") && m.contains("it is not set"), "{m}");
    // SAFETY: no other thread of this process reads or writes the
    // environment now: this binary's only test, before it starts a thread.
    unsafe { std::env::set_var("NCCL_RUNTIME_CONNECT", "0") };
    let id = UniqueId::new().expect("ncclGetUniqueId");
    let reads = std::thread::scope(|s| {
        let ranks: Vec<_> = devices[..2]
            .iter()
            .enumerate()
            .map(|(r, d)| {
                let (d, id) = (d.clone(), &id);
                s.spawn(move || rank_main(d, r, id))
            })
            .collect();
        ranks.into_iter().map(|h| h.join().expect("a rank panicked")).collect::<Vec<_>>()
    });
    assert_eq!(reads[0], reads[1]);
    t.finish();
}
