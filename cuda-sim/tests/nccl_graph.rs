//! Collectives captured into graphs on the simulated NCCL: a group on two
//! capturing streams becomes a node of each capture, nothing runs (or
//! pairs) at capture, each rank's graph launched runs its part with exact
//! results and the race oracle sees its accesses at the launch (a read on
//! another stream without a wait is a race; on the launch's stream it is
//! not), and a launch after the communicator was destroyed is refused.
//! CUPTI sees each rank's part, issued or replayed, as one NCCL kernel on
//! its stream.

mod common;
use common::*;
use cuda_sim::RaceKind;
use cuda_sys::nccl::{Nccl, result as nr};
use cuda_sys::nccl_bindings::{ncclComm_t, ncclDataType_t as T, ncclRedOp_t as O};
use std::ffi::c_void;

const NB: u32 = CUstream_flags::CU_STREAM_NON_BLOCKING.0;
const LOCAL: CUstreamCaptureMode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;

fn nccl() -> &'static Nccl {
    d();
    cuda_sys::nccl::nccl().expect("the simulator's NCCL is installed with its driver")
}

/// Makes device `dev`'s primary context current.
fn on(dev: i32) {
    let ctx = primary_ctx::retain(d(), dev).expect("cuDevicePrimaryCtxRetain");
    context::set_current(d(), Some(ctx)).expect("cuCtxSetCurrent");
}

/// Rank `r`'s stream and its send and receive buffers of 16 `u32`s (send
/// filled with `r + 1`).
fn rank(r: i32) -> (OwnedStream, CUdeviceptr, CUdeviceptr) {
    on(r);
    let s = stream::create_with_priority(d(), NB, 0).expect("stream");
    let (x, y) = (memory::alloc(d(), 64).expect("send"), memory::alloc(d(), 64).expect("recv"));
    let v: Vec<u8> = [r as u32 + 1; 16].iter().flat_map(|v| v.to_le_bytes()).collect();
    sim::htod(x, v.as_ptr(), 64, &s).expect("fill send");
    sim::memset32(y, 0, 16, &s).expect("zero recv");
    stream::synchronize(&s).expect("filled");
    (s, x, y)
}

