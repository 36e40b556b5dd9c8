//! Driver semantics: devices, contexts, memory, copies, events, errors.

mod common;
use common::*;
use std::ffi::{CStr, c_char, c_void};
use std::ptr::null_mut;

#[test]
fn devices_look_like_h100s() {
    let _serial = serial();
    let e = env(1);
    let mut n = 0;
    ck!(cuDeviceGetCount(&mut n));
    assert_eq!(n, 2);
    let mut dev = -1;
    ck!(cuDeviceGet(&mut dev, 1));
    assert_eq!(dev, 1);
    assert_eq!(cu!(cuDeviceGet(&mut dev, 2)), CUresult::CUDA_ERROR_INVALID_DEVICE);
    let a = |attr: CUdevice_attribute| {
        let mut v = 0;
        ck!(cuDeviceGetAttribute(&mut v, attr, 0));
        v
    };
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
    let mut v = 0;
    assert_eq!(
        cu!(cuDeviceGetAttribute(&mut v, A::CU_DEVICE_ATTRIBUTE_MAX, 0)),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );
    assert_eq!(
        cu!(cuDeviceGetAttribute(null_mut(), A::CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0)),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );

    e.session.set_attribute(0, A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
    assert_eq!(a(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED), 0);
    let mut pool: CUmemoryPool = null_mut();
    assert_eq!(cu!(cuDeviceGetDefaultMemPool(&mut pool, 0)), CUresult::CUDA_ERROR_NOT_SUPPORTED);
    let mut p = 0;
    assert_eq!(cu!(cuMemAllocAsync(&mut p, 16, null_mut())), CUresult::CUDA_ERROR_NOT_SUPPORTED);

    let mut name = [0 as c_char; 64];
    ck!(cuDeviceGetName(name.as_mut_ptr(), 64, 0));
    // SAFETY: the simulator NUL-terminates the name.
    assert_eq!(unsafe { CStr::from_ptr(name.as_ptr()) }.to_str().unwrap(), "cuda-sim virtual H100");
    ck!(cuDeviceGetName(name.as_mut_ptr(), 5, 0));
    // SAFETY: as above, truncated to 4 characters.
    assert_eq!(unsafe { CStr::from_ptr(name.as_ptr()) }.to_str().unwrap(), "cuda");
    ck!(cuDeviceGetPCIBusId(name.as_mut_ptr(), 64, 1));
    // SAFETY: as above.
    assert_eq!(unsafe { CStr::from_ptr(name.as_ptr()) }.to_str().unwrap(), "0000:28:00.0");
    let (mut u0, mut u1) = (CUuuid::default(), CUuuid::default());
    ck!(cuDeviceGetUuid(&mut u0, 0));
    ck!(cuDeviceGetUuid(&mut u1, 1));
    assert_ne!(u0, u1);
    let mut total = 0;
    ck!(cuDeviceTotalMem(&mut total, 0));
    assert_eq!(total, 16 << 30);
    let mut can = -1;
    ck!(cuDeviceCanAccessPeer(&mut can, 0, 1));
    assert_eq!(can, 1);
    ck!(cuDeviceCanAccessPeer(&mut can, 0, 0));
    assert_eq!(can, 0);
    let mut ver = 0;
    ck!(cuDriverGetVersion(&mut ver));
    assert_eq!(ver, 13000);
    assert_eq!(cu!(cuInit(1)), CUresult::CUDA_ERROR_INVALID_VALUE);
    teardown(e);
}

#[test]
fn contexts_are_per_thread_and_peer_access_enables_once() {
    let _serial = serial();
    let e = env(2);
    let mut cur: CUcontext = null_mut();
    ck!(cuCtxGetCurrent(&mut cur));
    assert_eq!(cur, e.ctx);
    let mut dev = -1;
    ck!(cuCtxGetDevice(&mut dev));
    assert_eq!(dev, 0);
    let (mut least, mut greatest) = (9, 9);
    ck!(cuCtxGetStreamPriorityRange(&mut least, &mut greatest));
    assert_eq!((least, greatest), (0, -5));
    let mut ctx1: CUcontext = null_mut();
    ck!(cuDevicePrimaryCtxRetain(&mut ctx1, 1));
    assert_ne!(ctx1, e.ctx);
    ck!(cuCtxEnablePeerAccess(ctx1, 0));
    assert_eq!(cu!(cuCtxEnablePeerAccess(ctx1, 0)), CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    ck!(cuDevicePrimaryCtxRelease(1));
    assert_eq!(cu!(cuDevicePrimaryCtxRelease(1)), CUresult::CUDA_ERROR_INVALID_CONTEXT);

    // Another thread has no current context until it sets one.
    let sid = &e.session;
    std::thread::scope(|s| {
        s.spawn(|| {
            let _g = sid.enter();
            let mut c: CUcontext = std::ptr::without_provenance_mut(1);
            ck!(cuCtxGetCurrent(&mut c));
            assert!(c.is_null());
            let mut p = 0;
            assert_eq!(cu!(cuMemAlloc(&mut p, 16)), CUresult::CUDA_ERROR_INVALID_CONTEXT);
            assert_eq!(cu!(cuCtxSynchronize()), CUresult::CUDA_ERROR_INVALID_CONTEXT);
            assert_eq!(
                cu!(cuCtxSetCurrent(std::ptr::without_provenance_mut(0x1234))),
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
    ck!(cuMemcpyHtoDAsync(a, src.as_ptr().cast(), n * 4, s));
    ck!(cuMemcpyDtoDAsync(b, a, n * 4, s));
    let pinned = e.pinned(n * 4, 0);
    ck!(cuMemcpyDtoHAsync(pinned.cast(), b, n * 4, s));
    ck!(cuStreamSynchronize(s));
    cuda_sim::host_read(pinned, n * 4);
    // SAFETY: `pinned` holds `n` u32 written by the copy, synchronized above.
    let got = unsafe { std::slice::from_raw_parts(pinned.cast::<u32>(), n) }.to_vec();
    assert_eq!(got, src);
    // Pageable D2H blocks until done; memsets.
    ck!(cuMemsetD32Async(a, 7, n, s));
    ck!(cuMemsetD8Async(b + 4, 0xAB, 4, s));
    let mut out = vec![0u32; n];
    ck!(cuMemcpyDtoHAsync(out.as_mut_ptr().cast(), a, n * 4, s));
    assert!(out.iter().all(|&v| v == 7));
    assert_eq!(e.read_u32(b, 3), vec![0, 0xABAB_ABAB, 2]);
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());

    // Bad ranges fail at call time.
    assert_eq!(cu!(cuMemcpyDtoDAsync(b, a, n * 4 + 1, s)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(cu!(cuMemsetD32Async(a + 2, 0, 1, s)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(cu!(cuMemcpyHtoDAsync(a, std::ptr::null(), 4, s)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(cu!(cuMemAlloc(null_mut(), 4)), CUresult::CUDA_ERROR_INVALID_VALUE);
    let mut p = 0;
    assert_eq!(cu!(cuMemAlloc(&mut p, 0)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(cu!(cuMemAlloc(&mut p, 17usize << 30)), CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    let (mut free, mut total) = (0, 0);
    ck!(cuMemGetInfo(&mut free, &mut total));
    assert!(free <= total - 2 * n * 4);

    // Device-mapped pinned memory is addressable from the device.
    let mapped = e.pinned(16, CU_MEMHOSTALLOC_DEVICEMAP);
    let mut dp = 0;
    ck!(cuMemHostGetDevicePointer(&mut dp, mapped.cast(), 0));
    assert_eq!(dp, mapped as u64);
    e.fill(s, dp, 5, 4);
    ck!(cuStreamSynchronize(s));
    // SAFETY: 16 bytes written by the kernel, synchronized above.
    assert_eq!(unsafe { std::slice::from_raw_parts(mapped.cast::<u32>(), 4) }, [5; 4]);
    assert_eq!(cu!(cuMemHostGetDevicePointer(&mut dp, pinned.cast(), 0)), CUresult::CUDA_ERROR_INVALID_VALUE);

    ck!(cuMemFreeHost(mapped.cast()));
    ck!(cuMemFreeHost(pinned.cast()));
    ck!(cuMemFree(a));
    ck!(cuMemFree(b));
    ck!(cuStreamDestroy(s));
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    teardown(e);
}

#[test]
fn stream_ordered_allocation_and_pool_statistics() {
    let _serial = serial();
    let e = env(4);
    let s = e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0);
    let mut pool: CUmemoryPool = null_mut();
    ck!(cuDeviceGetDefaultMemPool(&mut pool, 0));
    let get = |attr: CUmemPool_attribute| {
        let mut v = 0u64;
        ck!(cuMemPoolGetAttribute(pool, attr, (&mut v as *mut u64).cast()));
        v
    };
    use CUmemPool_attribute as P;
    let mut a = 0;
    ck!(cuMemAllocAsync(&mut a, 3 << 20, s));
    assert_eq!(get(P::CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3 << 20);
    assert_eq!(get(P::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 << 20);
    e.fill(s, a, 1, 4);
    ck!(cuMemFreeAsync(a, s));
    ck!(cuStreamSynchronize(s));
    assert_eq!(get(P::CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    assert_eq!(get(P::CU_MEMPOOL_ATTR_USED_MEM_HIGH), 3 << 20);
    assert_eq!(get(P::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 4 << 20);
    let mut zero = 0u64;
    ck!(cuMemPoolSetAttribute(pool, P::CU_MEMPOOL_ATTR_USED_MEM_HIGH, (&mut zero as *mut u64).cast()));
    assert_eq!(get(P::CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
    let mut keep = u64::MAX;
    ck!(cuMemPoolSetAttribute(pool, P::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, (&mut keep as *mut u64).cast()));
    ck!(cuMemAllocAsync(&mut a, 1 << 20, s));
    ck!(cuMemFreeAsync(a, s));
    ck!(cuStreamSynchronize(s));
    assert_eq!(get(P::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 << 20);
    ck!(cuMemPoolTrimTo(pool, 0));
    assert_eq!(get(P::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    let mut one = 1u64;
    let r = cu!(cuMemPoolSetAttribute(pool, P::CU_MEMPOOL_ATTR_USED_MEM_HIGH, (&mut one as *mut u64).cast()));
    assert_eq!(r, CUresult::CUDA_ERROR_INVALID_VALUE);
    ck!(cuStreamDestroy(s));
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
    ck!(cuEventRecord(start, s));
    assert_eq!(e.launch(spin, s, &mut [arg(&mut cycles)]), OK);
    ck!(cuEventRecord(end, s));
    let mut ms = 0f32;
    // Not complete yet (nothing ran: no sync).
    assert_eq!(cu!(cuEventElapsedTime(&mut ms, start, end)), CUresult::CUDA_ERROR_NOT_READY);
    ck!(cuEventSynchronize(end));
    ck!(cuEventElapsedTime(&mut ms, start, end));
    assert_eq!(ms, 1.0);

    // A 64 KiB H2D copy: 2 µs + 65536 B / 25 GB/s.
    let buf = e.alloc(65536);
    let host = e.pinned(65536, 0);
    ck!(cuEventRecord(start, s));
    ck!(cuMemcpyHtoDAsync(buf, host.cast(), 65536, s));
    ck!(cuEventRecord(end, s));
    ck!(cuStreamSynchronize(s));
    ck!(cuEventElapsedTime(&mut ms, start, end));
    assert_eq!(ms, (4622.0f64 / 1e6) as f32);

    // Disabled timing and never-recorded events are invalid handles here.
    let nt = e.event(CUevent_flags::CU_EVENT_DISABLE_TIMING.0);
    let fresh = e.event(0);
    ck!(cuEventRecord(nt, s));
    ck!(cuStreamSynchronize(s));
    assert_eq!(cu!(cuEventElapsedTime(&mut ms, start, nt)), CUresult::CUDA_ERROR_INVALID_HANDLE);
    assert_eq!(cu!(cuEventElapsedTime(&mut ms, start, fresh)), CUresult::CUDA_ERROR_INVALID_HANDLE);
    assert_eq!(cu!(cuEventElapsedTime(null_mut(), start, end)), CUresult::CUDA_ERROR_INVALID_VALUE);
    // A never-recorded event is complete.
    ck!(cuEventQuery(fresh));
    ck!(cuEventSynchronize(fresh));
    for ev in [start, end, nt, fresh] {
        ck!(cuEventDestroy(ev));
    }
    assert_eq!(cu!(cuEventDestroy(start)), CUresult::CUDA_ERROR_INVALID_HANDLE);
    ck!(cuMemFreeHost(host.cast()));
    ck!(cuMemFree(buf));
    ck!(cuStreamDestroy(s));
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
    ck!(cuStreamWaitEvent(b, ev, 0));
    e.fill(a, buf, 1, 16);
    ck!(cuEventRecord(ev, a));
    e.fill(a, buf, 2, 16); // after the record: the wait does not cover it
    ck!(cuStreamWaitEvent(b, ev, 0));
    ck!(cuEventRecord(ev, a)); // re-record: supersedes, but b's wait was already taken
    let out = e.pinned(64, 0);
    ck!(cuMemcpyDtoHAsync(out.cast(), buf, 64, b));
    ck!(cuCtxSynchronize());
    // Exactly one race: the fill recorded after the event against the copy.
    let races = e.session.take_races();
    assert_eq!(races.len(), 1, "{races:?}");
    let ops = [races[0].first.op.as_str(), races[0].second.op.as_str()];
    assert!(
        ops.contains(&"kernel sim_fill_u32 param 0 (write)") && ops.contains(&"cuMemcpyDtoHAsync source"),
        "{races:?}"
    );
    ck!(cuMemFreeHost(out.cast()));
    ck!(cuMemFree(buf));
    ck!(cuEventDestroy(ev));
    ck!(cuStreamDestroy(a));
    ck!(cuStreamDestroy(b));
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
            e.fill(s, buf, v, 16);
        }
        ck!(cuEventRecord(ev, s));
        let q = cu!(cuStreamQuery(s));
        let eq = cu!(cuEventQuery(ev));
        assert!(q == OK || q == CUresult::CUDA_ERROR_NOT_READY);
        assert!(eq == OK || eq == CUresult::CUDA_ERROR_NOT_READY);
        saw_not_ready |= q == CUresult::CUDA_ERROR_NOT_READY;
        ck!(cuStreamSynchronize(s));
        ck!(cuStreamQuery(s));
        ck!(cuEventQuery(ev));
        assert_eq!(e.read_u32(buf, 1), vec![7]);
        ck!(cuMemFree(buf));
        ck!(cuEventDestroy(ev));
        ck!(cuStreamDestroy(s));
        teardown(e);
    }
    assert!(saw_not_ready);
}

#[test]
fn streams_report_priority_and_flags() {
    let _serial = serial();
    let e = env(7);
    let mut s: CUstream = null_mut();
    ck!(cuStreamCreateWithPriority(&mut s, CUstream_flags::CU_STREAM_NON_BLOCKING.0, -100));
    let (mut p, mut f) = (0, 0);
    ck!(cuStreamGetPriority(s, &mut p));
    ck!(cuStreamGetFlags(s, &mut f));
    assert_eq!((p, f), (-5, 1));
    let mut s2: CUstream = null_mut();
    ck!(cuStreamCreateWithPriority(&mut s2, 0, 7));
    ck!(cuStreamGetPriority(s2, &mut p));
    assert_eq!(p, 0);
    ck!(cuStreamGetPriority(CU_STREAM_LEGACY, &mut p));
    assert_eq!(p, 0);
    assert_eq!(cu!(cuStreamCreateWithPriority(&mut s2, 4, 0)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(cu!(cuStreamDestroy(null_mut())), CUresult::CUDA_ERROR_INVALID_HANDLE);
    // Destroying a stream with pending work: the work still completes.
    let buf = e.alloc(16);
    e.fill(s, buf, 9, 4);
    ck!(cuStreamDestroy(s));
    assert_eq!(cu!(cuStreamSynchronize(s)), CUresult::CUDA_ERROR_INVALID_HANDLE);
    ck!(cuCtxSynchronize());
    assert_eq!(e.read_u32(buf, 4), vec![9; 4]);
    ck!(cuMemFree(buf));
    ck!(cuStreamDestroy(s2));
    teardown(e);
}

#[test]
fn the_legacy_stream_orders_with_blocking_streams_only() {
    let _serial = serial();
    let e = env(8);
    let blocking = e.stream(0);
    let buf = e.alloc(64);
    // Blocking stream writes, legacy stream reads: implicitly ordered.
    e.fill(blocking, buf, 3, 16);
    let mut out = vec![0u32; 16];
    ck!(cuMemcpyDtoHAsync(out.as_mut_ptr().cast(), buf, 64, CU_STREAM_LEGACY));
    assert_eq!(out, vec![3; 16]);
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    // A non-blocking stream is not ordered with the legacy stream.
    let nb = e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0);
    e.fill(nb, buf, 4, 16);
    e.fill(null_mut(), buf, 5, 16);
    ck!(cuCtxSynchronize());
    assert!(!e.session.take_races().is_empty());
    // The per-thread stream is blocking too.
    e.fill(CU_STREAM_PER_THREAD, buf, 6, 16);
    e.fill(CU_STREAM_LEGACY, buf, 7, 16);
    ck!(cuCtxSynchronize());
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    ck!(cuMemFree(buf));
    ck!(cuStreamDestroy(blocking));
    ck!(cuStreamDestroy(nb));
    teardown(e);
}

#[test]
fn modules_functions_and_launch_validation() {
    let _serial = serial();
    let e = env(9);
    let mut m: CUmodule = null_mut();
    assert_eq!(cu!(cuModuleLoadData(&mut m, c"garbage".as_ptr().cast())), CUresult::CUDA_ERROR_INVALID_IMAGE);
    let fatbin = 0xBA55_ED50u32.to_le_bytes();
    ck!(cuModuleLoadData(&mut m, fatbin.as_ptr().cast()));
    ck!(cuModuleUnload(m));
    ck!(cuModuleLoadData(&mut m, b"\x7fELF\x02\x01".as_ptr().cast()));
    ck!(cuModuleUnload(m));
    let mut f: CUfunction = null_mut();
    assert_eq!(
        cu!(cuModuleGetFunction(&mut f, e.module, c"no_such_kernel".as_ptr())),
        CUresult::CUDA_ERROR_NOT_FOUND
    );
    let f = e.function("sim_fill_u32");
    let (mut off, mut size) = (0usize, 0usize);
    ck!(cuFuncGetParamInfo(f, 1, &mut off, &mut size));
    assert_eq!((off, size), (8, 4));
    ck!(cuFuncGetParamInfo(f, 2, &mut off, null_mut()));
    assert_eq!(off, 16);
    assert_eq!(cu!(cuFuncGetParamInfo(f, 3, &mut off, &mut size)), CUresult::CUDA_ERROR_INVALID_VALUE);
    let mut name: *const c_char = std::ptr::null();
    ck!(cuFuncGetName(&mut name, f));
    // SAFETY: the simulator returns a static NUL-terminated name.
    assert_eq!(unsafe { CStr::from_ptr(name) }.to_str().unwrap(), "sim_fill_u32");
    let mut v = 0;
    use CUfunction_attribute as F;
    ck!(cuFuncGetAttribute(&mut v, F::CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    assert_eq!(v, 32);
    ck!(cuFuncSetAttribute(f, F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100_000));
    ck!(cuFuncGetAttribute(&mut v, F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    assert_eq!(v, 100_000);
    assert_eq!(
        cu!(cuFuncSetAttribute(f, F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 300_000)),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );

    let buf = e.alloc(64);
    let (mut p, mut val, mut n) = (buf, 1u32, 16u64);
    let mut args = [arg(&mut p), arg(&mut val), arg(&mut n)];
    let s: CUstream = null_mut();
    let launch =
        |g: [u32; 3], b: [u32; 3], shared: u32, args: &mut [*mut c_void], extra: *mut *mut c_void| {
            cu!(cuLaunchKernel(f, g[0], g[1], g[2], b[0], b[1], b[2], shared, s, args.as_mut_ptr(), extra))
        };
    assert_eq!(launch([1, 1, 1], [1025, 1, 1], 0, &mut args, null_mut()), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(launch([1, 1, 1], [32, 32, 2], 0, &mut args, null_mut()), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(launch([0, 1, 1], [1, 1, 1], 0, &mut args, null_mut()), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(
        launch([1, 65536, 1], [1, 1, 1], 0, &mut args, null_mut()),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );
    assert_eq!(
        launch([1, 1, 1], [1, 1, 1], 100_001, &mut args, null_mut()),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );
    let mut extra = [null_mut::<c_void>()];
    assert_eq!(
        launch([1, 1, 1], [1, 1, 1], 0, &mut args, extra.as_mut_ptr()),
        CUresult::CUDA_ERROR_NOT_SUPPORTED
    );
    let no_params = cu!(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, null_mut(), null_mut()));
    assert_eq!(no_params, CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(launch([2, 2, 2], [1024, 1, 1], 100_000, &mut args, null_mut()), OK);
    assert_eq!(e.read_u32(buf, 16), vec![1; 16]);
    ck!(cuMemFree(buf));
    teardown(e);
}

#[test]
fn kernel_faults_are_sticky_or_reported_at_the_next_sync() {
    let _serial = serial();
    let e = env(10);
    let buf = e.alloc(64);
    let bad = e.function("sim_write_through_read");
    let mut p = buf;
    assert_eq!(e.launch(bad, null_mut(), &mut [arg(&mut p)]), OK);
    assert_eq!(cu!(cuCtxSynchronize()), CUresult::CUDA_ERROR_INVALID_VALUE);
    ck!(cuCtxSynchronize()); // not sticky
    let past = e.function("sim_write_past_end");
    let (mut p, mut n) = (buf, 16u64);
    assert_eq!(e.launch(past, null_mut(), &mut [arg(&mut p), arg(&mut n)]), OK);
    assert_eq!(cu!(cuCtxSynchronize()), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_eq!(cu!(cuMemFree(buf)), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_eq!(e.session.sticky_error(), Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
    // Other sessions keep working.
    let other = env(11);
    let b2 = other.alloc(16);
    ck!(cuMemFree(b2));
    teardown(other);
}

#[test]
fn host_functions_run_in_order_and_may_not_call_back() {
    let _serial = serial();
    unsafe extern "C" fn call_back(data: *mut c_void) {
        // SAFETY: `data` is the `Vec<CUresult>` the test keeps alive until sync.
        let out = unsafe { &mut *data.cast::<Vec<CUresult>>() };
        out.push(cu!(cuCtxSynchronize()));
        let mut n = 0;
        out.push(cu!(cuDeviceGetCount(&mut n)));
    }
    let e = env(12);
    let s = e.stream(0);
    let mut out: Vec<CUresult> = Vec::new();
    ck!(cuLaunchHostFunc(s, Some(call_back), (&mut out as *mut Vec<CUresult>).cast()));
    assert!(out.is_empty(), "queued, not run");
    ck!(cuStreamSynchronize(s));
    assert_eq!(out, vec![CUresult::CUDA_ERROR_NOT_PERMITTED; 2]);
    assert_eq!(cu!(cuLaunchHostFunc(s, None, null_mut())), CUresult::CUDA_ERROR_INVALID_VALUE);
    ck!(cuStreamDestroy(s));
    teardown(e);
}

#[test]
fn error_names_and_strings_are_static_and_uncounted() {
    let _serial = serial();
    let e = env(13);
    let before = e.session.calls().len();
    let mut p: *const c_char = std::ptr::null();
    ck!(cuGetErrorName(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS, &mut p));
    // SAFETY: static NUL-terminated string from the simulator.
    assert_eq!(unsafe { CStr::from_ptr(p) }.to_str().unwrap(), "CUDA_ERROR_ILLEGAL_ADDRESS");
    ck!(cuGetErrorString(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS, &mut p));
    // SAFETY: as above.
    assert_eq!(unsafe { CStr::from_ptr(p) }.to_str().unwrap(), "an illegal memory access was encountered");
    ck!(cuGetErrorString(CUresult::CUDA_ERROR_OUT_OF_MEMORY, &mut p));
    // SAFETY: as above.
    assert_eq!(unsafe { CStr::from_ptr(p) }.to_str().unwrap(), "out of memory");
    let mut q: *const c_char = std::ptr::null();
    assert_eq!(cu!(cuGetErrorName(CUresult(123_456), &mut q)), CUresult::CUDA_ERROR_INVALID_VALUE);
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
    ck!(cuEventRecord(start, a));
    e.fill(a, buf, 1, 16);
    ck!(cuEventRecord(ev, a));
    assert_eq!(e.launch(spin, a, &mut [arg(&mut cycles)]), OK);
    e.fill(a, buf, 2, 16);
    ck!(cuEventRecord(ev, a)); // supersedes: covers the second fill
    ck!(cuStreamWaitEvent(b, ev, 0));
    let out = e.pinned(64, 0);
    ck!(cuMemcpyDtoHAsync(out.cast(), buf, 64, b));
    ck!(cuStreamSynchronize(b));
    cuda_sim::host_read(out, 64);
    // SAFETY: 64 bytes written by the copy, synchronized above.
    assert_eq!(unsafe { std::slice::from_raw_parts(out.cast::<u32>(), 16) }, [2; 16]);
    assert!(e.session.races().is_empty(), "{:?}", e.session.races());
    // The event's timestamp is the second record: after two 2 µs fills and the spin.
    let mut ms = 0f32;
    ck!(cuEventElapsedTime(&mut ms, start, ev));
    assert_eq!(ms, (104_000.0f64 / 1e6) as f32);
    ck!(cuMemFreeHost(out.cast()));
    ck!(cuMemFree(buf));
    for x in [start, ev] {
        ck!(cuEventDestroy(x));
    }
    ck!(cuStreamDestroy(a));
    ck!(cuStreamDestroy(b));
    teardown(e);
}
