//! The facade against the simulator: the guard order and the flavor
//! choice, seen from outside the flavors.
use super::*;
use crate::error::Error;
use crate::{Device, DeviceBuffer, Stream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn not_permitted<T: std::fmt::Debug>(r: &Result<T>) -> bool {
    matches!(r, Err(Error::Driver { error, .. }) if error.0 == cuda_sys::CUresult::CUDA_ERROR_NOT_PERMITTED)
}

/// Runs `f` on another thread and fails (instead of hanging) if it has
/// not returned within 20 s.
fn within_20s(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(20)).is_ok(),
        "no return within 20 s: a lock taken before a guard"
    );
}

#[test]
fn inside_a_host_function_submit_refuses_before_taking_the_book() {
    let _session = crate::sim::session(0xe0).expect("session");
    let device = Device::get(0).expect("device");
    let s = Stream::new(&device).expect("stream");
    let lane = s.inner.clone();
    within_20s(move || {
        // This thread holds the book, as the thread waiting for a host
        // function may: the refusal must come first.
        let _book = lane.lock();
        let _inside = Inside::enter();
        let op = Op::new("test", Kind::Async, NO_USES);
        let r = submit(&lane, op, |_| Ok(()));
        assert!(not_permitted(&r), "{:?}", r.map(drop));
        assert!(not_permitted(&wait_stream(&lane, &lane)));
        assert!(not_permitted(&host_wait_device(lane.device())));
        assert!(not_permitted(&begin_capture(&lane).map(drop)));
    });
}

#[test]
fn the_flavor_refuses_what_a_capture_cannot_hold() {
    let _session = crate::sim::session(0xe1).expect("session");
    let device = Device::get(0).expect("device");
    let s = Stream::new(&device).expect("stream");
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 16).expect("x");
    let ran = AtomicBool::new(false);
    let g = s.capture(|_| {
        for kind in [Kind::Blocking, Kind::Uncaptured, Kind::After(&[]), Kind::HostFn, Kind::WaitEvent(None)]
        {
            let op = Op::new("refused", kind, NO_USES);
            let r = submit(&s.inner, op, |_| {
                ran.store(true, Ordering::SeqCst);
                Ok(())
            });
            assert!(matches!(r, Err(Error::Capturing { op: "refused" })), "{:?}", r.map(drop));
        }
        // Async device work joins the capture (ticket 0: captured).
        s.fill_u32(&mut x, 3)?;
        Ok(())
    });
    assert!(!ran.load(Ordering::SeqCst), "a refused operation made its driver call");
    assert_eq!(g.expect("graph").node_count().expect("nodes"), 1);
}

#[test]
fn free_now_or_later_defers_inside_a_host_function_and_runs_at_the_next_drain() {
    let ran = std::sync::Arc::new(AtomicBool::new(false));
    let seen = ran.clone();
    {
        let _inside = Inside::enter();
        free_now_or_later(None, Box::new(move || seen.store(true, Ordering::SeqCst)));
        assert!(!ran.load(Ordering::SeqCst), "ran inside the host function");
        drain();
        assert!(!ran.load(Ordering::SeqCst), "drained inside the host function");
    }
    drain();
    assert!(ran.load(Ordering::SeqCst), "not run at the next drain on an ordinary thread");
}

