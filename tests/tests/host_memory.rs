//! Soundness of host memory and host functions (issue 7, holes 3, 5, 6 and
//! 7a; issue 9's pinned sub-range copies): pinned buffers used on another
//! device's stream are tracked, host functions that own gpu-sync objects
//! neither deadlock nor call the driver, a failed wait after a pageable copy
//! never returns with the copy still queued, over-aligned pinned buffers are
//! refused, and sub-range copies follow the whole-buffer rules.
//!
//! On the simulator each test also asserts that the race oracle saw nothing;
//! on a GPU the same tests check the data (and the deadlock test its
//! watchdog). The two-device tests need two devices (the simulator has two).

use gpu_sync::{Device, DeviceBuffer, Error, HostAllocFlags, PinnedBuffer, Stream, SyncEvent};
use kernels::{Kernels, reference};
use std::sync::mpsc;
use std::time::Duration;
use sync_tests::{ctx, fmt_races, on_sim};

const SEED: u32 = 0x5EED_0007;

fn pattern(n: usize) -> Vec<u32> {
    (0..n as u64).map(|i| reference::pattern(SEED, i)).collect()
}

/// Device 1, or `None` (and a note) on a one-device machine.
fn second_device() -> Option<Device> {
    if Device::count().expect("count") < 2 {
        eprintln!("one device only: nothing to test");
        return None;
    }
    Some(Device::get(1).expect("device 1"))
}

/// Runs `f` on its own thread and fails the test if it has not returned
/// within `secs` seconds (a deadlock fails instead of hanging the run).
fn watchdog<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what}: no return within {secs} s (deadlock)"),
    }
}

// Hole 3: a PORTABLE pinned buffer of device 0 used on a stream of device 1.

#[test]
fn a_host_write_waits_for_an_upload_on_another_devices_stream() {
    let t = ctx(31);
    let Some(d1) = second_device() else { return };
    let s1 = Stream::new(&d1).expect("s1");
    let n = 4096;
    let first = pattern(n);
    let mut host = PinnedBuffer::from_slice(&t.device, &first, HostAllocFlags::PORTABLE).expect("pinned");
    let mut y = DeviceBuffer::<u32>::alloc(&s1, n).expect("y");
    s1.upload(&host, &mut y).expect("upload on device 1");
    // Must wait for the upload (queued on device 1) before handing out
    // the memory for writing.
    let w = host.as_mut_slice().expect("host write");
    if on_sim() {
        cuda_sim::host_write(w.as_ptr().cast(), std::mem::size_of_val(w));
    }
    w.fill(0xdead_beef);
    let got = s1.to_vec(&y).expect("y");
    assert!(got == first, "device 1 received the host's later write instead of the uploaded data");
    t.finish();
}

#[test]
fn dropping_a_pending_download_from_another_devices_stream_waits_for_the_copy() {
    let t = ctx(32);
    let Some(d1) = second_device() else { return };
    let k1 = Kernels::load(&d1).expect("kernels on device 1");
    let s1 = Stream::new(&d1).expect("s1");
    let n = 4096;
    let mut y = DeviceBuffer::<u32>::alloc(&s1, n).expect("y");
    k1.fill_pattern(&s1, &mut y, SEED).expect("fill");
    let host = PinnedBuffer::<u32>::new(&t.device, n, HostAllocFlags::PORTABLE).expect("pinned");
    let pending = s1.download(&y, host).expect("download on device 1");
    // The pinned buffer's free must wait for the copy into it.
    drop(pending);
    s1.synchronize().expect("sync");
    // And a completed one on device 1 delivers the data.
    let host = PinnedBuffer::<u32>::new(&t.device, n, HostAllocFlags::PORTABLE).expect("pinned");
    let back = s1.download(&y, host).expect("download").wait().expect("wait");
    assert!(back[..] == pattern(n)[..]);
    t.finish();
}

