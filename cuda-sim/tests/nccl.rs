//! The simulated NCCL through cuda-sys's per-call layer
//! (`cuda_sys::nccl::result`) and the raw driver table: exact results of
//! every collective for every element kind over 2, 3, 4 and 8 devices,
//! communicators made every way, the planted bugs the race oracle must flag
//! (and their correct twins clean), NCCL's opposite-order hang reported as
//! a deadlock, and the link model's bound on a collective's time. Its own
//! test binary: it runs eight simulated devices.

mod common;
use common::*;
use cuda_sim::RaceKind;
use cuda_sys::nccl::{Nccl, NcclError, result as nr};
use cuda_sys::nccl_bindings::{
    NCCL_CONFIG_INITIALIZER, ncclComm_t, ncclDataType_t as T, ncclRedOp_t as O, ncclResult_t,
};
use std::ffi::c_void;

/// Eight devices, configured before this binary's first `cuInit`.
fn eight_devices() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let cfg = cuda_sim::Config { devices: 8, ..Default::default() };
        cuda_sim::configure(cfg).expect("configured before the first cuInit");
    });
}

fn nccl() -> &'static Nccl {
    d();
    let n = cuda_sys::nccl::nccl().expect("the simulator's NCCL is installed with its driver");
    assert_eq!(n.origin, cuda_sim::nccl::ORIGIN);
    n
}

/// Makes device `dev`'s primary context current.
fn on(dev: i32) {
    let ctx = primary_ctx::retain(d(), dev).expect("cuDevicePrimaryCtxRetain");
    context::set_current(d(), Some(ctx)).expect("cuCtxSetCurrent");
}

/// One stream per device of `0..n`, each made with its device current.
struct Rig {
    streams: Vec<OwnedStream>,
}

impl Rig {
    fn new(n: i32) -> Rig {
        let streams = (0..n)
            .map(|dev| {
                on(dev);
                stream::create_with_priority(d(), CUstream_flags::CU_STREAM_NON_BLOCKING.0, 0).unwrap()
            })
            .collect();
        on(0);
        Rig { streams }
    }

    fn raw(&self, r: usize) -> CUstream {
        self.streams[r].as_raw()
    }

    /// `bytes` on device `dev`, filled from `data` (padded with zeros).
    fn alloc(&self, dev: i32, bytes: usize, data: &[u8]) -> CUdeviceptr {
        on(dev);
        let p = memory::alloc(d(), bytes.max(1)).unwrap();
        let mut init = data.to_vec();
        init.resize(bytes, 0);
        sim::htod(p, init.as_ptr(), bytes, BorrowedStream::null(d())).unwrap();
        // The rig's streams are non-blocking: the fill must be done first.
        stream::synchronize(BorrowedStream::null(d())).unwrap();
        on(0);
        p
    }

    fn read(&self, p: CUdeviceptr, bytes: usize) -> Vec<u8> {
        let mut out = vec![0u8; bytes];
        sim::dtoh(out.as_mut_ptr(), p, bytes, BorrowedStream::null(d())).unwrap();
        out
    }

