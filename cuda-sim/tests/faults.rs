//! Fault injection, call logs and live-object counters.

mod common;
use common::*;
use cuda_sim::FaultPlan;

#[test]
fn the_nth_call_fails_with_the_chosen_code_and_does_nothing() {
    let _serial = serial();
    let e = env(200);
    let n = e.session.calls().len() as u64;
    e.session.inject(FaultPlan::new().fail_nth(n, CUresult::CUDA_ERROR_OUT_OF_MEMORY));
    let before = e.session.live();
    assert_eq!(code(memory::alloc(d(), 64)), CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    assert_eq!(e.session.live(), before);
    let p = e.alloc(64);
    sim::free(p).unwrap();
    let calls = e.session.calls();
    assert_eq!(
        &calls[..5],
        ["cuInit", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuModuleLoadData", "cuMemAlloc"]
    );
    teardown(e);
}

#[test]
fn every_call_of_a_name_and_the_kth_of_a_name() {
    let _serial = serial();
    let e = env(201);
    e.session.inject(
        FaultPlan::new().fail_every("cuEventCreate", CUresult::CUDA_ERROR_NOT_SUPPORTED).fail_nth_of(
            "cuStreamCreateWithPriority",
            1,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        ),
    );
    for _ in 0..3 {
        assert_eq!(code(event::create(d(), 0)), CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    let s0 = e.stream(0);
    assert_eq!(code(stream::create_with_priority(d(), 0, 0)), CUresult::CUDA_ERROR_INVALID_VALUE);
    let s2 = e.stream(0);
    assert_eq!(e.session.live().events, 0);
    assert_eq!(e.session.live().streams, 2);
    e.session.clear_faults();
    let ev = e.event(0);
    event::destroy(ev).unwrap();
    stream::destroy(s0).unwrap();
    stream::destroy(s2).unwrap();
    teardown(e);
}

#[test]
fn a_sticky_code_poisons_only_its_session() {
    let _serial = serial();
    let e = env(202);
    let x = e.alloc(16);
    e.session.inject(FaultPlan::new().fail_nth_of(
        "cuStreamSynchronize",
        0,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
    ));
    assert_eq!(code(stream::synchronize(BorrowedStream::null(d()))), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    e.session.clear_faults();
    // A lost context: everything fails from now on, in this session.
    assert_eq!(code(context::synchronize(d())), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_eq!(code(sim::free(x)), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_eq!(e.session.sticky_error(), Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
    // Another session on another thread is unaffected.
    std::thread::spawn(|| {
        let other = env(203);
        let y = other.alloc(16);
        sim::free(y).unwrap();
        context::synchronize(d()).unwrap();
        teardown(other);
    })
    .join()
    .unwrap();
    // And so is a new session on this thread.
    let third = env(204);
    context::synchronize(d()).unwrap();
    teardown(third);
}

#[test]
fn live_counts_follow_creation_and_cleanup() {
    let _serial = serial();
    let e = env(205);
    let s = e.stream(0);
    let ev = e.event(0);
    let x = e.alloc(16);
    let h = e.pinned(16, 0);
    let y = memory::alloc_async(16, &s).unwrap();
    stream::begin_capture(&s, CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL).unwrap();
    e.fill(&s, x, 1, 4);
    let g = stream::end_capture(&s).unwrap();
    let exec = graph::instantiate_with_flags(&g, 0).unwrap();
    let live = e.session.live();
    assert_eq!(
        (
            live.streams,
            live.events,
            live.device_allocations,
            live.pinned_allocations,
            live.modules,
            live.graphs,
            live.graph_execs
        ),
        (1, 1, 2, 1, 1, 1, 1)
    );
    assert!(!live.is_empty());
    graph::exec_destroy(exec).unwrap();
    graph::destroy(g).unwrap();
    sim::free_async(y, &s).unwrap();
    sim::free_host(h).unwrap();
    sim::free(x).unwrap();
    event::destroy(ev).unwrap();
    stream::destroy(s).unwrap();
    teardown(e); // asserts live().is_empty()
}

#[test]
fn a_length_argument_past_the_buffer_is_a_sticky_illegal_address() {
    let _serial = serial();
    let e = env(210);
    let (a, b) = (e.alloc(64), e.alloc(64));
    // `sim_add_u32` reads `n` elements of `a`: 2^40 of them is far past the
    // 16 the buffer holds (and more than the host could allocate). A GPU
    // reports an illegal address; the simulator must not abort the process.
    e.add(BorrowedStream::null(d()), a, b, 1 << 40);
    assert_eq!(code(context::synchronize(d())), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_eq!(e.session.sticky_error(), Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
    // A modest overrun (past the allocation, within the host's means) too.
    let other = env(211);
    let (c, dst) = (other.alloc(64), other.alloc(64));
    other.add(BorrowedStream::null(d()), c, dst, 17);
    assert_eq!(code(context::synchronize(d())), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_eq!(other.session.sticky_error(), Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
}

#[test]
fn a_lost_context_runs_no_more_queued_work() {
    let _serial = serial();
    let e = env(212);
    let s = e.stream(0);
    let dev = e.alloc(64);
    e.fill(&s, dev, 7, 16);
    let host = e.pinned(64, 0);
    // SAFETY: `host` is 64 bytes of pinned memory the test owns.
    unsafe { std::ptr::write_bytes(host, 0, 64) };
    sim::dtoh(host, dev, 64, &s).unwrap();
    // The context is lost before the copy runs ...
    e.session.inject(FaultPlan::new().fail_every("cuStreamQuery", CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
    assert_eq!(code(stream::query(&s)), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    e.session.clear_faults();
    // ... so no later synchronization (here another session's, of the whole
    // device) makes it write host memory.
    let other = env(213);
    context::synchronize(d()).unwrap();
    // SAFETY: as above; no copy is queued into it any more.
    let seen = unsafe { std::slice::from_raw_parts(host, 64) };
    assert!(seen.iter().all(|&b| b == 0), "a lost context's copy wrote host memory");
    teardown(other);
}
