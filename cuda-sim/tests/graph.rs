//! Stream capture, graphs, and capture misuse.

mod common;
use common::*;
use std::ptr::null_mut;

const NB: u32 = CUstream_flags::CU_STREAM_NON_BLOCKING.0;
use CUstreamCaptureMode as M;
use CUstreamCaptureStatus as S;

fn status(s: &OwnedStream) -> CUstreamCaptureStatus {
    stream::is_capturing(s).unwrap()
}

/// The program: x = 3 on s0; fork: y = 4 on s1; join; y += x on s0.
fn program(
    e: &Env,
    s0: &OwnedStream,
    s1: &OwnedStream,
    x: CUdeviceptr,
    y: CUdeviceptr,
    fork: &OwnedEvent,
    join: &OwnedEvent,
) {
    e.fill(s0, x, 3, 16);
    event::record(fork, s0).unwrap();
    stream::wait_event(s1, fork, 0).unwrap();
    e.fill(s1, y, 4, 16);
    event::record(join, s1).unwrap();
    stream::wait_event(s0, join, 0).unwrap();
    e.add(s0, x, y, 16);
}

#[test]
fn capture_instantiate_launch_matches_eager_execution() {
    let _serial = serial();
    let e = env(90);
    let (s0, s1) = (e.stream(NB), e.stream(NB));
    let (fork, join) = (
        e.event(CUevent_flags::CU_EVENT_DISABLE_TIMING.0),
        e.event(CUevent_flags::CU_EVENT_DISABLE_TIMING.0),
    );
    let (x, y) = (e.alloc(64), e.alloc(64));
    program(&e, &s0, &s1, x, y, &fork, &join);
    context::synchronize(d()).unwrap();
    let eager = e.read_u32(y, 16);
    assert_eq!(eager, vec![7; 16]);

    sim::memset32(y, 0, 16, &s0).unwrap();
    stream::synchronize(&s0).unwrap();
    stream::begin_capture(&s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL).unwrap();
    assert_eq!(status(&s0), S::CU_STREAM_CAPTURE_STATUS_ACTIVE);
    program(&e, &s0, &s1, x, y, &fork, &join);
    assert_eq!(status(&s1), S::CU_STREAM_CAPTURE_STATUS_ACTIVE, "s1 joined the capture");
    let g = stream::end_capture(&s0).unwrap();
    assert!(!g.as_raw().is_null());
    assert_eq!(status(&s1), S::CU_STREAM_CAPTURE_STATUS_NONE);
    assert_eq!(e.session.pending(), 0, "captured work is not queued");
    assert_eq!(e.read_u32(y, 1), vec![0], "nothing ran during capture");
    assert_eq!(graph::node_count(&g), Ok(3));
    let nodes = graph::get_nodes(&g).unwrap();
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(|p| !p.is_null()));
    // More room than nodes: the driver reports how many it wrote.
    let mut room = [null_mut(); 4];
    let mut n = 4;
    assert_eq!(raw!(cuGraphGetNodes(g.as_raw(), room.as_mut_ptr(), &mut n)), OK);
    assert_eq!(n, 3);
    assert!(room[3].is_null());

    let exec = graph::instantiate_with_flags(&g, 0).unwrap();
    let s2 = e.stream(NB);
    graph::launch(&exec, &s2).unwrap();
    stream::synchronize(&s2).unwrap();
    assert_eq!(e.read_u32(y, 16), eager);
    sim::memset32(y, 0, 16, &s2).unwrap();
    graph::launch(&exec, &s2).unwrap();
    stream::synchronize(&s2).unwrap();
    assert_eq!(e.read_u32(y, 16), eager, "a second launch runs the graph again");
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());

    graph::exec_destroy(exec).unwrap();
    let raw_g = g.as_raw();
    graph::destroy(g).unwrap();
    assert_eq!(raw!(cuGraphDestroy(raw_g)), CUresult::CUDA_ERROR_INVALID_HANDLE);
    for s in [s0, s1, s2] {
        stream::destroy(s).unwrap();
    }
    for ev in [fork, join] {
        event::destroy(ev).unwrap();
    }
    sim::free(x).unwrap();
    sim::free(y).unwrap();
    teardown(e);
}

