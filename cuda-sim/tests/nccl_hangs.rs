//! NCCL's hangs in the simulated NCCL: two communicators issued in
//! opposite orders on two devices reported as a deadlock (and the same
//! order not), and a clique's first collective, which connects its ranks:
//! a rank's first one made alone waits for the others' (blocking) or stays
//! in progress (non-blocking). Its own test binary: it runs eight
//! simulated devices.

mod common;
mod nccl_rig;
use common::*;
use cuda_sys::nccl::{Nccl, NcclError, result as nr};
use cuda_sys::nccl_bindings::{ncclComm_t, ncclDataType_t as T, ncclRedOp_t as O, ncclResult_t};
use nccl_rig::*;

/// Two blocking cliques over devices 0 and 1, each connected by a first
/// collective of every rank in one group (NCCL's connections: a blocking
/// rank's first collective alone would wait on the host for the other's),
/// and an in-place buffer of 16 ints per device, rank r holding r + 1.
fn two_connected_cliques(n: &Nccl, rig: &Rig) -> (Vec<ncclComm_t>, Vec<ncclComm_t>, Vec<CUdeviceptr>) {
    let (a, b) = (init_all(n, 2), init_all(n, 2));
    all_reduce_case(n, rig, &a, T::ncclInt32, O::ncclSum);
    all_reduce_case(n, rig, &b, T::ncclInt32, O::ncclSum);
    let bufs = rank_ints(rig, &[0, 1], 16);
    (a, b, bufs)
}

#[test]
fn two_communicators_issued_in_opposite_orders_are_reported_as_a_deadlock() {
    eight_devices();
    let _serial = serial();
    let e = env(0x30_40);
    let n = nccl();
    let rig = Rig::new(2);
    let (a, b, bufs) = two_connected_cliques(n, &rig);
    let issue = |comm: ncclComm_t, r: usize| all_reduce_alone(n, &rig, comm, r, bufs[r], 16).unwrap();
    // Device 0: A then B. Device 1: B then A. Each waits for the other.
    issue(a[0], 0);
    issue(b[0], 0);
    issue(b[1], 1);
    issue(a[1], 1);
    let t0 = std::time::Instant::now();
    let r = stream::synchronize(&rig.streams[0]);
    assert_eq!(code(r), CUresult::CUDA_ERROR_LAUNCH_TIMEOUT);
    assert!(t0.elapsed() < std::time::Duration::from_secs(2), "{:?}", t0.elapsed());
    let found = e.session.deadlocks();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("deadlock"), "{found:?}");
    for c in [a[0], a[1], b[0], b[1]] {
        // SAFETY: live communicators.
        let s = unsafe { nr::comm_get_async_error(n, c) }.unwrap();
        assert_eq!(s, ncclResult_t::ncclInvalidUsage);
    }
    // Aborting one communicator cancels its collectives: the streams move on.
    for c in a {
        // SAFETY: live communicators, not used afterwards.
        unsafe { nr::comm_abort(n, c) }.unwrap();
    }
    rig.sync();
    destroy(n, &b);
    assert_eq!(rig.read(bufs[0], 64), encode(T::ncclInt32, &[3; 16]), "B still ran");
    for p in bufs {
        free(p);
    }
    drop(rig);
    teardown(e);
}

#[test]
fn the_same_order_on_both_devices_does_not_deadlock() {
    eight_devices();
    let _serial = serial();
    let e = env(0x30_41);
    let n = nccl();
    let rig = Rig::new(2);
    let (a, b, bufs) = two_connected_cliques(n, &rig);
    for r in 0..2 {
        for comm in [a[r], b[r]] {
            all_reduce_alone(n, &rig, comm, r, bufs[r], 16).unwrap();
        }
    }
    rig.sync();
    assert!(e.session.deadlocks().is_empty());
    assert_eq!(rig.read(bufs[1], 64), encode(T::ncclInt32, &[6; 16]), "(1+2), twice summed");
    destroy(n, &a);
    destroy(n, &b);
    for p in bufs {
        free(p);
    }
    drop(rig);
    teardown(e);
}