#[test]
fn off_stream_refuses_in_a_host_function_then_on_a_capturing_thread() {
    let _session = crate::sim::session(0xe2).expect("session");
    let device = Device::get(0).expect("device");
    let s = Stream::new(&device).expect("stream");
    let ran = AtomicBool::new(false);
    let call = || {
        ran.store(true, Ordering::SeqCst);
        Ok(())
    };
    {
        let _inside = Inside::enter();
        assert!(not_permitted(&off_stream("test", call)));
    }
    let g = s.capture(|_| {
        let r = off_stream("test", call);
        assert!(matches!(r, Err(Error::Capturing { op: "test" })), "{r:?}");
        Ok(())
    });
    g.expect("graph");
    assert!(!ran.load(Ordering::SeqCst), "a refused call ran");
    off_stream("test", call).expect("an ordinary thread");
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn an_event_wait_through_submit_takes_a_ticket_and_knows_the_recorded_point() {
    let _session = crate::sim::session(0xe3).expect("session");
    let device = Device::get(0).expect("device");
    let (a, b) = (Stream::new(&device).expect("a"), Stream::new(&device).expect("b"));
    let x = DeviceBuffer::<u32>::zeroed(&a, 16).expect("x");
    let ev = crate::SyncEvent::new(&device).expect("event");
    ev.record(&a).expect("record");
    let recorded = a.inner.last_ticket();
    let before = b.inner.last_ticket();
    b.wait(&ev).expect("wait");
    assert!(b.inner.last_ticket() > before, "the wait took no ticket");
    let mut book = b.inner.lock();
    assert!(
        book.stream(&b.inner).known_for(a.inner.id) >= recorded,
        "the recorded point is not known as waited for"
    );
    drop(book);
    drop(x);
}

/// Held by every test that reads or sets device 1's peer mask: the
/// simulated devices are shared by the tests' threads, so a bit one test
/// opens would let another's refusal through.
fn peer_mask_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sets bit `owner` of `device`'s peer mask (as peer access will) for the
/// life of the value, and clears it again (hold [`peer_mask_lock`]).
struct PeerBit(Device, i32);

impl PeerBit {
    fn open(device: &Device, owner: i32) -> PeerBit {
        device.inner.peers.fetch_or(1 << owner, Ordering::SeqCst);
        PeerBit(device.clone(), owner)
    }
}

impl Drop for PeerBit {
    fn drop(&mut self) {
        self.0.inner.peers.fetch_and(!(1 << self.1), Ordering::SeqCst);
    }
}

#[test]
fn a_buffer_of_a_device_the_stream_does_not_reach_is_refused_and_a_reached_one_is_tracked_on_both_books() {
    let _mask = peer_mask_lock();
    let session = crate::sim::session(0xe4).expect("session");
    let (d0, d1) = (Device::get(0).expect("device 0"), Device::get(1).expect("device 1"));
    let (s0, s1) = (Stream::new(&d0).expect("s0"), Stream::new(&d1).expect("s1"));
    let x = DeviceBuffer::<u32>::zeroed(&s0, 16).expect("x on device 0");
    let y = DeviceBuffer::<u32>::zeroed(&s1, 16).expect("y on device 1");
    // A kernel's uses on device 1: it writes x (device 0) and reads y.
    let uses = [(Target::Device(&x.alloc), Access::Write), (Target::Device(&y.alloc), Access::Read)];
    let ran = AtomicBool::new(false);
    let call = |_: cuda_sys::BorrowedStream<'_>| {
        ran.store(true, Ordering::SeqCst);
        Ok(())
    };
    let op = Op::new("kernel", Kind::Async, &uses).naming("a buffer argument");
    let r = submit(&s1.inner, op, call);
    assert!(
        matches!(r, Err(Error::DeviceMismatch { what: "a buffer argument", expected: 1, found: 0 })),
        "{:?}",
        r.map(drop)
    );
    assert!(!ran.load(Ordering::SeqCst), "a refused operation made its driver call");
    // A copy between the devices needs one buffer reached: allowed.
    let op = Op::new("copy", Kind::Async, &uses).copy_between_devices("both buffers");
    submit(&s1.inner, op, |_| Ok(())).expect("a copy between devices");
    // Peer access opened (device 1 reaches device 0's memory): accepted,
    // and tracked in both devices' books at the operation's ticket.
    let open = PeerBit::open(&d1, 0);
    let op = Op::new("kernel", Kind::Async, &uses).naming("a buffer argument");
    let ((), ticket) = submit(&s1.inner, op, call).expect("a reached buffer");
    assert!(ran.load(Ordering::SeqCst));
    let on_s1 = |res: &Resource| {
        res.outstanding().iter().any(|p| p.stream_id() == s1.inner.id && p.ticket() == ticket)
    };
    assert!(on_s1(&x.alloc.res), "the use of device 0's buffer is not in device 0's book");
    assert!(on_s1(&y.alloc.res), "the use of device 1's buffer is not in device 1's book");
    drop(open);
    let op = Op::new("kernel", Kind::Async, &uses).naming("a buffer argument");
    assert!(
        matches!(submit(&s1.inner, op, |_| Ok(())), Err(Error::DeviceMismatch { .. })),
        "peer access closed"
    );
    s1.synchronize().expect("sync");
    drop((x, y));
    session.assert_no_races();
}