fn read(p: CUdeviceptr, s: &OwnedStream) -> Vec<u32> {
    let mut out = [0u8; 64];
    sim::dtoh(out.as_mut_ptr(), p, 64, s).expect("read");
    out.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Two ranks' all-reduce (sum) captured on their streams, one graph each.
fn captured(
    n: &Nccl,
    comms: &[ncclComm_t],
    ranks: &[(OwnedStream, CUdeviceptr, CUdeviceptr)],
) -> Vec<OwnedGraph> {
    for (s, ..) in ranks {
        stream::begin_capture(s, LOCAL).expect("cuStreamBeginCapture");
    }
    nr::group_start(n).expect("group start");
    for (r, (s, x, y)) in ranks.iter().enumerate() {
        // SAFETY: a live communicator of device r, its capturing stream and
        // two 16-word buffers of device r.
        unsafe {
            nr::all_reduce(
                n,
                *x as *const c_void,
                *y as *mut c_void,
                16,
                T::ncclUint32,
                O::ncclSum,
                comms[r],
                s.as_raw(),
            )
        }
        .expect("all-reduce on a capturing stream");
    }
    nr::group_end(n).expect("group end");
    ranks.iter().map(|(s, ..)| stream::end_capture(s).expect("cuStreamEndCapture")).collect()
}

#[test]
fn a_captured_all_reduce_runs_at_each_launch_and_the_oracle_sees_it_there() {
    let _serial = serial();
    for planted in [false, true] {
        let e = env(0x31_10 + planted as u64);
        let n = nccl();
        let comms = nr::comm_init_all(n, &[0, 1]).expect("communicators");
        let ranks: Vec<_> = (0..2).map(rank).collect();
        let graphs = captured(n, &comms, &ranks);
        for g in &graphs {
            assert_eq!(graph::node_count(g).expect("nodes"), 1, "one collective node per rank's graph");
        }
        // Nothing ran while captured.
        assert_eq!(read(ranks[0].2, &ranks[0].0), [0; 16]);
        let execs: Vec<_> =
            graphs.iter().map(|g| graph::instantiate_with_flags(g, 0).expect("instantiate")).collect();
        for launch in 1..=3u32 {
            for (r, ((s, x, _), ex)) in ranks.iter().zip(&execs).enumerate() {
                // New inputs before each launch, in stream order.
                sim::memset32(*x, (r as u32 + 1) * launch, 16, s).expect("set send");
                graph::launch(ex, s).expect("cuGraphLaunch");
            }
            for (s, _, y) in &ranks {
                assert_eq!(read(*y, s), [3 * launch; 16], "launch {launch}");
            }
        }
        on(0);
        let other = stream::create_with_priority(d(), NB, 0).expect("other");
        if planted {
            // The launch is queued again and read on another stream with no
            // wait: the oracle sees the collective's write at the launch.
            graph::launch(&execs[0], &ranks[0].0).expect("launch rank 0");
            graph::launch(&execs[1], &ranks[1].0).expect("launch rank 1");
            let copy = memory::alloc(d(), 64).expect("copy");
            sim::dtod(copy, ranks[0].2, 64, &other).expect("unordered read");
            stream::synchronize(&other).expect("sync other");
            sim::free(copy).expect("free copy");
        }
        for (s, ..) in &ranks {
            stream::synchronize(s).expect("sync");
        }
        let races = e.session.take_races();
        if planted {
            assert!(races.iter().any(|r| r.kind == RaceKind::DataRace), "{races:?}");
        } else {
            assert!(races.is_empty(), "{races:?}");
        }
        // Destroyed communicators: a launch of their graphs is refused.
        destroy_comms(n, &comms);
        assert_eq!(code(graph::launch(&execs[0], &ranks[0].0)), CUresult::CUDA_ERROR_ILLEGAL_STATE);
        drop((execs, graphs, other));
        release_ranks(ranks);
        teardown(e);
    }
}

/// Destroys the test's communicators.
fn destroy_comms(n: &Nccl, comms: &[ncclComm_t]) {
    for c in comms {
        // SAFETY: live communicators with no queued work, unused after.
        unsafe { nr::comm_destroy(n, *c) }.expect("destroy");
    }
}

/// Frees each rank's stream and buffers, and gives device 1's context back
/// (device 0's current again).
fn release_ranks(ranks: Vec<(OwnedStream, CUdeviceptr, CUdeviceptr)>) {
    for (s, x, y) in ranks {
        stream::destroy(s).expect("destroy stream");
        sim::free(x).expect("free");
        sim::free(y).expect("free");
    }
    on(0);
    // SAFETY: the test is done with device 1's context.
    let _ = unsafe { primary_ctx::release(d(), 1) };
}

#[test]
fn cupti_sees_each_ranks_part_as_one_nccl_kernel_on_its_stream() {
    use cuda_sys::cupti::{ActivityKind, ActivityOp, activity};
    let _serial = serial();
    let e = env(0x31_20);
    let n = nccl();
    let a = activity().expect("the simulator's CUPTI");
    let comms = nr::comm_init_all(n, &[0, 1]).expect("communicators");
    let ranks: Vec<_> = (0..2).map(rank).collect();
    let sids: Vec<u32> = ranks
        .iter()
        .enumerate()
        .map(|(r, (s, ..))| {
            on(r as i32);
            let ctx = context::get_current(d()).expect("current").expect("a context");
            a.stream_id(ctx, s.as_raw()).expect("cuptiGetStreamIdEx")
        })
        .collect();
    on(0);
    let graphs = captured(n, &comms, &ranks);
    let execs: Vec<_> =
        graphs.iter().map(|g| graph::instantiate_with_flags(g, 0).expect("instantiate")).collect();
    let c = a.consumer(&[ActivityKind::Kernel]).expect("consumer");
    c.take().expect("take");
    for (s, ex) in ranks.iter().map(|r| &r.0).zip(&execs) {
        graph::launch(ex, s).expect("cuGraphLaunch");
    }
    for (s, ex) in ranks.iter().map(|r| &r.0).zip(&execs) {
        graph::launch(ex, s).expect("cuGraphLaunch");
    }
    for (s, ..) in &ranks {
        stream::synchronize(s).expect("sync");
    }
    let recs = c.take().expect("take");
    let mut starts = Vec::new();
    for (r, sid) in sids.iter().enumerate() {
        let mine: Vec<_> = recs.iter().filter(|x| x.stream_id == *sid).collect();
        assert_eq!(mine.len(), 2, "two launches, one kernel each on rank {r}'s stream: {recs:?}");
        for x in &mine {
            let ActivityOp::Kernel { name, .. } = &x.op else { panic!("{x:?}") };
            assert_eq!(&**name, "ncclDevKernel_AllReduce");
            assert!(x.duration_ns() > 0 && x.device_id == r as u32, "{x:?}");
        }
        assert!(mine[0].end_ns <= mine[1].start_ns, "in launch order: {mine:?}");
        starts.push(mine[0].start_ns);
    }
    // The rendezvous: both ranks' parts of a collective start together.
    assert_eq!(starts[0], starts[1]);
    drop(c);
    destroy_comms(n, &comms);
    drop((execs, graphs));
    release_ranks(ranks);
    teardown(e);
}