#[test]
fn a_launch_after_a_wait_on_another_device_runs_in_its_own_context() {
    let t = ctx(33);
    let Some(d1) = second_device() else { return };
    let (k0, k1) = (Kernels::load(&t.device).expect("k0"), Kernels::load(&d1).expect("k1"));
    let (s0, s1) = (Stream::new(&t.device).expect("s0"), Stream::new(&d1).expect("s1"));
    let n = 1024;
    let mut x = DeviceBuffer::<u32>::alloc(&s0, n).expect("x");
    k0.fill_pattern(&s0, &mut x, SEED).expect("fill");
    let mut y = DeviceBuffer::<u32>::alloc(&s1, n).expect("y");
    // A peer copy on device 0's stream writes y (device 1) ...
    s0.copy(&x, &mut y).expect("peer copy on s0");
    // ... so this launch on s1 first waits (device-side) on a marker of s0,
    // which makes device 0's context current on this thread; the launch
    // itself must run with device 1's context current.
    k1.bump(&s1, &mut y, 5).expect("bump on s1 after a cross-device wait");
    let got = s1.to_vec(&y).expect("y");
    assert!(got.iter().enumerate().all(|(i, &v)| v == reference::pattern(SEED, i as u64).wrapping_add(5)));
    t.finish();
}

// Hole 5: host functions that own gpu-sync objects.

#[test]
fn a_host_function_that_drops_buffers_neither_deadlocks_nor_leaks() {
    let races = watchdog(60, "to_vec after a host function that drops a buffer", || {
        sync_tests::logs::capture();
        let t = ctx(51);
        let k = Kernels::load(&t.device).expect("kernels");
        let s = Stream::new(&t.device).expect("s");
        let other = Stream::new(&t.device).expect("other");
        let n = 2048;
        let mut y = DeviceBuffer::<u32>::alloc(&s, n).expect("y");
        k.fill_pattern(&s, &mut y, SEED).expect("fill");
        s.synchronize().expect("sync");
        let live_before = t.session.as_ref().map(|s| s.live());
        sync_tests::logs::take();
        // Objects of every kind that frees through the driver, owned by the
        // host function and dropped when it runs.
        let mut owned = DeviceBuffer::<u32>::alloc(&s, 1024).expect("owned");
        k.fill_pattern(&s, &mut owned, 1).expect("fill owned");
        let mut elsewhere = DeviceBuffer::<u32>::alloc(&other, 64).expect("on another stream");
        k.fill_pattern(&other, &mut elsewhere, 2).expect("fill elsewhere");
        let pinned = PinnedBuffer::<u32>::new(&t.device, 64, HostAllocFlags::empty()).expect("pinned");
        let extra_stream = Stream::new(&t.device).expect("extra stream");
        let event = SyncEvent::new(&t.device).expect("event");
        event.record(&extra_stream).expect("record");
        let module = gpu_sync::Module::load(&t.device, kernels::ModuleId::Spin.fatbin()).expect("module");
        let mut captured = DeviceBuffer::<u32>::alloc(&other, 64).expect("captured");
        other.synchronize().expect("sync other");
        let graph = other.capture(|cap| cap.stream().fill_u32(&mut captured, 7)).expect("capture");
        let exec = graph.instantiate().expect("instantiate");
        exec.launch(&other).expect("replay");
        s.launch_host_fn(move || {
            drop((owned, elsewhere, pinned, extra_stream, event, module, graph, exec, captured))
        })
        .expect("host fn");
        // A pageable copy behind the host function on the same stream.
        let got = s.to_vec(&y).expect("to_vec behind the host function");
        assert!(got.iter().enumerate().all(|(i, &v)| v == reference::pattern(SEED, i as u64)));
        // The drops were deferred off the callback, and done by now.
        s.synchronize().expect("sync");
        t.device.synchronize().expect("device sync");
        let logged = sync_tests::logs::take();
        assert!(
            !logged.iter().any(|l| l.contains("leaking")),
            "a drop in the host function leaked: {logged:?}"
        );
        if let (Some(sess), Some(before)) = (&t.session, live_before) {
            // Events pooled by the streams still alive (`s`, `other`: the
            // replay's cross-stream waits) are theirs, not the host
            // function's; every object it dropped is gone.
            let after = sess.live();
            assert_eq!(
                cuda_sim::LiveCounts { events: before.events, ..after },
                before,
                "objects dropped in the host function were never freed"
            );
        }
        let races = t.session.as_ref().map(|s| s.races()).unwrap_or_default();
        t.finish();
        races
    });
    assert!(races.is_empty(), "{}", fmt_races(&races));
}