/// A `Home` for `uses` on `s`, each buffer noted, as a launch's argument
/// pass makes it.
fn home_of<'s>(s: &'s Timeline, uses: &[Use<'_>]) -> Home<'s> {
    let mut home = Home::new(s);
    for (t, _) in uses {
        if let Target::Device(a) = t {
            home.note(a);
        }
    }
    home
}

#[test]
fn a_home_found_by_the_callers_pass_keeps_the_device_rule() {
    let _mask = peer_mask_lock();
    let session = crate::sim::session(0xe5).expect("session");
    let (d0, d1) = (Device::get(0).expect("device 0"), Device::get(1).expect("device 1"));
    let (s0, s1) = (Stream::new(&d0).expect("s0"), Stream::new(&d1).expect("s1"));
    let x = DeviceBuffer::<u32>::zeroed(&s0, 16).expect("x on device 0");
    let y = DeviceBuffer::<u32>::zeroed(&s1, 16).expect("y on device 1");
    let ran = AtomicBool::new(false);
    let call = |_: cuda_sys::BorrowedStream<'_>| {
        ran.store(true, Ordering::SeqCst);
        Ok(())
    };
    let on = |res: &Resource, s: &Stream, ticket: u64| {
        res.outstanding().iter().any(|p| p.stream_id() == s.inner.id && p.ticket() == ticket)
    };
    // Every buffer on the stream's device: the eager flavor, tracked.
    let home_uses = [(Target::Device(&y.alloc), Access::Write)];
    let op = Op::new("kernel", Kind::Async, &home_uses).home(home_of(&s1.inner, &home_uses));
    let ((), ticket) = submit(&s1.inner, op, call).expect("a buffer of the stream's device");
    assert!(ran.swap(false, Ordering::SeqCst));
    assert!(on(&y.alloc.res, &s1, ticket), "the use is not in device 1's book");
    // A buffer of device 0 noted: refused as without a `Home`, nothing run.
    let uses = [(Target::Device(&x.alloc), Access::Write), (Target::Device(&y.alloc), Access::Read)];
    let op =
        Op::new("kernel", Kind::Async, &uses).naming("a buffer argument").home(home_of(&s1.inner, &uses));
    let r = submit(&s1.inner, op, call);
    assert!(
        matches!(r, Err(Error::DeviceMismatch { what: "a buffer argument", expected: 1, found: 0 })),
        "{:?}",
        r.map(drop)
    );
    assert!(!ran.load(Ordering::SeqCst), "a refused operation made its driver call");
    // A `Home` of another stream's book (device 0's, where x is at home)
    // given to an operation on s1: ignored, the engine asks itself.
    let x_only = [(Target::Device(&x.alloc), Access::Write)];
    let op =
        Op::new("kernel", Kind::Async, &x_only).naming("a buffer argument").home(home_of(&s0.inner, &x_only));
    assert!(matches!(submit(&s1.inner, op, call), Err(Error::DeviceMismatch { .. })), "another book's Home");
    assert!(!ran.load(Ordering::SeqCst));
    // A `Home` made for another stream of the same device (same book): not
    // the operation's stream, so the engine asks itself, and the use is
    // tracked on the stream it was submitted on.
    let s1b = Stream::new(&d1).expect("a second stream of device 1");
    let op = Op::new("kernel", Kind::Async, &home_uses).home(home_of(&s1b.inner, &home_uses));
    let ((), ticket) = submit(&s1.inner, op, call).expect("another stream's Home, same book");
    assert!(ran.swap(false, Ordering::SeqCst));
    assert!(on(&y.alloc.res, &s1, ticket), "the use is not recorded for s1");
    // Peer access opened: the reached buffer goes through the across
    // flavor, tracked in both books.
    let open = PeerBit::open(&d1, 0);
    let op =
        Op::new("kernel", Kind::Async, &uses).naming("a buffer argument").home(home_of(&s1.inner, &uses));
    let ((), ticket) = submit(&s1.inner, op, call).expect("a reached buffer");
    assert!(ran.load(Ordering::SeqCst));
    assert!(on(&x.alloc.res, &s1, ticket), "the use of device 0's buffer is not in device 0's book");
    assert!(on(&y.alloc.res, &s1, ticket), "the use of device 1's buffer is not in device 1's book");
    drop(open);
    s1.synchronize().expect("sync");
    drop((x, y));
    session.assert_no_races();
}