#[test]
fn a_fork_not_joined_back_is_unjoined() {
    let _serial = serial();
    let e = env(91);
    let (s0, s1) = (e.stream(NB), e.stream(NB));
    let fork = e.event(0);
    let x = e.alloc(64);
    stream::begin_capture(&s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL).unwrap();
    e.fill(&s0, x, 1, 16);
    event::record(&fork, &s0).unwrap();
    stream::wait_event(&s1, &fork, 0).unwrap();
    e.fill(&s1, x, 2, 16);
    // Raw, to see the driver clear the out-parameter on failure.
    let mut g: CUgraph = std::ptr::without_provenance_mut(1);
    assert_eq!(raw!(cuStreamEndCapture(s0.as_raw(), &mut g)), CUresult::CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    assert!(g.is_null());
    assert_eq!(status(&s1), S::CU_STREAM_CAPTURE_STATUS_NONE);
    event::destroy(fork).unwrap();
    stream::destroy(s0).unwrap();
    stream::destroy(s1).unwrap();
    sim::free(x).unwrap();
    teardown(e);
}

#[test]
fn waiting_on_uncaptured_work_is_isolation_and_invalidates() {
    let _serial = serial();
    let e = env(92);
    let (s0, s1) = (e.stream(NB), e.stream(NB));
    let outside = e.event(0);
    let x = e.alloc(16);
    event::record(&outside, &s1).unwrap();
    stream::begin_capture(&s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL).unwrap();
    assert_eq!(code(stream::wait_event(&s0, &outside, 0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    assert_eq!(status(&s0), S::CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    assert_eq!(code(sim::memset8(x, 0, 16, &s0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_eq!(code(stream::end_capture(&s0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    event::destroy(outside).unwrap();
    stream::destroy(s0).unwrap();
    stream::destroy(s1).unwrap();
    sim::free(x).unwrap();
    teardown(e);
}

#[test]
fn synchronizing_or_querying_captured_work_is_unsupported() {
    let _serial = serial();
    let e = env(93);
    let (s0, s1) = (e.stream(NB), e.stream(0));
    let ev = e.event(0);
    let x = e.alloc(64);

    stream::begin_capture(&s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL).unwrap();
    assert_eq!(code(stream::synchronize(&s0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_eq!(code(stream::end_capture(&s0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    stream::begin_capture(&s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL).unwrap();
    e.fill(&s0, x, 1, 16);
    event::record(&ev, &s0).unwrap();
    assert_eq!(code(event::query(&ev)), CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_eq!(code(stream::end_capture(&s0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    // Simulator limits: stream-ordered allocation, pageable copies, host functions.
    for f in 0..3 {
        stream::begin_capture(&s0, M::CU_STREAM_CAPTURE_MODE_RELAXED).unwrap();
        let r = match f {
            0 => code(memory::alloc_async(64, &s0)),
            1 => {
                let host = [0u8; 4];
                code(sim::htod(x, host.as_ptr(), 4, &s0))
            }
            // SAFETY: `noop` does nothing with its null argument.
            _ => code(unsafe { stream::launch_host_func(&s0, Some(noop), null_mut()) }),
        };
        assert_eq!(r, CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "case {f}");
        assert_eq!(code(stream::end_capture(&s0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }

    // Unsafe calls during a global capture, legacy-stream work beside a
    // capturing blocking stream.
    stream::begin_capture(&s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL).unwrap();
    assert_eq!(code(memory::alloc(d(), 16)), CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_eq!(code(stream::end_capture(&s0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    stream::begin_capture(&s0, M::CU_STREAM_CAPTURE_MODE_RELAXED).unwrap();
    let p = memory::alloc(d(), 16).unwrap();
    graph::destroy(stream::end_capture(&s0).unwrap()).unwrap();
    sim::free(p).unwrap();
    stream::begin_capture(&s1, M::CU_STREAM_CAPTURE_MODE_GLOBAL).unwrap();
    let legacy = BorrowedStream::legacy(d());
    assert_eq!(code(sim::memset8(x, 0, 1, legacy)), CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    assert_eq!(code(stream::end_capture(&s1)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    // Misuse of begin/end.
    assert_eq!(
        code(stream::begin_capture(legacy, M::CU_STREAM_CAPTURE_MODE_GLOBAL)),
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
    );
    assert_eq!(code(stream::end_capture(&s0)), CUresult::CUDA_ERROR_ILLEGAL_STATE);
    stream::begin_capture(&s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL).unwrap();
    assert_eq!(
        code(stream::begin_capture(&s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL)),
        CUresult::CUDA_ERROR_ILLEGAL_STATE
    );
    event::record(&ev, &s0).unwrap();
    stream::wait_event(&s1, &ev, 0).unwrap();
    assert_eq!(code(stream::end_capture(&s1)), CUresult::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    graph::destroy(stream::end_capture(&s0).unwrap()).unwrap();

    event::destroy(ev).unwrap();
    stream::destroy(s0).unwrap();
    stream::destroy(s1).unwrap();
    sim::free(x).unwrap();
    teardown(e);
}

unsafe extern "C" fn noop(_: *mut std::ffi::c_void) {}
