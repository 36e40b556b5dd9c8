//! The per-device book (issue 8): one lock over the trackers of a device's
//! resources and the states of its streams.
//!
//! - A stream's last handle can be dropped by a submission that holds the
//!   book: the submission replaces the stream's last use of a buffer, and
//!   that use held the stream. Freeing the stream's slot must not wait for
//!   the book then (it would wait for itself).
//! - A pinned buffer whose uses cannot be waited for is leaked, never freed
//!   while a copy may still read it.
//!
//! Simulator only where they count driver objects; on a GPU the first runs
//! as a deadlock check.

use gpu_sync::{DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use sync_tests::{ctx, on_sim};

/// Aborts the test process with a message unless dropped within `secs`
/// seconds: a deadlock fails the run instead of hanging it (the body runs
/// on the test's own thread, where the simulator session is current).
struct Watchdog(Arc<AtomicBool>);

impl Watchdog {
    fn arm(secs: u64, what: &'static str) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let seen = done.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(secs));
            if !seen.load(Ordering::Acquire) {
                eprintln!("{what}: no return within {secs} s (deadlock)");
                std::process::abort();
            }
        });
        Watchdog(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

#[test]
fn a_stream_whose_last_handle_a_submission_drops_is_freed_without_deadlock() {
    let t = ctx(0x800c);
    let device = &t.device;
    let dog = Watchdog::arm(60, "the write that dropped a stream's last handle");
    let keep = Stream::new(device).expect("keep");
    // Allocated on `keep`, so the allocation does not hold `s1`.
    let mut x = DeviceBuffer::<u32>::zeroed(&keep, 1024).expect("x");
    for round in 0..4u32 {
        let s1 = Stream::new(device).expect("s1");
        s1.fill_u32(&mut x, round).expect("write on s1");
        // The buffer's last write is now the only holder of s1.
        drop(s1);
        // This write replaces that use with the book locked: s1 goes.
        keep.fill_u32(&mut x, round + 100).expect("write on keep");
    }
    assert_eq!(keep.to_vec(&x).expect("read"), vec![103; 1024]);
    drop(x);
    drop(keep);
    // Deferred frees run here.
    device.synchronize().expect("device sync");
    drop(dog);
    if let Some(s) = &t.session {
        let live = s.live();
        assert_eq!(live.streams, 0, "streams left alive: {live:?}");
        assert!(live.is_empty(), "leaked: {live:?}");
    }
    t.finish();
}

#[test]
fn a_pinned_buffer_whose_uses_cannot_be_waited_for_is_leaked_not_freed() {
    if !on_sim() {
        return;
    }
    let _one_at_a_time = sync_tests::exclusive();
    let t = ctx(0x800d);
    let sess = t.session.as_ref().expect("sim");
    let s = Stream::new(&t.device).expect("s");
    let host = PinnedBuffer::from_slice(&t.device, &[7u32; 4096], HostAllocFlags::empty()).expect("pinned");
    let mut y = DeviceBuffer::<u32>::zeroed(&s, 4096).expect("y");
    s.upload(&host, &mut y).expect("upload");
    // The upload is queued (the simulator runs work when the host waits):
    // closing the buffer must wait for it, and that wait fails.
    let waits = sess.calls().iter().filter(|c| **c == "cuEventSynchronize").count() as u64;
    sess.inject(cuda_sim::FaultPlan::new().fail_nth_of(
        "cuEventSynchronize",
        waits,
        gpu_sync::cuda_sys::CUresult::CUDA_ERROR_UNKNOWN,
    ));
    let closed = host.close();
    sess.clear_faults();
    assert!(closed.is_err(), "the failed wait is reported");
    let live = sess.live();
    assert_eq!(live.pinned_allocations, 1, "the pinned memory was freed with a copy still queued: {live:?}");
    // The queued copy still reads the (leaked) memory, race-free.
    assert_eq!(s.to_vec(&y).expect("read"), vec![7; 4096]);
    let races = sess.races();
    assert!(races.is_empty(), "{}", sync_tests::fmt_races(&races));
}