#[test]
fn a_group_with_no_stream_or_one_buffer_written_by_two_parts_is_refused_before_any_call() {
    let _session = crate::sim::session(0xe9).expect("session");
    let device = Device::get(0).expect("device");
    let (a, b) = (Stream::new(&device).expect("a"), Stream::new(&device).expect("b"));
    let x = DeviceBuffer::<u32>::zeroed(&a, 64).expect("x");
    let called = AtomicBool::new(false);
    let r = submit_group("empty", &[], |_| {
        called.store(true, Ordering::Relaxed);
        Ok(())
    });
    assert!(matches!(r, Err(Error::InvalidArgument(ref m)) if m.contains("empty")), "{:?}", r.map(drop));
    // One allocation written on one stream and read on the other, inside
    // one operation: concurrent, so refused (reads on both are fine).
    let write = [(Target::Device(&x.alloc), Access::Write)];
    let read = [(Target::Device(&x.alloc), Access::Read)];
    let parts = [Part::new(&a.inner, &write), Part::new(&b.inner, &read)];
    let r = submit_group("shared write", &parts, |_| {
        called.store(true, Ordering::Relaxed);
        Ok(())
    });
    assert!(matches!(r, Err(Error::InvalidArgument(ref m)) if m.contains("written")), "{:?}", r.map(drop));
    assert!(!called.load(Ordering::Relaxed), "a refused group made its call");
    let parts = [Part::new(&a.inner, &read), Part::new(&b.inner, &read)];
    let (_, tickets) = submit_group("shared read", &parts, |raws| {
        assert_eq!(raws.len(), 2);
        Ok(())
    })
    .expect("reads on two streams");
    assert_eq!(tickets.len(), 2);
    assert!(tickets[0] < tickets[1], "a ticket per stream, drawn in order: {tickets:?}");
    assert_eq!(a.inner.last_ticket(), tickets[0]);
    assert_eq!(b.inner.last_ticket(), tickets[1]);
}

#[test]
fn a_buffer_written_by_a_part_and_reached_by_a_part_on_another_device_is_refused() -> Result<()> {
    // The group flavor skips the shared-write check when every buffer is on
    // its own part's device and no two parts share one; a peer's buffer
    // must still be checked.
    let _mask = peer_mask_lock();
    let _session = crate::sim::session(0xeb)?;
    let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    let (s0, s1) = (Stream::new(&d0)?, Stream::new(&d1)?);
    let x = DeviceBuffer::<u32>::zeroed(&s0, 16)?;
    let y = DeviceBuffer::<u32>::zeroed(&s1, 16)?;
    let _open = PeerBit::open(&d1, 0);
    let called = AtomicBool::new(false);
    let write_x = [(Target::Device(&x.alloc), Access::Write)];
    let read_x = [(Target::Device(&x.alloc), Access::Read), (Target::Device(&y.alloc), Access::Write)];
    let parts = [Part::new(&s0.inner, &write_x), Part::new(&s1.inner, &read_x)];
    let r = submit_group("peer shared write", &parts, |_| {
        called.store(true, Ordering::Relaxed);
        Ok(())
    });
    assert!(matches!(r, Err(Error::InvalidArgument(ref m)) if m.contains("written")), "{:?}", r.map(drop));
    assert!(!called.load(Ordering::Relaxed), "a refused group made its call");
    // Each part on its own device's buffers: no check needed, and none
    // refuses.
    let write_y = [(Target::Device(&y.alloc), Access::Write)];
    let parts = [Part::new(&s0.inner, &write_x), Part::new(&s1.inner, &write_y)];
    let (_, tickets) = submit_group("local writes", &parts, |_| Ok(()))?;
    assert_eq!(tickets.len(), 2);
    Ok(())
}

#[test]
fn inside_a_host_function_a_group_refuses_before_taking_any_book() {
    let _session = crate::sim::session(0xea).expect("session");
    let device = Device::get(0).expect("device");
    let s = Stream::new(&device).expect("stream");
    let lane = s.inner.clone();
    within_20s(move || {
        let _book = lane.lock();
        let _inside = Inside::enter();
        let parts = [Part::new(&lane, NO_USES)];
        let r = submit_group("test group", &parts, |_| Ok(()));
        assert!(not_permitted(&r), "{:?}", r.map(drop));
    });
}
