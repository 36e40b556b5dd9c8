//! Peer access through gpu-sync's API (issue 29): the queries, enabling and
//! disabling (explicit, idempotent, one way), the errors naming both
//! devices, the grants it makes (the context's and the default pool's),
//! what it leaves to other libraries in the process, and peer copies taking
//! the link once it is on. Its own test binary with one test: peer access
//! is process-wide state (gpu-sync's, like the driver's), so no other test
//! may enable or disable it meanwhile.

use gpu_sync::cuda_sys::CUmemAccess_flags as F;
use gpu_sync::cuda_sys::result as cu;
use gpu_sync::{Device, DeviceBuffer, Error, Stream, TimingEvent};
use sync_tests::ctx;

/// Access of `owner`'s default pool for `device`, asked of the driver.
fn pool_access(owner: &Device, device: &Device) -> F {
    let drv = gpu_sync::cuda_sys::installed().expect("a driver is in use");
    let pool = cu::device::get_default_mem_pool(drv, owner.as_raw()).expect("cuDeviceGetDefaultMemPool");
    cu::mem_pool::get_access(pool, device.ordinal()).expect("cuMemPoolGetAccess")
}

/// `dev`'s primary context as a handle of cuda-sys's per-call layer, for
/// the calls another library would make.
fn context_of(dev: &Device) -> gpu_sync::cuda_sys::BorrowedContext<'static> {
    let drv = gpu_sync::cuda_sys::installed().expect("a driver is in use");
    // SAFETY: gpu-sync retains every device's primary context for the life
    // of the process, so the handle stays valid.
    unsafe { gpu_sync::cuda_sys::Borrowed::borrow_raw(drv, dev.raw_context()) }
}

/// Device time of copying `src` (on `a`) into a new buffer on `b`, on a
/// stream of `b`, checked.
fn copy_ms(b: &Device, src: &DeviceBuffer<u32>, expect: u32) -> f64 {
    let s = Stream::new(b).expect("stream");
    let mut dst = DeviceBuffer::<u32>::alloc(&s, src.len()).expect("alloc");
    let (t0, t1) = (TimingEvent::new(b).expect("event"), TimingEvent::new(b).expect("event"));
    t0.record(&s).expect("record");
    s.copy(src, &mut dst).expect("peer copy");
    t1.record(&s).expect("record");
    t1.synchronize().expect("sync");
    let got = s.to_vec(&dst).expect("to_vec");
    assert!(got.iter().all(|&v| v == expect), "the peer copy moved the data");
    t0.elapsed(&t1).expect("elapsed").as_secs_f64() * 1e3
}

#[test]
fn peer_access_opens_both_grants_once_and_closes_only_its_own() {
    let t = ctx(2900);
    let devices = Device::all().expect("devices");
    if devices.len() < 2 {
        eprintln!("skipped: peer access needs two devices, this machine has {}", devices.len());
        return;
    }
    let (a, b) = (&devices[0], &devices[1]);
    if !a.can_access_peer(b).expect("cuDeviceCanAccessPeer") {
        eprintln!("skipped: devices 0 and 1 have no peer path");
        return;
    }
    assert!(!a.can_access_peer(a).expect("cuDeviceCanAccessPeer"), "a device is not its own peer");
    let link = a.p2p_attributes(b).expect("cuDeviceGetP2PAttribute");
    assert!(link.access_supported, "{link:?}");

    // Impossible pairs are errors naming both devices.
    match a.enable_peer_access(a) {
        Err(Error::PeerAccess { device: 0, peer: 0, .. }) => {}
        other => panic!("enabling a device's access to itself: {other:?}"),
    }
    assert!(matches!(a.p2p_attributes(a), Err(Error::PeerAccess { .. })));

    // Staged through the host before peer access, over the link after.
    let s_a = Stream::new(a).expect("stream");
    let n = 16 << 20; // 64 MiB
    let src = DeviceBuffer::from_slice(&s_a, &vec![0x2900_u32; n]).expect("upload");
    s_a.synchronize().expect("sync");
    let staged = copy_ms(b, &src, 0x2900);

    // Work on `b` reads `a`'s memory: `b`'s access to `a`.
    assert!(!b.peer_access_enabled(a));
    b.enable_peer_access(a).expect("enable");
    b.enable_peer_access(a).expect("enabling twice is nothing");
    assert!(b.peer_access_enabled(a) && !a.peer_access_enabled(b), "one way");
    if a.has_memory_pools() {
        assert_eq!(pool_access(a, b), F::CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "a's pool is open to b");
        assert_eq!(pool_access(b, a), F::CU_MEM_ACCESS_FLAGS_PROT_NONE, "b's pool is not open to a");
    }
    let linked = copy_ms(b, &src, 0x2900);
    if t.sim() {
        // The simulator's model: the host link's 25 GB/s against NVLink's 450.
        assert!(staged > 10.0 * linked, "peer access puts the copy on the link: {staged} ms vs {linked} ms");
    }
    eprintln!("64 MiB device 0 -> 1: staged {staged:.3} ms, over the link {linked:.3} ms");

    b.disable_peer_access(a).expect("disable");
    b.disable_peer_access(a).expect("disabling twice is nothing");
    assert!(!b.peer_access_enabled(a));
    if a.has_memory_pools() {
        assert_eq!(pool_access(a, b), F::CU_MEM_ACCESS_FLAGS_PROT_NONE, "closed again");
    }

    // Another library in the process enabled the context's access first
    // (as PyTorch does on its first peer copy): taken as is, and left on.
    b.make_current().expect("make_current");
    cu::context::enable_peer_access(context_of(a), 0).expect("the other library's enable");
    b.enable_peer_access(a).expect("ALREADY_ENABLED is success");
    assert!(b.peer_access_enabled(a));
    b.disable_peer_access(a).expect("disable");
    b.make_current().expect("make_current");
    let again = cu::context::enable_peer_access(context_of(a), 0);
    assert_eq!(
        again.err().and_then(|e| e.result()),
        Some(gpu_sync::cuda_sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED),
        "the other library's grant stays"
    );
    cu::context::disable_peer_access(context_of(a)).expect("the other library's disable");
    drop(src);
    t.finish();
}
