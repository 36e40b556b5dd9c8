//! The seeded scheduler: determinism, stream order, event waits, and
//! pinned copies touching host memory when they run.

mod common;
use common::*;
use std::ffi::c_void;
use std::sync::Mutex;

/// Host-function tags that ran: `session * 1000 + tag`, so a test sees its
/// own even when another session's context synchronization ran them.
static LOG: Mutex<Vec<usize>> = Mutex::new(Vec::new());

unsafe extern "C" fn log_tag(data: *mut c_void) {
    LOG.lock().unwrap().push(data.addr());
}

fn logged(session: u64) -> Vec<usize> {
    let s = session as usize;
    LOG.lock().unwrap().iter().filter(|t| **t / 1000 == s).map(|t| t % 1000).collect()
}

fn tag(t: usize) -> *mut c_void {
    std::ptr::without_provenance_mut(t)
}

/// Queues `log_tag(data)` on `s`.
fn host_fn(s: impl AsBorrowed<handle::kind::StreamKind>, data: *mut c_void) {
    // SAFETY: `log_tag` only pushes the pointer's address (never
    // dereferenced) to a mutex-guarded log; it makes no CUDA call.
    unsafe { stream::launch_host_func(s, Some(log_tag), data) }.unwrap();
}

/// Runs a fixed program of host functions on 4 streams (stream 3's fourth
/// waits for stream 0's third) and returns the execution order.
fn run(seed: u64) -> Vec<usize> {
    let e = env(seed);
    let base = e.session.id() as usize * 1000;
    let streams: Vec<OwnedStream> =
        (0..4).map(|_| e.stream(CUstream_flags::CU_STREAM_NON_BLOCKING.0)).collect();
    let ev = e.event(CUevent_flags::CU_EVENT_DISABLE_TIMING.0);
    for i in 0..5 {
        for (k, s) in streams.iter().enumerate() {
            if k == 3 && i == 3 {
                stream::wait_event(s, &ev, 0).unwrap();
            }
            host_fn(s, tag(base + k * 10 + i));
            if k == 0 && i == 2 {
                event::record(&ev, s).unwrap();
            }
        }
    }
    context::synchronize(d()).unwrap();
    let order = logged(e.session.id());
    event::destroy(ev).unwrap();
    for s in streams {
        stream::destroy(s).unwrap();
    }
    teardown(e);
    order
}

#[test]
fn same_seed_same_order_and_the_order_respects_streams_and_waits() {
    let _serial = serial();
    let a = run(42);
    assert_eq!(a.len(), 20);
    assert_eq!(a, run(42));
    let pos = |t: usize| a.iter().position(|&x| x == t).unwrap();
    for k in 0..4 {
        for i in 1..5 {
            assert!(pos(k * 10 + i - 1) < pos(k * 10 + i), "stream {k} out of order: {a:?}");
        }
    }
    assert!(pos(2) < pos(33), "stream 3 ran ahead of the event it waits on: {a:?}");
}

#[test]
fn different_seeds_give_different_orders() {
    let _serial = serial();
    let orders: Vec<Vec<usize>> = (0..6).map(|s| run(1000 + s)).collect();
    assert!(orders.iter().any(|o| *o != orders[0]), "six seeds gave one order");
}

#[test]
fn a_pinned_copy_reads_host_memory_when_it_executes() {
    let _serial = serial();
    let e = env(20);
    let s = e.stream(0);
    let host = e.pinned(16, 0).cast::<u32>();
    // SAFETY: 16 bytes of pinned memory owned by this test.
    unsafe { host.write(1) };
    let dev = e.alloc(16);
    // SAFETY: the simulator copies when the copy runs, reading the pinned
    // word the test writes next: the race with the host is the point, and
    // the simulator's host memory stays valid (freed after the sync).
    unsafe { memory::memcpy_htod_async(dev, host.cast(), 4, &s) }.unwrap();
    // The copy has not run yet: a host write now is what the device gets.
    // SAFETY: as above.
    unsafe { host.write(2) };
    stream::synchronize(&s).unwrap();
    assert_eq!(e.read_u32(dev, 1), vec![2]);

    // Pageable memory is staged at call time instead.
    let mut pageable = [5u32];
    // SAFETY: pageable memory is read during the call.
    unsafe { memory::memcpy_htod_async(dev, pageable.as_ptr().cast(), 4, &s) }.unwrap();
    pageable[0] = 6;
    stream::synchronize(&s).unwrap();
    assert_eq!(e.read_u32(dev, 1), vec![5]);
    assert_eq!(pageable, [6]);
    // SAFETY: every copy touching them was synchronized.
    unsafe {
        memory::free(d(), dev).unwrap();
        memory::free_host(d(), host.cast()).unwrap();
    }
    stream::destroy(s).unwrap();
    teardown(e);
}

#[test]
fn a_stream_sync_runs_only_its_sessions_work_and_a_context_sync_runs_all() {
    let _serial = serial();
    let e = env(21);
    let s = e.stream(0);
    let mine = e.session.id() as usize;
    host_fn(&s, tag(mine * 1000 + 777));
    std::thread::spawn(|| {
        let other = env(22);
        let t = other.stream(0);
        stream::synchronize(&t).unwrap();
        stream::destroy(t).unwrap();
        teardown(other);
    })
    .join()
    .unwrap();
    assert_eq!(e.session.pending(), 1, "another session's stream sync ran this session's work");
    std::thread::spawn(|| {
        let other = env(23);
        context::synchronize(d()).unwrap();
        teardown(other);
    })
    .join()
    .unwrap();
    assert_eq!(e.session.pending(), 0, "a context synchronization completes every session's work");
    assert_eq!(logged(mine as u64), vec![777]);
    stream::destroy(s).unwrap();
    teardown(e);
}