#[test]
fn a_host_function_that_calls_gpu_sync_gets_an_error_not_a_hang() {
    let results = watchdog(60, "a host function calling into gpu-sync", || {
        let t = ctx(52);
        let s = Stream::new(&t.device).expect("s");
        let y = DeviceBuffer::<u32>::zeroed(&s, 64).expect("y");
        let ev = SyncEvent::new(&t.device).expect("ev");
        ev.record(&s).expect("record");
        let (tx, rx) = mpsc::channel();
        let (s2, y2) = (s.clone(), DeviceBuffer::<u32>::zeroed(&s, 16).expect("y2"));
        let other = Stream::new(&t.device).expect("other");
        let mut pinned = PinnedBuffer::<u32>::new(&t.device, 16, HostAllocFlags::empty()).expect("pinned");
        let device = t.device.clone();
        s.launch_host_fn(move || {
            // Driver calls are forbidden here: gpu-sync refuses each one
            // before taking a lock.
            let r: Vec<(&str, gpu_sync::Result<()>)> = vec![
                ("to_vec", s2.to_vec(&y2).map(drop)),
                ("Stream::wait", other.wait(&ev)),
                ("SyncEvent::synchronize", ev.synchronize().map(drop)),
                ("Stream::synchronize", other.synchronize().map(drop)),
                ("as_mut_slice", pinned.as_mut_slice().map(drop)),
                ("DeviceBuffer::alloc", DeviceBuffer::<u32>::alloc(&other, 4).map(drop)),
                ("Device::synchronize", device.synchronize().map(drop)),
            ];
            let _ = tx.send(r);
        })
        .expect("host fn");
        let back = s.to_vec(&y).expect("to_vec");
        assert_eq!(back.len(), 64);
        s.synchronize().expect("sync");
        let inner = rx.recv_timeout(Duration::from_secs(30)).expect("the host function ran");
        t.device.synchronize().expect("device sync");
        t.finish();
        inner
    });
    for (what, r) in results {
        match r {
            Err(Error::Driver { error, .. }) => {
                assert_eq!(error.0, gpu_sync::cuda_sys::CUresult::CUDA_ERROR_NOT_PERMITTED, "{what}");
            }
            other => {
                panic!("{what} inside a host function: expected CUDA_ERROR_NOT_PERMITTED, got {other:?}")
            }
        }
    }
}

// Hole 6: a pageable-copy API given pinned memory, when a wait fails.

#[test]
fn a_failed_wait_after_a_pageable_download_into_pinned_memory_leaves_no_copy_queued() {
    if !on_sim() {
        return;
    }
    // A device synchronization by a test beside this one would run the
    // queued copy early and hide it.
    let _one_at_a_time = sync_tests::exclusive();
    for k in 0..3u64 {
        let t = ctx(60 + k);
        let sess = t.session.as_ref().expect("sim");
        let kern = Kernels::load(&t.device).expect("kernels");
        let s = Stream::new(&t.device).expect("s");
        let n = 256;
        let mut x = DeviceBuffer::<u32>::alloc(&s, n).expect("x");
        kern.fill_pattern(&s, &mut x, SEED).expect("fill");
        let mut pinned = PinnedBuffer::<u32>::new(&t.device, n, HostAllocFlags::empty()).expect("pinned");
        s.synchronize().expect("sync");
        let syncs = sess.calls().iter().filter(|c| **c == "cuStreamSynchronize").count() as u64;
        sess.inject(cuda_sim::FaultPlan::new().fail_nth_of(
            "cuStreamSynchronize",
            syncs + k,
            gpu_sync::cuda_sys::CUresult::CUDA_ERROR_UNKNOWN,
        ));
        let r = s.download_pageable(&x, pinned.as_mut_slice().expect("slice"));
        sess.clear_faults();
        if r.is_err() {
            // The borrow ended: a reader may look now.
            cuda_sim::host_read(pinned.as_ptr().cast(), n * 4);
            let seen = pinned.to_vec();
            t.device.synchronize().expect("device sync");
            assert!(
                pinned[..] == seen[..],
                "failing sync #{k}: the pinned memory changed after the call returned"
            );
        } else {
            assert!(pinned[..] == pattern(n)[..]);
        }
        let races = sess.races();
        assert!(races.is_empty(), "failing sync #{k}:\n{}", fmt_races(&races));
        drop(pinned);
        t.finish();
    }
}

