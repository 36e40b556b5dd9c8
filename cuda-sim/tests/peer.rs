//! Peer access between simulated devices: the P2P attributes, context peer
//! access and its driver errors, pool access, kernels faulting on peer
//! memory they were not given, and peer copies at the link's rate. Its own
//! test binary: it runs ten simulated devices (the peer limit is eight).

mod common;
use common::*;
use cuda_sys::CUdevice_P2PAttribute as P2P;
use cuda_sys::CUmemAccess_flags as F;

/// Ten devices, configured before this binary's first `cuInit`.
fn ten_devices() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let cfg = cuda_sim::Config { devices: 10, ..Default::default() };
        cuda_sim::configure(cfg).expect("configured before the first cuInit");
    });
}

/// Device `dev`'s primary context, made current.
fn on(dev: i32) -> BorrowedContext<'static> {
    let ctx = primary_ctx::retain(d(), dev).expect("cuDevicePrimaryCtxRetain");
    context::set_current(d(), Some(ctx)).expect("cuCtxSetCurrent");
    ctx
}

/// Releases the primary contexts of devices `1..n` retained by [`on`].
fn release(n: i32) {
    for dev in 1..n {
        // SAFETY: the test is done with the device's context; the
        // simulator's contexts outlive their last release anyway.
        unsafe { primary_ctx::release(d(), dev) }.expect("cuDevicePrimaryCtxRelease");
    }
}

#[test]
fn p2p_attributes_describe_a_linked_pair() {
    ten_devices();
    let _serial = serial();
    let e = env(300);
    let a = |attr| device::get_p2p_attribute(d(), attr, 0, 1);
    assert_eq!(a(P2P::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK), Ok(0));
    assert_eq!(a(P2P::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED), Ok(1));
    assert_eq!(a(P2P::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED), Ok(1));
    assert_eq!(a(P2P::CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED), Ok(1));
    let same = device::get_p2p_attribute(d(), P2P::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 1);
    assert_eq!(code(same), CUresult::CUDA_ERROR_INVALID_DEVICE);
    let bad = device::get_p2p_attribute(d(), P2P::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 10);
    assert_eq!(code(bad), CUresult::CUDA_ERROR_INVALID_DEVICE);
    assert_eq!(device::can_access_peer(d(), 3, 9), Ok(true));
    teardown(e);
}

