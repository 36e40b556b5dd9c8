//! The simulated NCCL through cuda-sys's per-call layer
//! (`cuda_sys::nccl::result`) and the raw driver table: exact results of
//! every collective for every element kind over 2, 3, 4 and 8 devices,
//! communicators made every way, the planted bugs the race oracle must flag
//! (and their correct twins clean), and the link model's bound on a
//! collective's time (NCCL's hangs: `nccl_hangs.rs`). Its own test binary:
//! it runs eight simulated devices.

mod common;
mod nccl_rig;
use common::*;
use cuda_sim::RaceKind;
use cuda_sys::nccl::{Nccl, NcclError, result as nr};
use cuda_sys::nccl_bindings::{
    NCCL_CONFIG_INITIALIZER, ncclComm_t, ncclDataType_t as T, ncclRedOp_t as O, ncclResult_t,
};
use nccl_rig::*;
use std::ffi::c_void;

#[test]
fn all_reduce_is_exact_for_every_kind_and_operator_on_2_3_4_and_8_devices() {
    eight_devices();
    let _serial = serial();
    let e = env(0x30_01);
    let n = nccl();
    for ranks in [2, 3, 4, 8] {
        let rig = Rig::new(ranks);
        let comms = init_all(n, ranks);
        for ty in KINDS {
            for op in [O::ncclSum, O::ncclProd, O::ncclMin, O::ncclMax, O::ncclAvg] {
                all_reduce_case(n, &rig, &comms, ty, op);
            }
        }
        destroy(n, &comms);
    }
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    teardown(e);
}

/// Broadcast, reduce, all-gather, reduce-scatter and a ring of send/recv
/// over `comms`, for `ty`, checked against the inputs.
fn other_collectives(n: &Nccl, rig: &Rig, comms: &[ncclComm_t], ty: T) {
    let ranks = comms.len();
    let es = size(ty);
    let v = |r: usize, i: usize| value(ty, O::ncclSum, r, i);
    let root = ranks - 1;
    let shard = |r: usize, len: usize| -> Vec<i64> { (0..len).map(|i| v(r, i)).collect() };
    let alloc_in = |r: usize, len: usize| rig.alloc(r as i32, len * es, &encode(ty, &shard(r, len)));
    let alloc_out = |r: usize, len: usize| rig.alloc(r as i32, len * es, &[]);
    let (bs, br): (Vec<_>, Vec<_>) = (0..ranks).map(|r| (alloc_in(r, COUNT), alloc_out(r, COUNT))).unzip();
    let (rs, rr): (Vec<_>, Vec<_>) = (0..ranks).map(|r| (alloc_in(r, COUNT), alloc_out(r, COUNT))).unzip();
    let (gs, gr): (Vec<_>, Vec<_>) =
        (0..ranks).map(|r| (alloc_in(r, COUNT), alloc_out(r, COUNT * ranks))).unzip();
    let (ss, sr): (Vec<_>, Vec<_>) =
        (0..ranks).map(|r| (alloc_in(r, COUNT * ranks), alloc_out(r, COUNT))).unzip();
    let (ps, pr): (Vec<_>, Vec<_>) = (0..ranks).map(|r| (alloc_in(r, COUNT), alloc_out(r, COUNT))).unzip();
    nr::group_start(n).unwrap();
    for r in 0..ranks {
        let (c, s) = (comms[r], rig.raw(r));
        let (next, prev) = ((r + 1) % ranks, (r + ranks - 1) % ranks);
        // SAFETY: live communicators and streams of device r; every buffer
        // on device r of the size each call reads or writes, freed only
        // after the streams synchronize below.
        unsafe {
            nr::broadcast(n, bs[r] as *const c_void, br[r] as *mut c_void, COUNT, ty, root as i32, c, s)
                .unwrap();
            nr::reduce(
                n,
                rs[r] as *const c_void,
                rr[r] as *mut c_void,
                COUNT,
                ty,
                O::ncclSum,
                root as i32,
                c,
                s,
            )
            .unwrap();
            nr::all_gather(n, gs[r] as *const c_void, gr[r] as *mut c_void, COUNT, ty, c, s).unwrap();
            nr::reduce_scatter(n, ss[r] as *const c_void, sr[r] as *mut c_void, COUNT, ty, O::ncclSum, c, s)
                .unwrap();
            nr::send(n, ps[r] as *const c_void, COUNT, ty, next as i32, c, s).unwrap();
            nr::recv(n, pr[r] as *mut c_void, COUNT, ty, prev as i32, c, s).unwrap();
        }
    }
    nr::group_end(n).unwrap();
    rig.sync();
    let sum = |f: &dyn Fn(usize) -> i64| expect(ty, O::ncclSum, &(0..ranks).map(f).collect::<Vec<_>>());
    let gathered: Vec<i64> = (0..ranks).flat_map(|r| shard(r, COUNT)).collect();
    let what = format!("{ty:?} over {ranks}");
    for r in 0..ranks {
        assert_eq!(rig.read(br[r], COUNT * es), encode(ty, &shard(root, COUNT)), "broadcast {what} rank {r}");
        let reduced: Vec<i64> = (0..COUNT).map(|i| sum(&|q| v(q, i))).collect();
        let rr_want = if r == root { encode(ty, &reduced) } else { vec![0; COUNT * es] };
        assert_eq!(rig.read(rr[r], COUNT * es), rr_want, "reduce {what} rank {r}");
        assert_eq!(rig.read(gr[r], COUNT * ranks * es), encode(ty, &gathered), "all-gather {what} rank {r}");
        let block: Vec<i64> = (0..COUNT).map(|i| sum(&|q| v(q, r * COUNT + i))).collect();
        assert_eq!(rig.read(sr[r], COUNT * es), encode(ty, &block), "reduce-scatter {what} rank {r}");
        let from = (r + ranks - 1) % ranks;
        assert_eq!(rig.read(pr[r], COUNT * es), encode(ty, &shard(from, COUNT)), "send/recv {what} rank {r}");
    }
    for p in [bs, br, rs, rr, gs, gr, ss, sr, ps, pr].concat() {
        free(p);
    }
}

