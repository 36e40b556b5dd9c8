//! Stream capture, graphs, and capture misuse.

mod common;
use common::*;
use std::ptr::null_mut;

const NB: u32 = CUstream_flags::CU_STREAM_NON_BLOCKING.0;
use CUstreamCaptureMode as M;
use CUstreamCaptureStatus as S;

fn status(s: CUstream) -> CUstreamCaptureStatus {
    let mut st = S::CU_STREAM_CAPTURE_STATUS_NONE;
    ck!(cuStreamIsCapturing(s, &mut st));
    st
}

/// The program: x = 3 on s0; fork: y = 4 on s1; join; y += x on s0.
fn program(
    e: &Env,
    s0: CUstream,
    s1: CUstream,
    x: CUdeviceptr,
    y: CUdeviceptr,
    fork: CUevent,
    join: CUevent,
) {
    e.fill(s0, x, 3, 16);
    ck!(cuEventRecord(fork, s0));
    ck!(cuStreamWaitEvent(s1, fork, 0));
    e.fill(s1, y, 4, 16);
    ck!(cuEventRecord(join, s1));
    ck!(cuStreamWaitEvent(s0, join, 0));
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
    program(&e, s0, s1, x, y, fork, join);
    ck!(cuCtxSynchronize());
    let eager = e.read_u32(y, 16);
    assert_eq!(eager, vec![7; 16]);

    ck!(cuMemsetD32Async(y, 0, 16, s0));
    ck!(cuStreamSynchronize(s0));
    ck!(cuStreamBeginCapture(s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL));
    assert_eq!(status(s0), S::CU_STREAM_CAPTURE_STATUS_ACTIVE);
    program(&e, s0, s1, x, y, fork, join);
    assert_eq!(status(s1), S::CU_STREAM_CAPTURE_STATUS_ACTIVE, "s1 joined the capture");
    let mut g: CUgraph = null_mut();
    ck!(cuStreamEndCapture(s0, &mut g));
    assert!(!g.is_null());
    assert_eq!(status(s1), S::CU_STREAM_CAPTURE_STATUS_NONE);
    assert_eq!(e.session.pending(), 0, "captured work is not queued");
    assert_eq!(e.read_u32(y, 1), vec![0], "nothing ran during capture");
    let mut n = 0;
    ck!(cuGraphGetNodes(g, null_mut(), &mut n));
    assert_eq!(n, 3);
    let mut nodes = [null_mut(); 4];
    let mut room = 4;
    ck!(cuGraphGetNodes(g, nodes.as_mut_ptr(), &mut room));
    assert_eq!(room, 3);
    assert!(nodes[..3].iter().all(|p| !p.is_null()) && nodes[3].is_null());

    let mut exec: CUgraphExec = null_mut();
    ck!(cuGraphInstantiateWithFlags(&mut exec, g, 0));
    let s2 = e.stream(NB);
    ck!(cuGraphLaunch(exec, s2));
    ck!(cuStreamSynchronize(s2));
    assert_eq!(e.read_u32(y, 16), eager);
    ck!(cuMemsetD32Async(y, 0, 16, s2));
    ck!(cuGraphLaunch(exec, s2));
    ck!(cuStreamSynchronize(s2));
    assert_eq!(e.read_u32(y, 16), eager, "a second launch runs the graph again");
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());

    ck!(cuGraphExecDestroy(exec));
    ck!(cuGraphDestroy(g));
    assert_eq!(cu!(cuGraphDestroy(g)), CUresult::CUDA_ERROR_INVALID_HANDLE);
    for s in [s0, s1, s2] {
        ck!(cuStreamDestroy(s));
    }
    for ev in [fork, join] {
        ck!(cuEventDestroy(ev));
    }
    ck!(cuMemFree(x));
    ck!(cuMemFree(y));
    teardown(e);
}

