//! Driver semantics: devices, contexts, memory, copies, events, errors.

mod common;
use common::*;
use std::ffi::{CStr, c_char, c_void};
use std::ptr::null_mut;

#[test]
fn devices_look_like_h100s() {
    let _serial = serial();
    let e = env(1);
    assert_eq!(device::get_count(d()), Ok(2));
    assert_eq!(device::get(d(), 1), Ok(1));
    assert_eq!(code(device::get(d(), 2)), CUresult::CUDA_ERROR_INVALID_DEVICE);
    let a = |attr: CUdevice_attribute| device::get_attribute(d(), attr, 0).unwrap();
    use CUdevice_attribute as A;
    assert_eq!(a(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 132);
    assert_eq!(a(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE), 1_980_000);
    assert_eq!(a(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), 232_448);
    assert_eq!(a(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), 2_147_483_647);
    assert_eq!(
        (
            a(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            a(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        ),
        (9, 0)
    );
    assert_eq!(a(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED), 1);
    assert_eq!(
        code(device::get_attribute(d(), A::CU_DEVICE_ATTRIBUTE_MAX, 0)),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );
    // A null output slot: only the raw table can pass one.
    assert_eq!(
        raw!(cuDeviceGetAttribute(null_mut(), A::CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0)),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );

    e.session.set_attribute(0, A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
    assert_eq!(a(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED), 0);
    assert_eq!(code(device::get_default_mem_pool(d(), 0)), CUresult::CUDA_ERROR_NOT_SUPPORTED);
    assert_eq!(code(memory::alloc_async(16, BorrowedStream::null(d()))), CUresult::CUDA_ERROR_NOT_SUPPORTED);

    assert_eq!(device::get_name(d(), 0).as_deref(), Ok("cuda-sim virtual H100"));
    // A short buffer truncates (raw: the per-call layer passes 256 bytes).
    let mut name = [0 as c_char; 64];
    assert_eq!(raw!(cuDeviceGetName(name.as_mut_ptr(), 5, 0)), OK);
    // SAFETY: the simulator NUL-terminates the name, truncated to 4 characters.
    assert_eq!(unsafe { CStr::from_ptr(name.as_ptr()) }.to_str().unwrap(), "cuda");
    assert_eq!(device::get_pci_bus_id(d(), 1).as_deref(), Ok("0000:28:00.0"));
    assert_ne!(device::get_uuid(d(), 0).unwrap(), device::get_uuid(d(), 1).unwrap());
    assert_eq!(device::total_mem(d(), 0), Ok(16 << 30));
    assert_eq!(device::can_access_peer(d(), 0, 1), Ok(true));
    assert_eq!(device::can_access_peer(d(), 0, 0), Ok(false));
    assert_eq!(init::driver_get_version(d()), Ok(13000));
    assert_eq!(code(init::init(d(), 1)), CUresult::CUDA_ERROR_INVALID_VALUE);
    teardown(e);
}

#[test]
fn contexts_are_per_thread_and_peer_access_enables_once() {
    let _serial = serial();
    let e = env(2);
    assert_eq!(context::get_current(d()), Ok(Some(e.ctx.as_raw())));
    assert_eq!(context::get_device(d()), Ok(0));
    assert_eq!(context::get_stream_priority_range(d()), Ok((0, -5)));
    let ctx1 = primary_ctx::retain(d(), 1).unwrap();
    assert_ne!(ctx1, e.ctx);
    context::enable_peer_access(ctx1, 0).unwrap();
    assert_eq!(code(context::enable_peer_access(ctx1, 0)), CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    // SAFETY: nothing of device 1's context is used afterwards (the
    // simulator checks handles anyway).
    unsafe { primary_ctx::release(d(), 1) }.unwrap();
    // SAFETY: as above; this release has nothing left to release.
    assert_eq!(code(unsafe { primary_ctx::release(d(), 1) }), CUresult::CUDA_ERROR_INVALID_CONTEXT);

    // Another thread has no current context until it sets one.
    let sid = &e.session;
    std::thread::scope(|s| {
        s.spawn(|| {
            let _g = sid.enter();
            assert_eq!(context::get_current(d()), Ok(None));
            assert_eq!(code(memory::alloc(d(), 16)), CUresult::CUDA_ERROR_INVALID_CONTEXT);
            assert_eq!(code(context::synchronize(d())), CUresult::CUDA_ERROR_INVALID_CONTEXT);
            // A bogus context: only the raw table can pass one.
            assert_eq!(
                raw!(cuCtxSetCurrent(std::ptr::without_provenance_mut(0x1234))),
                CUresult::CUDA_ERROR_INVALID_CONTEXT
            );
        });
    });
    teardown(e);
}

#[test]
fn memory_round_trips_through_pageable_and_pinned_host_memory() {
    let _serial = serial();
    let e = env(3);
    let s = e.stream(0);
    let n = 1000usize;
    let src: Vec<u32> = (0..n as u32).collect();
    let a = e.alloc(n * 4);
    let b = e.alloc(n * 4);
    // Fresh memory is poison-filled.
    assert_eq!(e.read_u32(a, 2), vec![0xCDCD_CDCD; 2]);
    sim::htod(a, src.as_ptr().cast(), n * 4, &s).unwrap();
    sim::dtod(b, a, n * 4, &s).unwrap();
    let pinned = e.pinned(n * 4, 0);
    sim::dtoh(pinned, b, n * 4, &s).unwrap();
    stream::synchronize(&s).unwrap();
    cuda_sim::host_read(pinned, n * 4);
    // SAFETY: `pinned` holds `n` u32 written by the copy, synchronized above.
    let got = unsafe { std::slice::from_raw_parts(pinned.cast::<u32>(), n) }.to_vec();
    assert_eq!(got, src);
    // Pageable D2H blocks until done; memsets.
    sim::memset32(a, 7, n, &s).unwrap();
    sim::memset8(b + 4, 0xAB, 4, &s).unwrap();
    let mut out = vec![0u32; n];
    sim::dtoh(out.as_mut_ptr().cast(), a, n * 4, &s).unwrap();
    assert!(out.iter().all(|&v| v == 7));
    assert_eq!(e.read_u32(b, 3), vec![0, 0xABAB_ABAB, 2]);
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());

    // Bad ranges fail at call time.
    assert_eq!(code(sim::dtod(b, a, n * 4 + 1, &s)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(code(sim::memset32(a + 2, 0, 1, &s)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(code(sim::htod(a, std::ptr::null(), 4, &s)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(raw!(cuMemAlloc(null_mut(), 4)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(code(memory::alloc(d(), 0)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(code(memory::alloc(d(), 17usize << 30)), CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    let (free, total) = memory::get_info(d()).unwrap();
    assert!(free <= total - 2 * n * 4);

    // Device-mapped pinned memory is addressable from the device.
    let mapped = e.pinned(16, CU_MEMHOSTALLOC_DEVICEMAP);
    let dp = memory::host_get_device_pointer(d(), mapped.cast(), 0).unwrap();
    assert_eq!(dp, mapped as u64);
    e.fill(&s, dp, 5, 4);
    stream::synchronize(&s).unwrap();
    // SAFETY: 16 bytes written by the kernel, synchronized above.
    assert_eq!(unsafe { std::slice::from_raw_parts(mapped.cast::<u32>(), 4) }, [5; 4]);
    assert_eq!(
        code(memory::host_get_device_pointer(d(), pinned.cast(), 0)),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );

    sim::free_host(mapped).unwrap();
    sim::free_host(pinned).unwrap();
    sim::free(a).unwrap();
    sim::free(b).unwrap();
    stream::destroy(s).unwrap();
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    teardown(e);
}

#[test]
fn stream_ordered_allocation_and_pool_statistics() {
    let _serial = serial();
    let e = env(4);
    let s = e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0);
    let pool = device::get_default_mem_pool(d(), 0).unwrap();
    let get = |attr: CUmemPool_attribute| mem_pool::get_attribute(pool, attr).unwrap();
    use CUmemPool_attribute as P;
    let a = memory::alloc_async(3 << 20, &s).unwrap();
    assert_eq!(get(P::CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3 << 20);
    assert_eq!(get(P::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 << 20);
    e.fill(&s, a, 1, 4);
    sim::free_async(a, &s).unwrap();
    stream::synchronize(&s).unwrap();
    assert_eq!(get(P::CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    assert_eq!(get(P::CU_MEMPOOL_ATTR_USED_MEM_HIGH), 3 << 20);
    assert_eq!(get(P::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 4 << 20);
    mem_pool::set_attribute(pool, P::CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0).unwrap();
    assert_eq!(get(P::CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
    mem_pool::set_attribute(pool, P::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, u64::MAX).unwrap();
    let a = memory::alloc_async(1 << 20, &s).unwrap();
    sim::free_async(a, &s).unwrap();
    stream::synchronize(&s).unwrap();
    assert_eq!(get(P::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 << 20);
    mem_pool::trim_to(pool, 0).unwrap();
    assert_eq!(get(P::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    let r = code(mem_pool::set_attribute(pool, P::CU_MEMPOOL_ATTR_USED_MEM_HIGH, 1));
    assert_eq!(r, CUresult::CUDA_ERROR_INVALID_VALUE);
    stream::destroy(s).unwrap();
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    teardown(e);
}

#[test]
fn events_time_simulated_work_exactly() {
    let _serial = serial();
    let e = env(5);
    let s = e.stream(0);
    let (start, end) = (e.event(0), e.event(0));
    let spin = e.function("sim_spin");
    let mut cycles: u64 = 1_980_000; // 1 ms at 1.98 GHz
    event::record(&start, &s).unwrap();
    assert_eq!(e.launch(spin, &s, &mut [arg(&mut cycles)]), OK);
    event::record(&end, &s).unwrap();
    // Not complete yet (nothing ran: no sync).
    assert_eq!(code(event::elapsed_time(&start, &end)), CUresult::CUDA_ERROR_NOT_READY);
    event::synchronize(&end).unwrap();
    assert_eq!(event::elapsed_time(&start, &end), Ok(1.0));

    // A 64 KiB H2D copy: 2 µs + 65536 B / 25 GB/s.
    let buf = e.alloc(65536);
    let host = e.pinned(65536, 0);
    event::record(&start, &s).unwrap();
    sim::htod(buf, host, 65536, &s).unwrap();
    event::record(&end, &s).unwrap();
    stream::synchronize(&s).unwrap();
    assert_eq!(event::elapsed_time(&start, &end), Ok((4622.0f64 / 1e6) as f32));

    // Disabled timing and never-recorded events are invalid handles here.
    let nt = e.event(CUevent_flags::CU_EVENT_DISABLE_TIMING.0);
    let fresh = e.event(0);
    event::record(&nt, &s).unwrap();
    stream::synchronize(&s).unwrap();
    assert_eq!(code(event::elapsed_time(&start, &nt)), CUresult::CUDA_ERROR_INVALID_HANDLE);
    assert_eq!(code(event::elapsed_time(&start, &fresh)), CUresult::CUDA_ERROR_INVALID_HANDLE);
    assert_eq!(
        raw!(cuEventElapsedTime(null_mut(), start.as_raw(), end.as_raw())),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );
    // A never-recorded event is complete.
    assert_eq!(event::query(&fresh), Ok(true));
    event::synchronize(&fresh).unwrap();
    let raw_start = start.as_raw();
    for ev in [start, end, nt, fresh] {
        event::destroy(ev).unwrap();
    }
    assert_eq!(raw!(cuEventDestroy(raw_start)), CUresult::CUDA_ERROR_INVALID_HANDLE);
    sim::free_host(host).unwrap();
    sim::free(buf).unwrap();
    stream::destroy(s).unwrap();
    teardown(e);
}

#[test]
fn waits_follow_the_latest_record_at_call_time() {
    let _serial = serial();
    let e = env(6);
    let (a, b) = (
        e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0),
        e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0),
    );
    let ev = e.event(CUevent_flags::CU_EVENT_DISABLE_TIMING.0);
    let buf = e.alloc(64);
    // Waiting on a never-recorded event is a no-op: b runs without waiting.
    stream::wait_event(&b, &ev, 0).unwrap();
    e.fill(&a, buf, 1, 16);
    event::record(&ev, &a).unwrap();
    e.fill(&a, buf, 2, 16); // after the record: the wait does not cover it
    stream::wait_event(&b, &ev, 0).unwrap();
    event::record(&ev, &a).unwrap(); // re-record: supersedes, but b's wait was already taken
    let out = e.pinned(64, 0);
    sim::dtoh(out, buf, 64, &b).unwrap();
    context::synchronize(d()).unwrap();
    // Exactly one race: the fill recorded after the event against the copy.
    let races = e.session.take_races();
    assert_eq!(races.len(), 1, "{races:?}");
    let ops = [races[0].first.op.as_str(), races[0].second.op.as_str()];
    assert!(
        ops.contains(&"kernel sim_fill_u32 param 0 (write)") && ops.contains(&"cuMemcpyDtoHAsync source"),
        "{races:?}"
    );
    sim::free_host(out).unwrap();
    sim::free(buf).unwrap();
    event::destroy(ev).unwrap();
    stream::destroy(a).unwrap();
    stream::destroy(b).unwrap();
    teardown(e);
}

#[test]
fn queries_answer_not_ready_until_the_work_ran() {
    let _serial = serial();
    let mut saw_not_ready = false;
    for seed in 0..16 {
        let e = env(100 + seed);
        let s = e.stream(0);
        let ev = e.event(0);
        let buf = e.alloc(64);
        for v in 0..8 {
            e.fill(&s, buf, v, 16);
        }
        event::record(&ev, &s).unwrap();
        // `Ok(false)` is CUDA_ERROR_NOT_READY; anything else is an error.
        let q = stream::query(&s).unwrap();
        let _ = event::query(&ev).unwrap();
        saw_not_ready |= !q;
        stream::synchronize(&s).unwrap();
        assert_eq!(stream::query(&s), Ok(true));
        assert_eq!(event::query(&ev), Ok(true));
        assert_eq!(e.read_u32(buf, 1), vec![7]);
        sim::free(buf).unwrap();
        event::destroy(ev).unwrap();
        stream::destroy(s).unwrap();
        teardown(e);
    }
    assert!(saw_not_ready);
}

#[test]
fn streams_report_priority_and_flags() {
    let _serial = serial();
    let e = env(7);
    let s = stream::create_with_priority(d(), CUstream_flags::CU_STREAM_NON_BLOCKING.0, -100).unwrap();
    assert_eq!((stream::get_priority(&s), stream::get_flags(&s)), (Ok(-5), Ok(1)));
    let s2 = stream::create_with_priority(d(), 0, 7).unwrap();
    assert_eq!(stream::get_priority(&s2), Ok(0));
    assert_eq!(stream::get_priority(BorrowedStream::legacy(d())), Ok(0));
    assert_eq!(code(stream::create_with_priority(d(), 4, 0)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(raw!(cuStreamDestroy(null_mut())), CUresult::CUDA_ERROR_INVALID_HANDLE);
    // Destroying a stream with pending work: the work still completes.
    let buf = e.alloc(16);
    e.fill(&s, buf, 9, 4);
    let raw_s = s.as_raw();
    stream::destroy(s).unwrap();
    assert_eq!(code(stream::synchronize(raw_stream(raw_s))), CUresult::CUDA_ERROR_INVALID_HANDLE);
    context::synchronize(d()).unwrap();
    assert_eq!(e.read_u32(buf, 4), vec![9; 4]);
    sim::free(buf).unwrap();
    stream::destroy(s2).unwrap();
    teardown(e);
}

#[test]
fn the_legacy_stream_orders_with_blocking_streams_only() {
    let _serial = serial();
    let e = env(8);
    let blocking = e.stream(0);
    let buf = e.alloc(64);
    // Blocking stream writes, legacy stream reads: implicitly ordered.
    e.fill(&blocking, buf, 3, 16);
    let mut out = vec![0u32; 16];
    sim::dtoh(out.as_mut_ptr().cast(), buf, 64, BorrowedStream::legacy(d())).unwrap();
    assert_eq!(out, vec![3; 16]);
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    // A non-blocking stream is not ordered with the legacy stream.
    let nb = e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0);
    e.fill(&nb, buf, 4, 16);
    e.fill(BorrowedStream::null(d()), buf, 5, 16);
    context::synchronize(d()).unwrap();
    assert!(!e.session.take_races().is_empty());
    // The per-thread stream is blocking too.
    e.fill(BorrowedStream::per_thread(d()), buf, 6, 16);
    e.fill(BorrowedStream::legacy(d()), buf, 7, 16);
    context::synchronize(d()).unwrap();
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    sim::free(buf).unwrap();
    stream::destroy(blocking).unwrap();
    stream::destroy(nb).unwrap();
    teardown(e);
}

#[test]
fn modules_functions_and_launch_validation() {
    let _serial = serial();
    let e = env(9);
    // SAFETY: NUL-terminated text the simulator rejects as an image.
    let garbage = unsafe { module::load_data(d(), c"garbage".as_ptr().cast()) };
    assert_eq!(code(garbage), CUresult::CUDA_ERROR_INVALID_IMAGE);
    let fatbin = 0xBA55_ED50u32.to_le_bytes();
    // SAFETY: the simulator reads only the 4-byte fatbin magic.
    let m = unsafe { module::load_data(d(), fatbin.as_ptr().cast()) }.unwrap();
    module::unload(m).unwrap();
    // SAFETY: the simulator reads only the 6-byte ELF header prefix.
    let m = unsafe { module::load_data(d(), b"\x7fELF\x02\x01".as_ptr().cast()) }.unwrap();
    module::unload(m).unwrap();
    assert_eq!(code(module::get_function(e.module(), c"no_such_kernel")), CUresult::CUDA_ERROR_NOT_FOUND);
    let f = e.function("sim_fill_u32");
    assert_eq!(function::get_param_info(f, 1), Ok((8, 4)));
    // A null size slot is allowed (raw: the layer always asks for both).
    let mut off = 0usize;
    assert_eq!(raw!(cuFuncGetParamInfo(f.as_raw(), 2, &mut off, null_mut())), OK);
    assert_eq!(off, 16);
    assert_eq!(code(function::get_param_info(f, 3)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(function::get_name(f).as_deref(), Ok("sim_fill_u32"));
    use CUfunction_attribute as F;
    assert_eq!(function::get_attribute(f, F::CU_FUNC_ATTRIBUTE_NUM_REGS), Ok(32));
    function::set_attribute(f, F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100_000).unwrap();
    assert_eq!(function::get_attribute(f, F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), Ok(100_000));
    assert_eq!(
        code(function::set_attribute(f, F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 300_000)),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );

    let buf = e.alloc(64);
    let (mut p, mut val, mut n) = (buf, 1u32, 16u64);
    let mut args = [arg(&mut p), arg(&mut val), arg(&mut n)];
    let s = BorrowedStream::null(d());
    let launch = |g: [u32; 3], b: [u32; 3], shared: u32, args: &mut [*mut c_void]| {
        // SAFETY: `args` are sim_fill_u32's three parameters (or none, which
        // the simulator rejects); the kernel writes 16 words of `buf`.
        code(unsafe { launch::launch_kernel(f, g, b, shared, s, args) })
    };
    assert_eq!(launch([1, 1, 1], [1025, 1, 1], 0, &mut args), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(launch([1, 1, 1], [32, 32, 2], 0, &mut args), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(launch([0, 1, 1], [1, 1, 1], 0, &mut args), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(launch([1, 65536, 1], [1, 1, 1], 0, &mut args), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(launch([1, 1, 1], [1, 1, 1], 100_001, &mut args), CUresult::CUDA_ERROR_INVALID_VALUE);
    // `extra` (raw: the per-call layer never passes one).
    let mut extra = [null_mut::<c_void>()];
    let r = raw!(cuLaunchKernel(
        f.as_raw(),
        1,
        1,
        1,
        1,
        1,
        1,
        0,
        null_mut(),
        args.as_mut_ptr(),
        extra.as_mut_ptr()
    ));
    assert_eq!(r, CUresult::CUDA_ERROR_NOT_SUPPORTED);
    assert_eq!(launch([1, 1, 1], [1, 1, 1], 0, &mut []), CUresult::CUDA_ERROR_INVALID_VALUE, "no parameters");
    assert_eq!(launch([2, 2, 2], [1024, 1, 1], 100_000, &mut args), OK);
    assert_eq!(e.read_u32(buf, 16), vec![1; 16]);
    sim::free(buf).unwrap();
    teardown(e);
}

#[test]
fn kernel_faults_are_sticky_or_reported_at_the_next_sync() {
    let _serial = serial();
    let e = env(10);
    let buf = e.alloc(64);
    let bad = e.function("sim_write_through_read");
    let mut p = buf;
    assert_eq!(e.launch(bad, BorrowedStream::null(d()), &mut [arg(&mut p)]), OK);
    assert_eq!(code(context::synchronize(d())), CUresult::CUDA_ERROR_INVALID_VALUE);
    context::synchronize(d()).unwrap(); // not sticky
    let past = e.function("sim_write_past_end");
    let (mut p, mut n) = (buf, 16u64);
    assert_eq!(e.launch(past, BorrowedStream::null(d()), &mut [arg(&mut p), arg(&mut n)]), OK);
    assert_eq!(code(context::synchronize(d())), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_eq!(code(sim::free(buf)), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_eq!(e.session.sticky_error(), Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
    // Other sessions keep working.
    let other = env(11);
    let b2 = other.alloc(16);
    sim::free(b2).unwrap();
    teardown(other);
}

#[test]
fn host_functions_run_in_order_and_may_not_call_back() {
    let _serial = serial();
    unsafe extern "C" fn call_back(data: *mut c_void) {
        // SAFETY: `data` is the `Vec<CUresult>` the test keeps alive until sync.
        let out = unsafe { &mut *data.cast::<Vec<CUresult>>() };
        out.push(code(context::synchronize(d())));
        out.push(code(device::get_count(d())));
    }
    let e = env(12);
    let s = e.stream(0);
    let mut out: Vec<CUresult> = Vec::new();
    // SAFETY: `call_back` pushes to `out`, which outlives the synchronize
    // below; its CUDA calls are the refusals under test.
    unsafe { stream::launch_host_func(&s, Some(call_back), (&mut out as *mut Vec<CUresult>).cast()) }
        .unwrap();
    assert!(out.is_empty(), "queued, not run");
    stream::synchronize(&s).unwrap();
    assert_eq!(out, vec![CUresult::CUDA_ERROR_NOT_PERMITTED; 2]);
    // SAFETY: no function: the simulator refuses it.
    let none = unsafe { stream::launch_host_func(&s, None, null_mut()) };
    assert_eq!(code(none), CUresult::CUDA_ERROR_INVALID_VALUE);
    stream::destroy(s).unwrap();
    teardown(e);
}

#[test]
fn error_names_and_strings_are_static_and_uncounted() {
    let _serial = serial();
    let e = env(13);
    let before = e.session.calls().len();
    let name = r::error::get_error_name(d(), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS).unwrap();
    assert_eq!(name.to_str(), Ok("CUDA_ERROR_ILLEGAL_ADDRESS"));
    let text = r::error::get_error_string(d(), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS).unwrap();
    assert_eq!(text.to_str(), Ok("an illegal memory access was encountered"));
    let text = r::error::get_error_string(d(), CUresult::CUDA_ERROR_OUT_OF_MEMORY).unwrap();
    assert_eq!(text.to_str(), Ok("out of memory"));
    // Raw, to see the slot left untouched for an unknown code.
    let mut q: *const c_char = std::ptr::null();
    assert_eq!(raw!(cuGetErrorName(CUresult(123_456), &mut q)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert!(q.is_null());
    assert_eq!(e.session.calls().len(), before);
    let msg = cuda_sys::CuError(CUresult::CUDA_ERROR_INVALID_VALUE).to_string();
    assert_eq!(msg, "CUDA_ERROR_INVALID_VALUE (1): invalid argument");
    teardown(e);
}

#[test]
fn a_re_record_supersedes_for_later_waits_and_timestamps() {
    let _serial = serial();
    let e = env(14);
    let nb = CUstream_flags::CU_STREAM_NON_BLOCKING.0;
    let (a, b) = (e.stream(nb), e.stream(nb));
    let (start, ev) = (e.event(0), e.event(0));
    let buf = e.alloc(64);
    let spin = e.function("sim_spin");
    let mut cycles: u64 = 198_000; // 100 µs
    event::record(&start, &a).unwrap();
    e.fill(&a, buf, 1, 16);
    event::record(&ev, &a).unwrap();
    assert_eq!(e.launch(spin, &a, &mut [arg(&mut cycles)]), OK);
    e.fill(&a, buf, 2, 16);
    event::record(&ev, &a).unwrap(); // supersedes: covers the second fill
    stream::wait_event(&b, &ev, 0).unwrap();
    let out = e.pinned(64, 0);
    sim::dtoh(out, buf, 64, &b).unwrap();
    stream::synchronize(&b).unwrap();
    cuda_sim::host_read(out, 64);
    // SAFETY: 64 bytes written by the copy, synchronized above.
    assert_eq!(unsafe { std::slice::from_raw_parts(out.cast::<u32>(), 16) }, [2; 16]);
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    // The event's timestamp is the second record: after two fills (small:
    // the device model's shortest kernel, 1 µs each) and the spin.
    assert_eq!(event::elapsed_time(&start, &ev), Ok((102_000.0f64 / 1e6) as f32));
    sim::free_host(out).unwrap();
    sim::free(buf).unwrap();
    for x in [start, ev] {
        event::destroy(x).unwrap();
    }
    stream::destroy(a).unwrap();
    stream::destroy(b).unwrap();
    teardown(e);
}

#[test]
fn a_ptx_module_has_only_the_kernels_its_entries_name() {
    let _serial = serial();
    let e = env(77);
    // A C++ kernel compiled without extern "C": its entry name is mangled,
    // so the plain name is not found (as on a GPU), though a CPU kernel of
    // that name is registered.
    let mangled = b".version 8.0\n.target sm_90\n.visible .entry _Z12sim_fill_u32Pjjy(\n)\n{\n}\n\0";
    // SAFETY: a NUL-terminated PTX text.
    let m = unsafe { module::load_data(d(), mangled.as_ptr().cast()) }.expect("cuModuleLoadData");
    let name = std::ffi::CString::new("sim_fill_u32").unwrap();
    assert_eq!(code(module::get_function(m.as_borrowed(), &name)), CUresult::CUDA_ERROR_NOT_FOUND);
    module::unload(m).expect("unload");
    // With extern "C" the entry is the plain name: found.
    let plain = b".version 8.0\n.target sm_90\n.visible .entry sim_fill_u32(\n)\n{\n}\n\0";
    // SAFETY: as above.
    let m = unsafe { module::load_data(d(), plain.as_ptr().cast()) }.expect("cuModuleLoadData");
    assert!(module::get_function(m.as_borrowed(), &name).is_ok());
    module::unload(m).expect("unload");
    teardown(e);
}

#[test]
fn a_stream_never_synchronized_does_not_hold_every_operation() {
    // A GPU runs queued work while the host goes on: 3,000 launches with no
    // synchronization leave at most about a queue's depth pending, not all
    // 3,000 (and not every buffer freed behind them).
    let _serial = serial();
    let e = env(78);
    let s = e.stream(0);
    let buf = e.alloc(64);
    for i in 0..3000u32 {
        e.fill(&s, buf, i, 16);
    }
    let pending = e.session.pending();
    assert!(pending <= 1025, "{pending} operations pending after 3,000 launches");
    stream::synchronize(&s).unwrap();
    assert_eq!(e.read_u32(buf, 16), [2999; 16]);
    sim::free(buf).unwrap();
    drop(s);
    teardown(e);
}

#[test]
fn a_sessions_call_log_keeps_its_last_calls_only() {
    let _serial = serial();
    let e = env(79);
    let s = e.stream(0);
    let before = e.session.total_calls();
    for _ in 0..cuda_sim::CALL_LOG + 100 {
        stream::query(&s).unwrap();
    }
    let calls = e.session.calls();
    assert_eq!(calls.len(), cuda_sim::CALL_LOG);
    assert_eq!(calls.last(), Some(&"cuStreamQuery"));
    assert!(e.session.total_calls() >= before + cuda_sim::CALL_LOG as u64 + 100);
    drop(s);
    teardown(e);
}
