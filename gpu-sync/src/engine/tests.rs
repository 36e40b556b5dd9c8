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
        let op = Op { name: "test", uses: NO_USES, kind: Kind::Async, keep: None, describe: None };
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
            let op = Op { name: "refused", uses: NO_USES, kind, keep: None, describe: None };
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