#[test]
fn broadcast_reduce_gather_scatter_and_send_recv_are_exact_on_2_3_4_and_8_devices() {
    eight_devices();
    let _serial = serial();
    let e = env(0x30_02);
    let n = nccl();
    for ranks in [2, 3, 4, 8] {
        let rig = Rig::new(ranks);
        let comms = init_all(n, ranks);
        for ty in KINDS {
            other_collectives(n, &rig, &comms, ty);
        }
        destroy(n, &comms);
    }
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    teardown(e);
}

#[test]
fn fp8_and_unknown_kinds_are_refused_as_invalid_arguments() {
    eight_devices();
    let _serial = serial();
    let e = env(0x30_03);
    let n = nccl();
    let rig = Rig::new(2);
    let comms = init_all(n, 2);
    let b = rig.alloc(0, 64, &[]);
    for ty in [T::ncclFloat8e4m3, T::ncclFloat8e5m2, T(99)] {
        // SAFETY: refused before anything is queued.
        let r = unsafe {
            nr::all_reduce(n, b as *const c_void, b as *mut c_void, 4, ty, O::ncclSum, comms[0], rig.raw(0))
        };
        assert_eq!(r.unwrap_err().result(), Some(ncclResult_t::ncclInvalidArgument), "{ty:?}");
    }
    free(b);
    destroy(n, &comms);
    drop(rig);
    teardown(e);
}

/// An all-reduce of 16 f32 on two devices, in a group; `inside` runs
/// between the group's start and its end (on the rank-0 stream).
fn two_rank_all_reduce(
    n: &Nccl,
    rig: &Rig,
    comms: &[ncclComm_t],
    inside: impl FnOnce(),
) -> Vec<(CUdeviceptr, CUdeviceptr)> {
    let bufs: Vec<(CUdeviceptr, CUdeviceptr)> = (0..2)
        .map(|r| (rig.alloc(r, 64, &encode(T::ncclFloat32, &[r as i64 + 1; 16])), rig.alloc(r, 64, &[])))
        .collect();
    nr::group_start(n).unwrap();
    for (r, (s, d)) in bufs.iter().enumerate() {
        // SAFETY: live communicators, streams and 16-float buffers of device r.
        unsafe {
            nr::all_reduce(
                n,
                *s as *const c_void,
                *d as *mut c_void,
                16,
                T::ncclFloat32,
                O::ncclSum,
                comms[r],
                rig.raw(r),
            )
        }
        .unwrap();
    }
    inside();
    nr::group_end(n).unwrap();
    bufs
}

/// Plants one bug (or its correct twin) and returns the races found.
fn planted(seed: u64, plant: impl FnOnce(&Nccl, &Rig, &[ncclComm_t], &Env)) -> Vec<cuda_sim::RaceReport> {
    eight_devices();
    let _serial = serial();
    let e = env(seed);
    let n = nccl();
    let rig = Rig::new(2);
    let comms = init_all(n, 2);
    plant(n, &rig, &comms, &e);
    rig.sync();
    destroy(n, &comms);
    let races = e.session.take_races();
    drop(rig);
    teardown(e);
    races
}