#[test]
fn context_peer_access_has_the_drivers_errors() {
    ten_devices();
    let _serial = serial();
    let e = env(301);
    let peers: Vec<BorrowedContext<'static>> = (1..10).map(on).collect();
    context::set_current(d(), Some(e.ctx)).unwrap();
    // Its own context is no peer.
    assert_eq!(code(context::enable_peer_access(e.ctx, 0)), CUresult::CUDA_ERROR_INVALID_DEVICE);
    assert_eq!(code(context::disable_peer_access(peers[0])), CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    context::enable_peer_access(peers[0], 0).unwrap();
    assert_eq!(
        code(context::enable_peer_access(peers[0], 0)),
        CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
    );
    context::disable_peer_access(peers[0]).unwrap();
    assert_eq!(code(context::disable_peer_access(peers[0])), CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    // Eight peers at most; disabling one makes room again.
    for p in &peers[..8] {
        context::enable_peer_access(*p, 0).unwrap();
    }
    assert_eq!(code(context::enable_peer_access(peers[8], 0)), CUresult::CUDA_ERROR_TOO_MANY_PEERS);
    context::disable_peer_access(peers[3]).unwrap();
    context::enable_peer_access(peers[8], 0).unwrap();
    // Access is per direction: device 1 was given nothing.
    context::set_current(d(), Some(peers[0])).unwrap();
    assert_eq!(code(context::disable_peer_access(e.ctx)), CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    // Another session (process) starts with none.
    context::set_current(d(), Some(e.ctx)).unwrap();
    {
        let _other = cuda_sim::Session::new(302);
        context::set_current(d(), Some(e.ctx)).unwrap();
        assert_eq!(
            code(context::disable_peer_access(peers[0])),
            CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED
        );
    }
    context::set_current(d(), Some(e.ctx)).unwrap();
    release(10);
    teardown(e);
}

#[test]
fn pool_access_is_per_pool_and_device() {
    ten_devices();
    let _serial = serial();
    let e = env(303);
    let pool0 = device::get_default_mem_pool(d(), 0).unwrap();
    let pool1 = device::get_default_mem_pool(d(), 1).unwrap();
    assert_eq!(mem_pool::get_access(pool0, 0), Ok(F::CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    assert_eq!(mem_pool::get_access(pool0, 1), Ok(F::CU_MEM_ACCESS_FLAGS_PROT_NONE));
    mem_pool::set_access(pool0, 1, F::CU_MEM_ACCESS_FLAGS_PROT_READWRITE).unwrap();
    assert_eq!(mem_pool::get_access(pool0, 1), Ok(F::CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    // Only that pair: pool 1 is still closed to device 0, pool 0 to device 2.
    assert_eq!(mem_pool::get_access(pool1, 0), Ok(F::CU_MEM_ACCESS_FLAGS_PROT_NONE));
    assert_eq!(mem_pool::get_access(pool0, 2), Ok(F::CU_MEM_ACCESS_FLAGS_PROT_NONE));
    // The owner keeps its access; read-only is not a device pool's.
    let own = mem_pool::set_access(pool0, 0, F::CU_MEM_ACCESS_FLAGS_PROT_NONE);
    assert_eq!(code(own), CUresult::CUDA_ERROR_INVALID_DEVICE);
    let ro = mem_pool::set_access(pool0, 2, F::CU_MEM_ACCESS_FLAGS_PROT_READ);
    assert_eq!(code(ro), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(code(mem_pool::get_access(pool0, 10)), CUresult::CUDA_ERROR_INVALID_DEVICE);
    mem_pool::set_access(pool0, 1, F::CU_MEM_ACCESS_FLAGS_PROT_NONE).unwrap();
    assert_eq!(mem_pool::get_access(pool0, 1), Ok(F::CU_MEM_ACCESS_FLAGS_PROT_NONE));
    teardown(e);
}

/// Fills `n` u32 at `ptr` (memory of device 0) from a kernel on device 1,
/// with `grant` run first (device 1's context current); returns what
/// synchronizing device 1 reports and, on success, the values read back.
fn fill_from_device_1(seed: u64, pooled: bool, grant: impl FnOnce(CUdeviceptr)) -> (CUresult, Vec<u32>) {
    let e = env(seed);
    let s0 = e.stream(0);
    let ptr = if pooled { memory::alloc_async(64, &s0).unwrap() } else { e.alloc(64) };
    stream::synchronize(&s0).unwrap();
    let ctx1 = on(1);
    grant(ptr);
    // SAFETY: a NUL-terminated PTX image.
    let m1 = unsafe { module::load_data(d(), PTX.as_ptr().cast()) }.unwrap();
    let f = module::get_function(m1.as_borrowed(), c"sim_fill_u32").unwrap();
    let s1 = stream::create_with_priority(d(), 0, 0).unwrap();
    let (mut p, mut v, mut n) = (ptr, 7u32, 16u64);
    let mut args = [arg(&mut p), arg(&mut v), arg(&mut n)];
    assert_eq!(e.launch(f, &s1, &mut args), OK);
    let r = code(stream::synchronize(&s1));
    let got = if r == OK {
        context::set_current(d(), Some(e.ctx)).unwrap();
        let got = e.read_u32(ptr, 16);
        context::set_current(d(), Some(ctx1)).unwrap();
        got
    } else {
        Vec::new()
    };
    if r == OK {
        stream::destroy(s1).unwrap();
        module::unload(m1).unwrap();
        context::set_current(d(), Some(e.ctx)).unwrap();
        if pooled {
            sim::free_async(ptr, &s0).unwrap()
        } else {
            sim::free(ptr).unwrap()
        }
        stream::destroy(s0).unwrap();
        release(2);
        teardown(e);
    } else {
        // A lost context: the session's handles go with it.
        std::mem::forget((s0, s1, m1, e));
    }
    (r, got)
}

#[test]
fn a_kernel_touching_peer_memory_without_access_faults() {
    ten_devices();
    let _serial = serial();
    let (r, _) = fill_from_device_1(310, false, |_| {});
    assert_eq!(r, CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    let (r, got) = fill_from_device_1(311, false, |_| {
        context::enable_peer_access(primary_ctx::retain(d(), 0).unwrap(), 0).unwrap();
        // SAFETY: the extra reference is released at once.
        unsafe { primary_ctx::release(d(), 0) }.unwrap();
    });
    assert_eq!((r, got), (OK, vec![7; 16]));
    // Pool memory: the context's peer access does not open it, the pool's does.
    let (r, _) = fill_from_device_1(312, true, |_| {
        context::enable_peer_access(primary_ctx::retain(d(), 0).unwrap(), 0).unwrap();
        // SAFETY: as above.
        unsafe { primary_ctx::release(d(), 0) }.unwrap();
    });
    assert_eq!(r, CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    let (r, got) = fill_from_device_1(313, true, |_| {
        let pool0 = device::get_default_mem_pool(d(), 0).unwrap();
        mem_pool::set_access(pool0, 1, F::CU_MEM_ACCESS_FLAGS_PROT_READWRITE).unwrap();
    });
    assert_eq!((r, got), (OK, vec![7; 16]));
}

/// Simulated ms of one `bytes` copy from device 0 to device 1 on a stream
/// of device 1, with peer access enabled first when `peer`.
fn peer_copy_ms(seed: u64, bytes: usize, peer: bool) -> f32 {
    let e = env(seed);
    let src = e.alloc(bytes);
    sim::memset8(src, 0x5a, bytes, BorrowedStream::null(d())).unwrap();
    context::synchronize(d()).unwrap();
    let ctx1 = on(1);
    if peer {
        context::enable_peer_access(e.ctx, 0).unwrap();
    }
    let dst = memory::alloc(d(), bytes).unwrap();
    let s = stream::create_with_priority(d(), 0, 0).unwrap();
    let (a, b) = (event::create(d(), 0).unwrap(), event::create(d(), 0).unwrap());
    event::record(&a, &s).unwrap();
    // SAFETY: both ranges are live allocations of `bytes` on their devices.
    unsafe { memory::memcpy_peer_async(dst, ctx1, src, e.ctx, bytes, &s) }.unwrap();
    event::record(&b, &s).unwrap();
    event::synchronize(&b).unwrap();
    let ms = event::elapsed_time(&a, &b).unwrap();
    let mut back = vec![0u8; 64];
    sim::dtoh(back.as_mut_ptr(), dst + (bytes as u64 - 64), 64, BorrowedStream::null(d())).unwrap();
    assert_eq!(back, vec![0x5a; 64], "the copy moved the data");
    event::destroy(a).unwrap();
    event::destroy(b).unwrap();
    stream::destroy(s).unwrap();
    sim::free(dst).unwrap();
    context::set_current(d(), Some(e.ctx)).unwrap();
    sim::free(src).unwrap();
    release(2);
    teardown(e);
    ms
}

#[test]
fn a_peer_copy_takes_the_link_only_with_peer_access() {
    ten_devices();
    let _serial = serial();
    let bytes = 64 << 20;
    let staged = peer_copy_ms(320, bytes, false);
    let linked = peer_copy_ms(321, bytes, true);
    let ns = |ms: f32| (f64::from(ms) * 1e6).round() as u64;
    let tol = |a: u64, b: u64| a.abs_diff(b) <= b / 1000 + 1000;
    assert!(tol(ns(staged), cuda_sim::model::pcie_ns(bytes as u64)), "staged {staged} ms");
    assert!(tol(ns(linked), cuda_sim::model::peer_ns(bytes as u64)), "linked {linked} ms");
    assert!(staged > 10.0 * linked, "the link is over ten times the host's: {staged} vs {linked} ms");
}