// 7a: over-aligned element types.

#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(8192))]
struct TwoPages([[u8; 4096]; 2]);

#[test]
fn pinned_buffers_of_over_aligned_types_are_refused() {
    let t = ctx(71);
    for len in [0, 1, 3] {
        match PinnedBuffer::<TwoPages>::new(&t.device, len, HostAllocFlags::empty()) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("align"), "{m}"),
            other => panic!("{len} elements aligned to 8192: expected InvalidArgument, got {other:?}"),
        }
    }
    // Page alignment itself is fine.
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C, align(4096))]
    struct OnePage([u8; 4096]);
    let b = PinnedBuffer::<OnePage>::new(&t.device, 2, HostAllocFlags::empty()).expect("page-aligned");
    assert_eq!(b.as_ptr().align_offset(4096), 0);
    drop(b);
    t.finish();
}

// Issue 9: pinned sub-range copies, tracked like whole-buffer copies.

#[test]
fn pinned_sub_ranges_copy_with_the_whole_buffer_rules() {
    let t = ctx(81);
    let (a, b) = (Stream::new(&t.device).expect("a"), Stream::new(&t.device).expect("b"));
    let n = 1024;
    let data = pattern(n);
    let mut host = PinnedBuffer::from_slice(&t.device, &data, HostAllocFlags::empty()).expect("pinned");
    // Upload a range on `a`; a reader on `b` needs no manual wait.
    let mut x = DeviceBuffer::<u32>::zeroed(&a, 256).expect("x");
    a.upload_range(&host, 100..356, &mut x).expect("upload range");
    assert!(b.to_vec(&x).expect("x")[..] == data[100..356]);
    // Into part of a device buffer; the host write after it waits for it.
    let mut y = DeviceBuffer::<u32>::zeroed(&a, 256).expect("y");
    a.upload_range(&host, ..128, &mut y.slice_mut(64..192).expect("view")).expect("upload into a view");
    let w = host.as_mut_slice().expect("host write");
    if on_sim() {
        cuda_sim::host_write(w.as_ptr().cast(), std::mem::size_of_val(w));
    }
    w.fill(0);
    let got = b.to_vec(&y).expect("y");
    assert!(got[64..192] == data[..128] && got[..64].iter().chain(&got[192..]).all(|&v| v == 0));
    // An upload still reading the buffer on `a`, then a range download into
    // it on `b`: the download waits (device-side) for the read.
    let mut z = DeviceBuffer::<u32>::alloc(&a, n).expect("z");
    a.upload(&host, &mut z).expect("upload whole");
    let back = b.download_range(&x, host, 512..768).expect("download range").wait().expect("wait");
    assert!(back[512..768] == data[100..356], "the range holds the download");
    assert!(back[..512].iter().chain(&back[768..]).all(|&v| v == 0), "the rest keeps its values");
    assert!(
        a.to_vec(&z).expect("z").iter().all(|&v| v == 0),
        "the upload read the buffer before the download"
    );
    // Bad ranges and lengths are errors, before the driver sees anything.
    match a.upload_range(&back, 1000..1100, &mut x) {
        Err(Error::OutOfRange { start: 1000, end: 1100, len: 1024 }) => {}
        other => panic!("expected OutOfRange, got {other:?}"),
    }
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = 300..200;
    assert!(matches!(a.upload_range(&back, reversed, &mut x), Err(Error::OutOfRange { .. })));
    match a.upload_range(&back, 0..10, &mut x) {
        Err(Error::LengthMismatch { src: 10, dst: 256, .. }) => {}
        other => panic!("expected LengthMismatch, got {other:?}"),
    }
    match b.download_range(&x, back, 900..1200) {
        Err(Error::OutOfRange { start: 900, end: 1200, len: 1024 }) => {}
        other => panic!("expected OutOfRange, got {:?}", other.map(drop)),
    }
    let spare = PinnedBuffer::<u32>::new(&t.device, 64, HostAllocFlags::empty()).expect("spare");
    assert!(matches!(b.download_range(&x, spare, 0..64), Err(Error::LengthMismatch { .. })));
    // An empty range is a no-op copy.
    let mut empty = DeviceBuffer::<u32>::alloc(&a, 0).expect("empty");
    let host = PinnedBuffer::from_slice(&t.device, &data[..4], HostAllocFlags::empty()).expect("pinned");
    a.upload_range(&host, 4.., &mut empty).expect("empty range");
    a.synchronize().expect("sync");
    t.finish();
}