    fn sync(&self) {
        for s in &self.streams {
            stream::synchronize(s).unwrap();
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.streams.clear();
        for dev in 0..8 {
            // SAFETY: the tests are done with the contexts; the simulator's
            // contexts outlive their last release anyway.
            let _ = unsafe { primary_ctx::release(d(), dev) };
        }
    }
}

fn free(p: CUdeviceptr) {
    sim::free(p).unwrap();
}

// ---- element kinds, encoded independently of the simulator ----

const KINDS: [T; 9] = [
    T::ncclFloat32,
    T::ncclFloat64,
    T::ncclFloat16,
    T::ncclBfloat16,
    T::ncclInt32,
    T::ncclInt64,
    T::ncclUint8,
    T::ncclUint32,
    T::ncclUint64,
];

fn size(ty: T) -> usize {
    match ty {
        T::ncclUint8 => 1,
        T::ncclFloat16 | T::ncclBfloat16 => 2,
        T::ncclFloat32 | T::ncclInt32 | T::ncclUint32 => 4,
        _ => 8,
    }
}

fn is_float(ty: T) -> bool {
    matches!(ty, T::ncclFloat32 | T::ncclFloat64 | T::ncclFloat16 | T::ncclBfloat16)
}

/// The bytes of small integer `v` (exactly representable in every kind,
/// wrapped for the unsigned ones).
fn enc(ty: T, v: i64) -> Vec<u8> {
    match ty {
        T::ncclFloat32 => (v as f32).to_le_bytes().to_vec(),
        T::ncclFloat64 => (v as f64).to_le_bytes().to_vec(),
        T::ncclBfloat16 => (((v as f32).to_bits() >> 16) as u16).to_le_bytes().to_vec(),
        T::ncclFloat16 => {
            let k = v.unsigned_abs();
            assert!(k <= 2048);
            let bits = if k == 0 {
                0
            } else {
                let e = 63 - k.leading_zeros() as u64;
                ((e + 15) << 10) | ((k - (1 << e)) << (10 - e))
            };
            ((bits as u16) | if v < 0 { 0x8000 } else { 0 }).to_le_bytes().to_vec()
        }
        T::ncclInt32 => (v as i32).to_le_bytes().to_vec(),
        T::ncclInt64 => v.to_le_bytes().to_vec(),
        T::ncclUint8 => vec![v as u8],
        T::ncclUint32 => (v as u32).to_le_bytes().to_vec(),
        _ => (v as u64).to_le_bytes().to_vec(),
    }
}

fn encode(ty: T, vs: &[i64]) -> Vec<u8> {
    vs.iter().flat_map(|v| enc(ty, *v)).collect()
}

/// What `op` over `inputs` (rank order) is for integers of `ty`: exact
/// arithmetic wrapped to the kind's width (the floats' values stay exact).
fn expect(ty: T, op: O, inputs: &[i64]) -> i64 {
    let n = inputs.len() as i64;
    let wrap = |v: i128| -> i64 {
        match ty {
            T::ncclUint8 => (v as u8) as i64,
            T::ncclInt32 => (v as i32) as i64,
            T::ncclUint32 => (v as u32) as i64,
            _ => v as i64,
        }
    };
    match op {
        O::ncclSum => wrap(inputs.iter().map(|v| *v as i128).sum()),
        O::ncclProd => wrap(inputs.iter().map(|v| *v as i128).product()),
        O::ncclMin => *inputs.iter().min().unwrap(),
        O::ncclMax => *inputs.iter().max().unwrap(),
        _ => wrap(inputs.iter().map(|v| *v as i128).sum()) / n,
    }
}

/// Rank `r`'s element `i` for `op`: products of ones and twos (exact in
/// bf16 for 8 ranks), averages of odd numbers (their sum n² divides by n),
/// small integers otherwise, negative ones for the signed kinds.
fn value(ty: T, op: O, r: usize, i: usize) -> i64 {
    let signed = matches!(ty, T::ncclInt32 | T::ncclInt64) || is_float(ty);
    match op {
        O::ncclProd => 1 + ((r + i) % 2) as i64,
        O::ncclAvg => 2 * r as i64 + 1,
        _ => {
            let v = ((r * 7 + i * 3) % 11) as i64 + 1;
            if signed && (r + i).is_multiple_of(3) { -v } else { v }
        }
    }
}

const COUNT: usize = 5;

/// Runs all-reduce with `op` over `n` ranks from one thread in a group, and
/// checks every rank's result.
fn all_reduce_case(n: &Nccl, rig: &Rig, comms: &[ncclComm_t], ty: T, op: O) {
    let ranks = comms.len();
    let es = size(ty);
    let vals: Vec<Vec<i64>> = (0..ranks).map(|r| (0..COUNT).map(|i| value(ty, op, r, i)).collect()).collect();
    let send: Vec<CUdeviceptr> =
        (0..ranks).map(|r| rig.alloc(r as i32, COUNT * es, &encode(ty, &vals[r]))).collect();
    let recv: Vec<CUdeviceptr> = (0..ranks).map(|r| rig.alloc(r as i32, COUNT * es, &[])).collect();
    nr::group_start(n).unwrap();
    for r in 0..ranks {
        // SAFETY: live communicator and stream of device r; buffers of
        // COUNT elements on device r, kept until the stream syncs below.
        unsafe {
            nr::all_reduce(
                n,
                send[r] as *const c_void,
                recv[r] as *mut c_void,
                COUNT,
                ty,
                op,
                comms[r],
                rig.raw(r),
            )
        }
        .unwrap();
    }
    nr::group_end(n).unwrap();
    rig.sync();
    let want: Vec<i64> =
        (0..COUNT).map(|i| expect(ty, op, &vals.iter().map(|v| v[i]).collect::<Vec<_>>())).collect();
    for r in 0..ranks {
        assert_eq!(
            rig.read(recv[r], COUNT * es),
            encode(ty, &want),
            "all-reduce {ty:?} {op:?} rank {r} of {ranks}"
        );
        free(send[r]);
        free(recv[r]);
    }
}

fn init_all(n: &Nccl, ranks: i32) -> Vec<ncclComm_t> {
    let devs: Vec<i32> = (0..ranks).collect();
    nr::comm_init_all(n, &devs).unwrap()
}

fn destroy(n: &Nccl, comms: &[ncclComm_t]) {
    for c in comms {
        // SAFETY: a live communicator of `n`, unused afterwards.
        unsafe { nr::comm_destroy(n, *c) }.unwrap();
    }
}

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

#[test]
fn two_communicators_issued_in_opposite_orders_are_reported_as_a_deadlock() {
    eight_devices();
    let _serial = serial();
    let e = env(0x30_40);
    let n = nccl();
    let rig = Rig::new(2);
    let (a, b) = (init_all(n, 2), init_all(n, 2));
    let bufs: Vec<CUdeviceptr> =
        (0..2).map(|r| rig.alloc(r, 64, &encode(T::ncclInt32, &[r as i64 + 1; 16]))).collect();
    let issue = |comm: ncclComm_t, r: usize| {
        // SAFETY: live communicator and stream of device r; in-place
        // buffer of 16 ints on device r.
        unsafe {
            nr::all_reduce(
                n,
                bufs[r] as *const c_void,
                bufs[r] as *mut c_void,
                16,
                T::ncclInt32,
                O::ncclSum,
                comm,
                rig.raw(r),
            )
        }
        .unwrap();
    };
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
    let (a, b) = (init_all(n, 2), init_all(n, 2));
    let bufs: Vec<CUdeviceptr> =
        (0..2).map(|r| rig.alloc(r, 64, &encode(T::ncclInt32, &[r as i64 + 1; 16]))).collect();
    for r in 0..2 {
        for comm in [a[r], b[r]] {
            // SAFETY: as in the deadlock test.
            unsafe {
                nr::all_reduce(
                    n,
                    bufs[r] as *const c_void,
                    bufs[r] as *mut c_void,
                    16,
                    T::ncclInt32,
                    O::ncclSum,
                    comm,
                    rig.raw(r),
                )
            }
            .unwrap();
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

/// Sums 4 ints over `comms` (rank r contributes r + 1) and checks each
/// rank's result.
fn check_sum(n: &Nccl, rig: &Rig, comms: &[ncclComm_t], devices: &[i32]) {
    let k = comms.len();
    let bufs: Vec<CUdeviceptr> =
        (0..k).map(|r| rig.alloc(devices[r], 16, &encode(T::ncclInt32, &[r as i64 + 1; 4]))).collect();
    nr::group_start(n).unwrap();
    for r in 0..k {
        // SAFETY: live communicator of device devices[r], its stream, and a
        // 4-int buffer there.
        unsafe {
            nr::all_reduce(
                n,
                bufs[r] as *const c_void,
                bufs[r] as *mut c_void,
                4,
                T::ncclInt32,
                O::ncclSum,
                comms[r],
                rig.raw(devices[r] as usize),
            )
        }
        .unwrap();
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
    let mut nb = NCCL_CONFIG_INITIALIZER;
    nb.blocking = 0;
    // One thread, every rank in a group, non-blocking: the group's end says
    // in progress, then each communicator reports success.
    let id = nr::get_unique_id(n).unwrap();
    let mut comms = vec![std::ptr::null_mut(); 4];
    nr::group_start(n).unwrap();
    for (r, c) in comms.iter_mut().enumerate() {
        on(r as i32);
        let mut cfg = nb;
        // SAFETY: a context is current; the config starts from the initializer.
        unsafe { nr::comm_init_rank_config(n, c, 4, id, r, &mut cfg) }.unwrap();
    }
    assert_eq!(nr::group_end(n), Err(NcclError::InProgress { call: "ncclGroupEnd" }));
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