#[test]
fn reading_the_result_on_another_stream_before_the_collective_is_a_race_and_waiting_is_not() {
    for wait in [false, true] {
        let races = planted(0x30_10 + wait as u64, |n, rig, comms, e| {
            let bufs = two_rank_all_reduce(n, rig, comms, || {});
            let other = e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0);
            if wait {
                let ev = e.event(0);
                event::record(&ev, &rig.streams[0]).unwrap();
                stream::wait_event(&other, &ev, 0).unwrap();
            }
            let copy = rig.alloc(0, 64, &[]);
            sim::dtod(copy, bufs[0].1, 64, &other).unwrap();
            stream::synchronize(&other).unwrap();
            rig.sync();
            for (s, d) in bufs {
                free(s);
                free(d);
            }
            free(copy);
        });
        if wait {
            assert!(races.is_empty(), "{races:?}");
        } else {
            assert!(
                races
                    .iter()
                    .any(|r| r.kind == RaceKind::DataRace && r.first.op.contains("ncclAllReduce recvbuff")
                        || r.second.op.contains("ncclAllReduce recvbuff")),
                "{races:?}"
            );
        }
    }
}

#[test]
fn freeing_a_send_buffer_on_another_stream_early_is_flagged_and_on_its_stream_is_not() {
    for same in [false, true] {
        let races = planted(0x30_20 + same as u64, |n, rig, comms, e| {
            let bufs = two_rank_all_reduce(n, rig, comms, || {});
            let other = e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0);
            if same {
                sim::free_async(bufs[0].0, &rig.streams[0]).unwrap();
            } else {
                sim::free_async(bufs[0].0, &other).unwrap();
            }
            stream::synchronize(&other).unwrap();
            rig.sync();
            free(bufs[0].1);
            free(bufs[1].0);
            free(bufs[1].1);
        });
        if same {
            assert!(races.is_empty(), "{races:?}");
        } else {
            assert!(
                races.iter().any(|r| matches!(r.kind, RaceKind::UnorderedFree | RaceKind::UseAfterFree)),
                "{races:?}"
            );
        }
    }
}

#[test]
fn an_event_recorded_inside_a_group_does_not_cover_the_groups_work_and_the_oracle_says_so() {
    // cudarc #575: the event is recorded before ncclGroupEnd queues the
    // collective, so waiting on it and reading the result races with it.
    for after in [false, true] {
        let races = planted(0x30_30 + after as u64, |n, rig, comms, e| {
            let ev = e.event(0);
            let bufs = two_rank_all_reduce(n, rig, comms, || {
                if !after {
                    event::record(&ev, &rig.streams[0]).unwrap();
                }
            });
            if after {
                event::record(&ev, &rig.streams[0]).unwrap();
            }
            let other = e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0);
            stream::wait_event(&other, &ev, 0).unwrap();
            let copy = rig.alloc(0, 64, &[]);
            sim::dtod(copy, bufs[0].1, 64, &other).unwrap();
            stream::synchronize(&other).unwrap();
            rig.sync();
            for (s, d) in bufs {
                free(s);
                free(d);
            }
            free(copy);
        });
        if after {
            assert!(races.is_empty(), "{races:?}");
        } else {
            assert!(races.iter().any(|r| r.kind == RaceKind::DataRace), "{races:?}");
        }
    }
}

/// Sums 4 ints over `comms` (rank r contributes r + 1) and checks each
/// rank's result.
fn check_sum(n: &Nccl, rig: &Rig, comms: &[ncclComm_t], devices: &[i32]) {
    let k = comms.len();
    let bufs = rank_ints(rig, devices, 4);
    nr::group_start(n).unwrap();
    for r in 0..k {
        all_reduce_alone(n, rig, comms[r], devices[r] as usize, bufs[r], 4).unwrap();
    }
    let _ = nr::group_end(n);
    rig.sync();
    let want = (k * (k + 1) / 2) as i64;
    for (r, p) in bufs.into_iter().enumerate() {
        assert_eq!(rig.read(p, 16), encode(T::ncclInt32, &[want; 4]), "rank {r} of {k}");
        free(p);
    }
}