// Pageable copies of at least 16 MiB are staged through pinned chunks by
// several host threads (gpu-sync/src/memory/staging.rs): exact data, into
// and out of views at odd offsets, a size that is no multiple of the chunk,
// across two streams, with no race and no pinned memory left behind.

#[test]
fn large_pageable_copies_are_staged_exactly_and_leave_nothing_behind() {
    let t = ctx(97);
    let (a, b) = (Stream::new(&t.device).expect("a"), Stream::new(&t.device).expect("b"));
    // 40 MiB + 12 bytes: three chunks, the last one partial.
    let n = (40 << 20) / 4 + 3;
    let data = pattern(n);
    let live_before = t.session.as_ref().map(|s| s.live());
    let x = DeviceBuffer::from_slice(&a, &data).expect("from_slice");
    if let Some(sess) = &t.session {
        // Staged: two pinned chunks, then three asynchronous chunk uploads.
        let calls = sess.calls();
        let count = |name: &str| calls.iter().filter(|&&c| c == name).count();
        assert_eq!(count("cuMemHostAlloc"), 2, "two pinned chunks: {calls:?}");
        assert_eq!(count("cuMemcpyHtoDAsync"), 3, "one upload per chunk: {calls:?}");
    }
    // Read on another stream: the staged uploads are tracked writes of `x`.
    assert!(b.to_vec(&x).expect("to_vec") == data, "to_vec of a staged upload");
    let mut back = vec![0u32; n - 5];
    b.download_pageable(&x.slice(5..).expect("view"), &mut back).expect("download_pageable");
    assert!(back[..] == data[5..], "download_pageable of a view");
    let mut z = DeviceBuffer::<u32>::zeroed(&b, n).expect("z");
    a.upload_pageable(&data[..n - 7], &mut z.slice_mut(7..).expect("view mut")).expect("upload into a view");
    let got = b.to_vec(&z).expect("z");
    assert!(got[..7].iter().all(|&v| v == 0) && got[7..] == data[..n - 7], "upload into a view");
    // A length mismatch is an error before any copy.
    match a.upload_pageable(&data[..n - 1], &mut z) {
        Err(Error::LengthMismatch { .. }) => {}
        other => panic!("expected LengthMismatch, got {other:?}"),
    }
    drop((x, z));
    t.device.synchronize().expect("device sync");
    if let (Some(sess), Some(before)) = (&t.session, live_before) {
        let after = sess.live();
        assert_eq!(
            (after.pinned_allocations, after.device_allocations),
            (before.pinned_allocations, before.device_allocations),
            "staging left pinned or device memory behind"
        );
    }
    t.finish();
}