#[test]
fn a_fork_not_joined_back_is_unjoined() {
    let _serial = serial();
    let e = env(91);
    let (s0, s1) = (e.stream(NB), e.stream(NB));
    let fork = e.event(0);
    let x = e.alloc(64);
    ck!(cuStreamBeginCapture(s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL));
    e.fill(s0, x, 1, 16);
    ck!(cuEventRecord(fork, s0));
    ck!(cuStreamWaitEvent(s1, fork, 0));
    e.fill(s1, x, 2, 16);
    let mut g: CUgraph = std::ptr::without_provenance_mut(1);
    assert_eq!(cu!(cuStreamEndCapture(s0, &mut g)), CUresult::CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    assert!(g.is_null());
    assert_eq!(status(s1), S::CU_STREAM_CAPTURE_STATUS_NONE);
    ck!(cuEventDestroy(fork));
    ck!(cuStreamDestroy(s0));
    ck!(cuStreamDestroy(s1));
    ck!(cuMemFree(x));
    teardown(e);
}

#[test]
fn waiting_on_uncaptured_work_is_isolation_and_invalidates() {
    let _serial = serial();
    let e = env(92);
    let (s0, s1) = (e.stream(NB), e.stream(NB));
    let outside = e.event(0);
    let x = e.alloc(16);
    ck!(cuEventRecord(outside, s1));
    ck!(cuStreamBeginCapture(s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL));
    assert_eq!(cu!(cuStreamWaitEvent(s0, outside, 0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    assert_eq!(status(s0), S::CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    assert_eq!(cu!(cuMemsetD8Async(x, 0, 16, s0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    let mut g: CUgraph = null_mut();
    assert_eq!(cu!(cuStreamEndCapture(s0, &mut g)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert!(g.is_null());
    ck!(cuEventDestroy(outside));
    ck!(cuStreamDestroy(s0));
    ck!(cuStreamDestroy(s1));
    ck!(cuMemFree(x));
    teardown(e);
}

#[test]
fn synchronizing_or_querying_captured_work_is_unsupported() {
    let _serial = serial();
    let e = env(93);
    let (s0, s1) = (e.stream(NB), e.stream(0));
    let ev = e.event(0);
    let x = e.alloc(64);
    let mut g: CUgraph = null_mut();

    ck!(cuStreamBeginCapture(s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL));
    assert_eq!(cu!(cuStreamSynchronize(s0)), CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_eq!(cu!(cuStreamEndCapture(s0, &mut g)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    ck!(cuStreamBeginCapture(s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL));
    e.fill(s0, x, 1, 16);
    ck!(cuEventRecord(ev, s0));
    assert_eq!(cu!(cuEventQuery(ev)), CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_eq!(cu!(cuStreamEndCapture(s0, &mut g)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    // Simulator limits: stream-ordered allocation, pageable copies, host functions.
    let mut p = 0;
    for f in 0..3 {
        ck!(cuStreamBeginCapture(s0, M::CU_STREAM_CAPTURE_MODE_RELAXED));
        let r = match f {
            0 => cu!(cuMemAllocAsync(&mut p, 64, s0)),
            1 => {
                let host = [0u8; 4];
                cu!(cuMemcpyHtoDAsync(x, host.as_ptr().cast(), 4, s0))
            }
            _ => cu!(cuLaunchHostFunc(
                s0,
                None::<unsafe extern "C" fn(*mut std::ffi::c_void)>.or(Some(noop)),
                null_mut()
            )),
        };
        assert_eq!(r, CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "case {f}");
        assert_eq!(cu!(cuStreamEndCapture(s0, &mut g)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }

    // Unsafe calls during a global capture, legacy-stream work beside a
    // capturing blocking stream.
    ck!(cuStreamBeginCapture(s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL));
    assert_eq!(cu!(cuMemAlloc(&mut p, 16)), CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_eq!(cu!(cuStreamEndCapture(s0, &mut g)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck!(cuStreamBeginCapture(s0, M::CU_STREAM_CAPTURE_MODE_RELAXED));
    ck!(cuMemAlloc(&mut p, 16));
    ck!(cuStreamEndCapture(s0, &mut g));
    ck!(cuGraphDestroy(g));
    ck!(cuMemFree(p));
    ck!(cuStreamBeginCapture(s1, M::CU_STREAM_CAPTURE_MODE_GLOBAL));
    assert_eq!(cu!(cuMemsetD8Async(x, 0, 1, CU_STREAM_LEGACY)), CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    assert_eq!(cu!(cuStreamEndCapture(s1, &mut g)), CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    // Misuse of begin/end.
    assert_eq!(
        cu!(cuStreamBeginCapture(CU_STREAM_LEGACY, M::CU_STREAM_CAPTURE_MODE_GLOBAL)),
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
    );
    assert_eq!(cu!(cuStreamEndCapture(s0, &mut g)), CUresult::CUDA_ERROR_ILLEGAL_STATE);
    ck!(cuStreamBeginCapture(s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL));
    assert_eq!(
        cu!(cuStreamBeginCapture(s0, M::CU_STREAM_CAPTURE_MODE_GLOBAL)),
        CUresult::CUDA_ERROR_ILLEGAL_STATE
    );
    ck!(cuEventRecord(ev, s0));
    ck!(cuStreamWaitEvent(s1, ev, 0));
    assert_eq!(cu!(cuStreamEndCapture(s1, &mut g)), CUresult::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    ck!(cuStreamEndCapture(s0, &mut g));
    ck!(cuGraphDestroy(g));

    ck!(cuEventDestroy(ev));
    ck!(cuStreamDestroy(s0));
    ck!(cuStreamDestroy(s1));
    ck!(cuMemFree(x));
    teardown(e);
}

unsafe extern "C" fn noop(_: *mut std::ffi::c_void) {}
