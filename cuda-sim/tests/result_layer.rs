//! cuda-sys's per-call layer (`cuda_sys::result`) and owned handles, on the
//! simulator: every area's calls round-trip, out-parameters come back
//! through `Result`, owned handles destroy themselves (or log and leak), a
//! missing entry point is `Unsupported`, and handles of two tables are
//! refused. (cuda-sys cannot test this itself: cuda-sim depends on it.)

mod common;
use common::*;
use cuda_sim::FaultPlan;
use std::ffi::c_void;

/// A second table of the simulator, not installed: the same functions, a
/// different `&'static Driver` (as a libcuda table beside cuda-sim would be).
fn second_table(edit: impl FnOnce(&mut Driver)) -> &'static Driver {
    let mut t = cuda_sim::table();
    edit(&mut t);
    Box::leak(Box::new(t))
}

#[test]
fn device_and_context_queries_return_their_out_parameters() {
    let _serial = serial();
    let e = env(700);
    let drv = d();
    assert_eq!(init::driver_get_version(drv), Ok(13000));
    assert_eq!(device::get_count(drv), Ok(2));
    assert_eq!(device::get(drv, 1), Ok(1));
    assert_eq!(code(device::get(drv, 2)), CUresult::CUDA_ERROR_INVALID_DEVICE);
    let err = device::get(drv, 2).unwrap_err();
    assert_eq!(err.call(), "cuDeviceGet");
    assert!(err.to_string().starts_with("cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE"), "{err}");
    assert_eq!(device::get_name(drv, 0).as_deref(), Ok("cuda-sim virtual H100"));
    assert_eq!(device::get_pci_bus_id(drv, 1).as_deref(), Ok("0000:28:00.0"));
    assert_ne!(device::get_uuid(drv, 0), device::get_uuid(drv, 1));
    assert_eq!(device::total_mem(drv, 0), Ok(16 << 30));
    assert_eq!(device::can_access_peer(drv, 0, 1), Ok(true));
    assert_eq!(device::can_access_peer(drv, 0, 0), Ok(false));
    let sms = device::get_attribute(drv, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
    assert_eq!(sms, Ok(132));
    assert_eq!(context::get_current(drv), Ok(Some(e.ctx.as_raw())));
    assert_eq!(context::get_device(drv), Ok(0));
    let (least, greatest) = context::get_stream_priority_range(drv).expect("range");
    assert!(greatest < least, "({least}, {greatest})");
    context::synchronize(drv).expect("cuCtxSynchronize");
    let (free, total) = memory::get_info(drv).expect("cuMemGetInfo");
    assert!(free <= total && total == 16 << 30);
    let name = r::error::get_error_name(drv, CUresult::CUDA_ERROR_INVALID_VALUE).expect("known code");
    assert_eq!(name.to_str(), Ok("CUDA_ERROR_INVALID_VALUE"));
    assert!(r::error::get_error_string(drv, CUresult::CUDA_ERROR_INVALID_VALUE).is_ok());
    // Unbinding and binding again.
    context::set_current(drv, None::<BorrowedContext<'_>>).expect("unbind");
    assert_eq!(context::get_current(drv), Ok(None));
    assert_eq!(code(context::get_device(drv)), CUresult::CUDA_ERROR_INVALID_CONTEXT);
    context::set_current(drv, Some(e.ctx)).expect("bind");
    teardown(e);
}

#[test]
fn streams_events_and_copies_round_trip() {
    let _serial = serial();
    let e = env(701);
    let drv = d();
    let s1 = e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0);
    let s2 = stream::create_with_priority(drv, 0, -1).expect("a high-priority stream");
    assert_eq!(stream::get_flags(&s1), Ok(CUstream_flags::CU_STREAM_NON_BLOCKING.0));
    assert_eq!(stream::get_priority(&s2), Ok(-1));
    assert_eq!(stream::is_capturing(&s1), Ok(CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE));

    let n = 256usize;
    let a = memory::alloc_async(n * 4, &s1).expect("cuMemAllocAsync");
    e.fill(&s1, a, 7, n as u64);
    let done = e.event(CUevent_flags::CU_EVENT_DISABLE_TIMING.0);
    event::record(&done, &s1).expect("cuEventRecord");
    stream::wait_event(&s2, &done, 0).expect("cuStreamWaitEvent");
    let b = memory::alloc(drv, n * 4).expect("cuMemAlloc");
    // SAFETY: both ranges are allocations of `n * 4` bytes; s2 waits for the
    // fill of `a` on s1 (the event) before the copy reads it.
    unsafe { memory::memcpy_dtod_async(b, a, n * 4, &s2) }.expect("cuMemcpyDtoDAsync");
    let host = e.pinned(n * 4, 0);
    // SAFETY: `host` is pinned memory of `n * 4` bytes, read only after the
    // stream synchronization below; the copy follows the D2D on s2.
    unsafe { memory::memcpy_dtoh_async(host.cast(), b, n * 4, &s2) }.expect("cuMemcpyDtoHAsync");
    stream::synchronize(&s2).expect("cuStreamSynchronize");
    assert_eq!(stream::query(&s2), Ok(true));
    assert_eq!(event::query(&done), Ok(true));
    // SAFETY: the copy into `host` completed (synchronized above).
    let got = unsafe { std::slice::from_raw_parts(host.cast::<u32>(), n) };
    assert!(got.iter().all(|v| *v == 7), "{:?}", &got[..4]);

    // memset, H2D, then read back.
    // SAFETY: `b` holds `n` words, ordered on s2 after the copies above.
    unsafe { memory::memset_d32_async(b, 9, n, &s2) }.expect("cuMemsetD32Async");
    // SAFETY: as above, the first 4 bytes.
    unsafe { memory::memset_d8_async(b, 1, 4, &s2) }.expect("cuMemsetD8Async");
    stream::synchronize(&s2).expect("sync");
    assert_eq!(e.read_u32(b, 2), [0x0101_0101, 9]);
    let src = [3u32; 4];
    // SAFETY: `src` is read synchronously (pageable) and outlives the call.
    unsafe { memory::memcpy_htod_async(b, src.as_ptr().cast(), 16, &s2) }.expect("cuMemcpyHtoDAsync");
    stream::synchronize(&s2).expect("sync");
    assert_eq!(e.read_u32(b, 5), [3, 3, 3, 3, 9]);

    // Timing events.
    let (t0, t1) = (e.event(0), e.event(0));
    event::record(&t0, &s1).expect("record");
    e.fill(&s1, a, 1, n as u64);
    event::record(&t1, &s1).expect("record");
    event::synchronize(&t1).expect("cuEventSynchronize");
    assert!(event::elapsed_time(&t0, &t1).expect("cuEventElapsedTime") >= 0.0);
    assert_eq!(code(event::elapsed_time(&done, &t1)), CUresult::CUDA_ERROR_INVALID_HANDLE);

    // SAFETY: every use of `a` was on s1 and `b` on s2, both synchronized;
    // `host` is no longer read.
    unsafe {
        memory::free_async(a, &s1).expect("cuMemFreeAsync");
        memory::free(drv, b).expect("cuMemFree");
        memory::free_host(drv, host.cast()).expect("cuMemFreeHost");
    }
    stream::synchronize(&s1).expect("sync");
    // Explicit destroy and drop both release the objects.
    event::destroy(t0).expect("cuEventDestroy");
    drop((t1, done, s1));
    stream::destroy(s2).expect("cuStreamDestroy");
    teardown(e);
}

#[test]
fn default_streams_are_borrowed_for_the_drivers_life() {
    let _serial = serial();
    let e = env(702);
    let drv = d();
    let p = e.alloc(64);
    for s in [BorrowedStream::legacy(drv), BorrowedStream::per_thread(drv), BorrowedStream::null(drv)] {
        e.fill(s, p, 5, 16);
        stream::synchronize(s).expect("sync");
        assert_eq!(e.read_u32(p, 16), [5; 16]);
    }
    // SAFETY: no work uses `p` any more (synchronized).
    unsafe { memory::free(drv, p) }.expect("cuMemFree");
    teardown(e);
}

#[test]
fn owned_handles_destroy_on_drop_and_into_raw_gives_ownership_back() {
    let _serial = serial();
    let e = env(703);
    let base = e.session.live();
    {
        let _s = e.stream(0);
        let _ev = e.event(0);
        assert_eq!(e.session.live().streams, base.streams + 1);
        assert_eq!(e.session.live().events, base.events + 1);
    }
    assert_eq!(e.session.live(), base, "dropping the owners destroyed them");

    // into_raw: the drop no longer destroys; from_raw takes it back.
    let raw = e.stream(0).into_raw();
    assert_eq!(e.session.live().streams, base.streams + 1);
    // SAFETY: `raw` is the live stream just released by `into_raw`.
    let again = unsafe { OwnedStream::from_raw(d(), raw) };
    drop(again);
    assert_eq!(e.session.live(), base);
    teardown(e);
}

#[test]
fn a_failing_destroy_is_logged_and_leaks_instead_of_panicking() {
    let _serial = serial();
    let e = env(704);
    let (s1, s2) = (e.stream(0), e.stream(0));
    let raws = [s1.as_raw(), s2.as_raw()];
    e.session.inject(FaultPlan::new().fail_every("cuStreamDestroy", CUresult::CUDA_ERROR_INVALID_VALUE));
    drop(s1); // logs; no panic
    assert_eq!(e.session.live().streams, 2, "the stream is leaked, not half-destroyed");
    let err = s2.destroy().expect_err("the fault plan fails it");
    assert_eq!(err.result(), Some(CUresult::CUDA_ERROR_INVALID_VALUE));
    assert_eq!(err.call(), "cuStreamDestroy");
    assert_eq!(e.session.live().streams, 2);
    e.session.clear_faults();
    for raw in raws {
        // SAFETY: both streams are still live (their destroys failed) and
        // nothing else owns them.
        unsafe { OwnedStream::from_raw(d(), raw) }.destroy().expect("now it goes");
    }
    teardown(e);
}

#[test]
fn modules_functions_and_launches() {
    let _serial = serial();
    let e = env(705);
    let f = e.function("sim_fill_u32");
    assert_eq!(function::get_param_info(f, 0), Ok((0, 8)));
    assert_eq!(function::get_param_info(f, 1), Ok((8, 4)));
    assert_eq!(function::get_param_info(f, 2), Ok((16, 8)));
    assert_eq!(code(function::get_param_info(f, 3)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(function::get_name(f).as_deref(), Ok("sim_fill_u32"));
    let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    function::set_attribute(f, attr, 1024).expect("cuFuncSetAttribute");
    assert_eq!(function::get_attribute(f, attr), Ok(1024));
    let missing = std::ffi::CString::new("no_such_kernel").unwrap();
    assert_eq!(code(module::get_function(e.module(), &missing)), CUresult::CUDA_ERROR_NOT_FOUND);

    let s = e.stream(0);
    let p = memory::alloc_async(64, &s).expect("alloc");
    let (mut ptr, mut v, mut n) = (p, 4u32, 16u64);
    let mut params = [arg(&mut ptr), arg(&mut v), arg(&mut n)];
    // SAFETY: sim_fill_u32(ptr, v, n) writes n words of `p` (64 bytes).
    unsafe { launch::launch_kernel(f, [1, 1, 1], [32, 1, 1], 0, &s, &mut params) }.expect("launch");
    stream::synchronize(&s).expect("sync");
    assert_eq!(e.read_u32(p, 16), [4; 16]);
    // SAFETY: the launch completed.
    unsafe { memory::free_async(p, &s) }.expect("free");
    drop(s);
    teardown(e);
}

#[test]
fn capture_instantiate_and_replay_a_graph() {
    let _serial = serial();
    let e = env(706);
    let s = e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0);
    let p = e.alloc(64);
    // SAFETY: `p` holds 16 words; synchronized before anything else uses it.
    unsafe { memory::memset_d32_async(p, 0, 16, &s) }.expect("cuMemsetD32Async");
    stream::synchronize(&s).expect("sync");
    stream::begin_capture(&s, CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).expect("begin");
    assert_eq!(stream::is_capturing(&s), Ok(CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE));
    e.fill(&s, p, 8, 16);
    let graph = stream::end_capture(&s).expect("cuStreamEndCapture");
    assert_eq!(graph::node_count(&graph), Ok(1));
    assert_eq!(graph::get_nodes(&graph).map(|v| v.len()), Ok(1));
    let exec = graph::instantiate_with_flags(&graph, 0).expect("instantiate");
    graph::destroy(graph).expect("cuGraphDestroy");
    assert_eq!(e.read_u32(p, 1), [0], "capturing ran nothing");
    graph::launch(&exec, &s).expect("cuGraphLaunch");
    stream::synchronize(&s).expect("sync");
    assert_eq!(e.read_u32(p, 16), [8; 16]);
    graph::exec_destroy(exec).expect("cuGraphExecDestroy");
    assert_eq!(code(stream::end_capture(&s)), CUresult::CUDA_ERROR_ILLEGAL_STATE);
    // SAFETY: the replay completed.
    unsafe { memory::free(d(), p) }.expect("free");
    drop(s);
    teardown(e);
}

#[test]
fn event_record_nodes_record_their_events_at_each_replay() {
    let _serial = serial();
    let e = env(712);
    let s = e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0);
    let (a, b) = (e.event(0), e.event(0));
    let p = e.alloc(1 << 20);
    let external = CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL.0;
    // EXTERNAL is for captures only; an unknown flag is refused; DEFAULT
    // is a plain record.
    assert_eq!(code(event::record_with_flags(&a, &s, external)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(code(event::record_with_flags(&a, &s, 2)), CUresult::CUDA_ERROR_INVALID_VALUE);
    event::record_with_flags(&a, &s, 0).expect("default record");
    e.fill(&s, p, 3, 1 << 18);
    event::record_with_flags(&b, &s, 0).expect("default record");
    stream::synchronize(&s).expect("sync");
    let eager = event::elapsed_time(&a, &b).expect("elapsed of the eager pair");
    assert!(eager > 0.0, "{eager}");

    // Captured: start node → the fill → end node, three nodes.
    stream::begin_capture(&s, CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).expect("begin");
    event::record_with_flags(&a, &s, external).expect("event-record node");
    e.fill(&s, p, 5, 1 << 18);
    event::record_with_flags(&b, &s, external).expect("event-record node");
    let graph = stream::end_capture(&s).expect("cuStreamEndCapture");
    assert_eq!(graph::node_count(&graph), Ok(3));
    let exec = graph::instantiate_with_flags(&graph, 0).expect("instantiate");
    for round in 0..2 {
        graph::launch(&exec, &s).expect("cuGraphLaunch");
        event::synchronize(&b).expect("the end node's record completes with the replay");
        let replay = event::elapsed_time(&a, &b).expect("elapsed between the nodes");
        // The nodes' events span the fill alone, as the eager pair did.
        assert!((replay - eager).abs() <= eager * 1e-3, "round {round}: {replay} vs {eager}");
    }
    assert_eq!(e.read_u32(p, 4), [5; 4]);
    graph::exec_destroy(exec).expect("cuGraphExecDestroy");
    graph::destroy(graph).expect("cuGraphDestroy");
    // SAFETY: the replays completed.
    unsafe { memory::free(d(), p) }.expect("free");
    drop((a, b, s));
    teardown(e);
}

#[test]
fn the_default_pool_is_typed_per_attribute() {
    let _serial = serial();
    let e = env(707);
    let pool = device::get_default_mem_pool(d(), 0).expect("default pool");
    use CUmemPool_attribute as P;
    mem_pool::set_attribute(pool, P::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, u64::MAX).expect("set threshold");
    assert_eq!(mem_pool::get_attribute(pool, P::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), Ok(u64::MAX));
    assert_eq!(mem_pool::get_attribute(pool, P::CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC), Ok(1));
    let s = e.stream(0);
    let p = memory::alloc_async(1 << 20, &s).expect("alloc");
    assert!(mem_pool::get_attribute(pool, P::CU_MEMPOOL_ATTR_USED_MEM_CURRENT).expect("used") >= 1 << 20);
    // SAFETY: `p` was never used.
    unsafe { memory::free_async(p, &s) }.expect("free");
    stream::synchronize(&s).expect("sync");
    mem_pool::trim_to(pool, 0).expect("cuMemPoolTrimTo");
    let err = mem_pool::get_attribute(pool, CUmemPool_attribute(99)).expect_err("untyped attribute");
    assert!(matches!(err, DriverError::Refused { call: "cuMemPoolGetAttribute", .. }), "{err}");
    drop(s);
    teardown(e);
}

#[test]
fn a_missing_entry_point_is_unsupported_naming_the_version_it_needs() {
    let _serial = serial();
    let e = env(708);
    // The simulator's functions behind a table that lacks cuFuncGetParamInfo
    // and cuMemAllocAsync, as a CUDA 12.0 driver would.
    let old = second_table(|t| {
        t.cuFuncGetParamInfo = None;
        t.cuMemAllocAsync = None;
    });
    assert_eq!(old.missing(), ["cuMemAllocAsync", "cuFuncGetParamInfo"]);
    // SAFETY: a NUL-terminated PTX image.
    let m = unsafe { module::load_data(old, PTX.as_ptr().cast()) }.expect("load through the old table");
    let name = std::ffi::CString::new("sim_fill_u32").unwrap();
    let f = module::get_function(m.as_borrowed(), &name).expect("function");
    let err = function::get_param_info(f, 0).expect_err("no entry point");
    assert_eq!(err, DriverError::Unsupported { call: "cuFuncGetParamInfo", needs: 12040, have: 13000 });
    assert_eq!(err.to_string(), "cuFuncGetParamInfo needs a CUDA 12.4 driver; this driver is CUDA 13.0");
    let s = stream::create_with_priority(old, 0, 0).expect("stream");
    let err = memory::alloc_async(16, &s).expect_err("no entry point");
    assert!(matches!(err, DriverError::Unsupported { call: "cuMemAllocAsync", needs: 11020, .. }), "{err}");
    drop((s, m));
    teardown(e);
}

#[test]
fn handles_of_two_tables_never_meet_in_one_call() {
    let _serial = serial();
    let e = env(709);
    let other = second_table(|_| {});
    let s = e.stream(0);
    let foreign = event::create(other, 0).expect("an event of the other table");
    let calls = e.session.calls().len();
    let err = stream::wait_event(&s, &foreign, 0).expect_err("refused");
    assert!(matches!(err, DriverError::Refused { call: "cuStreamWaitEvent", .. }), "{err}");
    assert!(matches!(event::record(&foreign, &s), Err(DriverError::Refused { call: "cuEventRecord", .. })));
    let f = e.function("sim_spin");
    let other_stream = stream::create_with_priority(other, 0, 0).expect("stream");
    let calls_before = e.session.calls().len();
    let mut cycles = 0u64;
    // SAFETY: refused before the driver sees the parameters.
    let r = unsafe { launch::launch_kernel(f, [1; 3], [1; 3], 0, &other_stream, &mut [arg(&mut cycles)]) };
    assert!(matches!(r, Err(DriverError::Refused { call: "cuLaunchKernel", .. })), "{r:?}");
    assert_eq!(e.session.calls().len(), calls_before, "a refused call never reaches the driver");
    assert!(calls < calls_before);
    drop((s, foreign, other_stream));
    teardown(e);
}

#[test]
fn a_host_function_runs_in_stream_order() {
    let _serial = serial();
    let e = env(710);
    let s = e.stream(0);
    let p = e.alloc(4);
    e.fill(&s, p, 6, 1);
    unsafe extern "C" fn set(user: *mut c_void) {
        // SAFETY: `user` is the `AtomicU32` below, alive until the stream
        // synchronized.
        unsafe { &*user.cast::<std::sync::atomic::AtomicU32>() }
            .store(1, std::sync::atomic::Ordering::SeqCst);
    }
    let flag = std::sync::atomic::AtomicU32::new(0);
    // SAFETY: `set` only stores to `flag`, which outlives the synchronize
    // below; it makes no CUDA call.
    unsafe {
        stream::launch_host_func(
            &s,
            Some(set),
            (&flag as *const std::sync::atomic::AtomicU32).cast_mut().cast(),
        )
    }
    .expect("cuLaunchHostFunc");
    stream::synchronize(&s).expect("sync");
    assert_eq!(flag.load(std::sync::atomic::Ordering::SeqCst), 1);
    // SAFETY: synchronized.
    unsafe { memory::free(d(), p) }.expect("free");
    drop(s);
    teardown(e);
}