#[test]
fn communicators_by_unique_id_from_one_group_from_threads_and_by_split() {
    eight_devices();
    let _serial = serial();
    let e = env(0x30_50);
    let n = nccl();
    let rig = Rig::new(4);
    // One thread, every rank in a group, non-blocking: the group's end says
    // in progress, then each communicator reports success.
    let comms = nonblocking_clique(n, 4);
    for c in &comms {
        // SAFETY: live communicators.
        assert_eq!(unsafe { nr::comm_get_async_error(n, *c) }, Ok(ncclResult_t::ncclSuccess));
        // SAFETY: as above.
        assert_eq!(unsafe { nr::comm_count(n, *c) }, Ok(4));
    }
    check_sum(n, &rig, &comms, &[0, 1, 2, 3]);
    // Split by parity: two communicators of two ranks, key reverses order.
    let mut halves = vec![std::ptr::null_mut(); 4];
    nr::group_start(n).unwrap();
    for r in 0..4 {
        let mut cfg = NCCL_CONFIG_INITIALIZER;
        // SAFETY: live parent communicator.
        unsafe { nr::comm_split(n, comms[r], r as i32 % 2, -(r as i32), &mut halves[r], &mut cfg) }.unwrap();
    }
    nr::group_end(n).unwrap();
    // SAFETY: live communicators.
    assert_eq!(unsafe { nr::comm_user_rank(n, halves[2]) }, Ok(0), "key -2 comes before key 0");
    // SAFETY: as above.
    assert_eq!(unsafe { nr::comm_count(n, halves[1]) }, Ok(2));
    check_sum(n, &rig, &[halves[2], halves[0]], &[2, 0]);
    destroy(n, &halves);
    destroy(n, &comms);
    // One thread per rank, blocking and non-blocking.
    for blocking in [1, 0] {
        let id = nr::get_unique_id(n).unwrap();
        let session = &e.session;
        let made: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|r| {
                    s.spawn(move || {
                        let _in = session.enter();
                        on(r as i32);
                        let mut cfg = NCCL_CONFIG_INITIALIZER;
                        cfg.blocking = blocking;
                        let mut c = std::ptr::null_mut();
                        // SAFETY: a context is current on this thread.
                        let res = unsafe { nr::comm_init_rank_config(n, &mut c, 3, id, r, &mut cfg) };
                        if blocking == 1 {
                            res.unwrap();
                        } else {
                            assert_eq!(res, Err(NcclError::InProgress { call: "ncclCommInitRankConfig" }));
                        }
                        c as usize
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let comms: Vec<ncclComm_t> = made.into_iter().map(|c| c as ncclComm_t).collect();
        for c in &comms {
            // SAFETY: live communicators; every rank has joined.
            assert_eq!(unsafe { nr::comm_get_async_error(n, *c) }, Ok(ncclResult_t::ncclSuccess));
        }
        on(0);
        check_sum(n, &rig, &comms, &[0, 1, 2]);
        destroy(n, &comms);
    }
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    drop(rig);
    teardown(e);
}

#[test]
fn a_collective_never_beats_the_modelled_link() {
    eight_devices();
    let _serial = serial();
    let e = env(0x30_60);
    let n = nccl();
    let ranks = 4;
    let rig = Rig::new(ranks);
    let comms = init_all(n, ranks);
    let bytes = 1 << 20;
    let bufs: Vec<CUdeviceptr> = (0..ranks).map(|r| rig.alloc(r, bytes, &[])).collect();
    let (start, end) = (e.event(0), e.event(0));
    event::record(&start, &rig.streams[0]).unwrap();
    nr::group_start(n).unwrap();
    for r in 0..ranks as usize {
        // SAFETY: live communicator and stream of device r; a 1 MiB buffer there.
        unsafe {
            nr::all_reduce(
                n,
                bufs[r] as *const c_void,
                bufs[r] as *mut c_void,
                bytes / 4,
                T::ncclFloat32,
                O::ncclSum,
                comms[r],
                rig.raw(r),
            )
        }
        .unwrap();
    }
    nr::group_end(n).unwrap();
    event::record(&end, &rig.streams[0]).unwrap();
    rig.sync();
    let ms = event::elapsed_time(&start, &end).unwrap() as f64;
    let ns = ms * 1e6;
    // nccl-tests' bus bandwidth of an all-reduce: bytes / time × 2(n−1)/n.
    let busbw = bytes as f64 / ns * 2.0 * (ranks - 1) as f64 / ranks as f64;
    assert!(busbw <= cuda_sim::model::NVLINK_BYTES_PER_NS, "{busbw} B/ns in {ns} ns");
    assert!(busbw > 0.5 * cuda_sim::model::NVLINK_BYTES_PER_NS, "{busbw} B/ns: far below the link");
    destroy(n, &comms);
    for p in bufs {
        free(p);
    }
    drop((start, end));
    drop(rig);
    teardown(e);
}