#[test]
fn a_ranks_first_collective_alone_waits_for_the_other_ranks_first_ones() {
    // NCCL connects a clique's ranks on their first collective: a rank's
    // first one made alone, from a thread that has not issued the others',
    // waits on the host (blocking) or stays in progress (non-blocking).
    eight_devices();
    let _serial = serial();
    let e = env(0x30_70);
    let n = nccl();
    let rig = Rig::new(2);
    let bufs = rank_ints(&rig, &[0, 1], 4);

    // Non-blocking: in progress until rank 1 issues its first collective.
    let comms = nonblocking_clique(n, 2);
    // SAFETY: live communicator; every rank joined.
    assert_eq!(unsafe { nr::comm_get_async_error(n, comms[0]) }, Ok(ncclResult_t::ncclSuccess));
    assert_eq!(
        all_reduce_alone(n, &rig, comms[0], 0, bufs[0], 4),
        Err(NcclError::InProgress { call: "ncclAllReduce" })
    );
    // SAFETY: a live communicator.
    assert_eq!(unsafe { nr::comm_get_async_error(n, comms[0]) }, Ok(ncclResult_t::ncclInProgress));
    // SAFETY: a live communicator.
    assert_eq!(unsafe { nr::comm_get_async_error(n, comms[1]) }, Ok(ncclResult_t::ncclSuccess), "unused");
    // The last rank's first collective completes the connection (NCCL may
    // report it in progress until its own part of it is done).
    let last = all_reduce_alone(n, &rig, comms[1], 1, bufs[1], 4);
    assert!(matches!(last, Ok(()) | Err(NcclError::InProgress { .. })), "{last:?}");
    for c in &comms {
        // SAFETY: live communicators.
        assert_eq!(unsafe { nr::comm_get_async_error(n, *c) }, Ok(ncclResult_t::ncclSuccess), "connected");
    }
    // Connected: a call alone only enqueues.
    assert_eq!(all_reduce_alone(n, &rig, comms[0], 0, bufs[0], 4), Ok(()));
    assert_eq!(all_reduce_alone(n, &rig, comms[1], 1, bufs[1], 4), Ok(()));
    rig.sync();
    assert_eq!(rig.read(bufs[0], 16), encode(T::ncclInt32, &[6; 4]), "(1 + 2) summed twice");
    destroy(n, &comms);

    // Blocking: rank 0's first call returns once another thread has issued
    // rank 1's; later calls alone do not wait.
    let comms = init_all(n, 2);
    let session = &e.session;
    let (c1, b1) = (comms[1] as usize, bufs[1]);
    let waited = std::thread::scope(|s| {
        let peer = s.spawn(|| {
            let _in = session.enter();
            on(1);
            std::thread::sleep(std::time::Duration::from_millis(200));
            all_reduce_alone(n, &rig, c1 as ncclComm_t, 1, b1, 4)
        });
        on(0);
        let t0 = std::time::Instant::now();
        let r = all_reduce_alone(n, &rig, comms[0], 0, bufs[0], 4);
        let waited = t0.elapsed();
        assert_eq!(r, Ok(()));
        assert_eq!(peer.join().unwrap(), Ok(()));
        waited
    });
    assert!(waited >= std::time::Duration::from_millis(150), "rank 0 returned after {waited:?}");
    let t0 = std::time::Instant::now();
    assert_eq!(all_reduce_alone(n, &rig, comms[0], 0, bufs[0], 4), Ok(()));
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(1),
        "a connected call alone waited {:?}",
        t0.elapsed()
    );
    on(1);
    assert_eq!(all_reduce_alone(n, &rig, comms[1], 1, bufs[1], 4), Ok(()));
    rig.sync();
    assert_eq!(rig.read(bufs[1], 16), encode(T::ncclInt32, &[24; 4]), "6 summed twice more");
    destroy(n, &comms);
    for p in bufs {
        free(p);
    }
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    drop(rig);
    teardown(e);
}

/// The result code of a failed NCCL call.
fn failed(r: Result<(), NcclError>) -> Option<ncclResult_t> {
    match r {
        Err(NcclError::Failed { result, .. }) => Some(result),
        _ => None,
    }
}

#[test]
fn a_connection_that_cannot_complete_fails_and_stays_failed() {
    eight_devices();
    let _serial = serial();
    let e = env(0x30_71);
    let n = nccl();
    let rig = Rig::new(2);
    let bufs = rank_ints(&rig, &[0, 1], 4);

    // Blocking: rank 1 never issues; rank 0's first collective alone times
    // out, and the failure stays: its next call fails at once.
    let comms = init_all(n, 2);
    let t0 = std::time::Instant::now();
    let r = all_reduce_alone(n, &rig, comms[0], 0, bufs[0], 4);
    assert_eq!(failed(r.clone()), Some(ncclResult_t::ncclSystemError), "{r:?}");
    assert!(t0.elapsed() >= cuda_sim::nccl::PEER_TIMEOUT, "returned after {:?}", t0.elapsed());
    let t0 = std::time::Instant::now();
    let again = all_reduce_alone(n, &rig, comms[0], 0, bufs[0], 4);
    assert_eq!(failed(again.clone()), Some(ncclResult_t::ncclSystemError), "{again:?}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(1), "the second call waited {:?}", t0.elapsed());
    for c in &comms {
        // SAFETY: live communicators, not used afterwards; the abort cancels
        // rank 0's queued part.
        unsafe { nr::comm_abort(n, *c) }.unwrap();
    }
    rig.sync();

    // Non-blocking: rank 1 is destroyed before its first collective, so
    // rank 0 can never connect and says so.
    let comms = nonblocking_clique(n, 2);
    assert_eq!(
        all_reduce_alone(n, &rig, comms[0], 0, bufs[0], 4),
        Err(NcclError::InProgress { call: "ncclAllReduce" })
    );
    // SAFETY: a live communicator, not used afterwards.
    unsafe { nr::comm_destroy(n, comms[1]) }.unwrap();
    // SAFETY: a live communicator.
    assert_eq!(unsafe { nr::comm_get_async_error(n, comms[0]) }, Ok(ncclResult_t::ncclRemoteError));
    // SAFETY: as above: the error stays.
    assert_eq!(unsafe { nr::comm_get_async_error(n, comms[0]) }, Ok(ncclResult_t::ncclRemoteError));
    // SAFETY: a live communicator, not used afterwards; cancels its part.
    unsafe { nr::comm_abort(n, comms[0]) }.unwrap();
    rig.sync();
    for p in bufs {
        free(p);
    }
    drop(rig);
    teardown(e);
}
