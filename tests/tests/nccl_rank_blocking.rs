//! Blocking communicators with one rank per process (issue 30): made only
//! with NCCL's connections at init (`NCCL_RUNTIME_CONNECT=0`), and only one
//! blocking rank of a clique per process. Both refusals come before NCCL is
//! asked to wait for anything.
//!
//! The collectives through such ranks run one process per GPU
//! (`gpu-bench nccl --procs N --blocking` on GPUs: cuda-sim's NCCL joins no
//! other process); their group rules are tested in gpu-sync's
//! `nccl::group` unit tests. One test in this binary: it sets the
//! environment before any other thread runs.

use gpu_sync::nccl::{CommOptions, Communicator, UniqueId};
use gpu_sync::{Device, Error};
use std::time::{Duration, Instant};
use sync_tests::ctx;

fn blocking(timeout: Duration) -> CommOptions {
    CommOptions { blocking: true, timeout }
}

fn refusal(r: Result<Communicator, Error>) -> String {
    match r {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn a_blocking_rank_needs_connections_at_init_and_a_process_of_its_own() {
    let t = ctx(0x3120);
    let devices = Device::all().expect("devices");
    if devices.len() < 2 {
        eprintln!("{} device(s): a clique needs two", devices.len());
        return;
    }
    let id = UniqueId::new().expect("ncclGetUniqueId");
    // Without NCCL_RUNTIME_CONNECT=0: refused, naming the variable, before
    // NCCL is called (rank 0 alone would otherwise wait for rank 1).
    assert!(std::env::var_os("NCCL_RUNTIME_CONNECT").is_none(), "run this test without NCCL_RUNTIME_CONNECT");
    let start = Instant::now();
    let m = refusal(Communicator::init_rank(&devices[0], 2, 0, &id, blocking(Duration::from_secs(60))));
    assert!(m.contains("NCCL_RUNTIME_CONNECT=0") && m.contains("it is not set"), "{m}");
    assert!(start.elapsed() < Duration::from_secs(10), "refused at once, not after a wait");
    // SAFETY: no other thread of this process reads or writes the
    // environment now: this binary's only test, before it starts a thread.
    unsafe { std::env::set_var("NCCL_RUNTIME_CONNECT", "0") };
    // With it: rank 0 alone joins, and times out waiting for rank 1 (the
    // non-blocking join keeps the timeout).
    let id = UniqueId::new().expect("ncclGetUniqueId");
    let r = Communicator::init_rank(&devices[0], 2, 0, &id, blocking(Duration::from_secs(2)));
    assert!(matches!(r, Err(Error::NcclTimeout { .. })), "{r:?}");
    // A second blocking rank of that clique in this process: refused.
    let m = refusal(Communicator::init_rank(&devices[1], 2, 1, &id, blocking(Duration::from_secs(60))));
    assert!(m.contains("already made a blocking rank of this clique"), "{m}");
    t.finish();
}
