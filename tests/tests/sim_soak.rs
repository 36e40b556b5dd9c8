//! The CI soak of issue 27 (the long one is the `sim_soak` example): two
//! threads make and drop 3,000 streams with mixed work through gpu-sync —
//! copies, fills, kernel launches, events waited on by a long-lived stream,
//! graphs replayed there, streams synchronized or dropped with their work
//! pending (their last operation, a buffer's free, waited for by nobody) —
//! and what the simulator holds stays flat: after the last stream, its
//! streams, clocks and drained clocks are no larger than after the first
//! 500, and a context synchronization leaves no destroyed stream
//! unobserved.
//!
//! Simulator only: it reads [`cuda_sim::Footprint`].

use gpu_sync::{Device, DeviceBuffer, Stream, SyncEvent};
use std::sync::Barrier;
use sync_tests::{Watchdog, ctx, on_sim};

/// Streams per thread, and the round after which the first footprint is
/// taken.
const ROUNDS: usize = 1_500;
const WARM: usize = 250;
const WORDS: usize = 256;

/// One thread's rounds; `mid` is reached (by both threads) after `WARM`.
fn work(t: u64, device: &Device, k: &kernels::Kernels, mid: &Barrier, after_warm: impl Fn()) {
    let home = Stream::new(device).expect("home");
    let mut acc = DeviceBuffer::<u32>::zeroed(&home, WORDS).expect("acc");
    let mut bumps = 0u32;
    for round in 0..ROUNDS {
        if round == WARM {
            mid.wait();
            after_warm();
            mid.wait();
        }
        let pick = (round as u64).wrapping_mul(0x9E37_79B9) ^ t;
        let s = Stream::new(device).expect("stream");
        let mut tmp = DeviceBuffer::<u32>::alloc(&s, WORDS).expect("tmp");
        s.copy(&acc, &mut tmp).expect("copy");
        if pick.is_multiple_of(2) {
            k.bump(&s, &mut tmp, 1).expect("bump on the short-lived stream");
        }
        match (pick / 2) % 4 {
            0 => {
                let ev = SyncEvent::new(device).expect("event");
                s.fill_u32(&mut tmp, 1).expect("fill");
                ev.record(&s).expect("record");
                home.wait(&ev).expect("home waits");
            }
            1 => {
                let g = s.capture(|c| c.stream().fill_u32(&mut tmp, 5)).expect("capture");
                g.instantiate().expect("instantiate").launch(&home).expect("launch on home");
            }
            2 => {
                s.fill_u32(&mut tmp, 2).expect("fill");
                s.synchronize().expect("sync");
            }
            _ => s.fill_u32(&mut tmp, 3).expect("fill, dropped pending"),
        }
        k.bump(&home, &mut acc, 1).expect("bump");
        bumps += 1;
        if round.is_multiple_of(64) {
            assert!(home.to_vec(&acc).expect("read").iter().all(|&x| x == bumps), "thread {t}");
        }
    }
    assert!(home.to_vec(&acc).expect("read").iter().all(|&x| x == bumps), "thread {t} at the end");
}

#[test]
fn three_thousand_streams_of_mixed_work_keep_the_simulator_flat() {
    if !on_sim() {
        return;
    }
    let t = ctx(0x27);
    let _dog = Watchdog::arm(120, "the CI soak");
    kernels::register_sim_kernels();
    let k = kernels::Kernels::load(&t.device).expect("kernels");
    let session = t.session.as_ref().expect("sim");
    let sess = session.as_cuda_sim();
    let mid = Barrier::new(2);
    let first = std::sync::Mutex::new(None);
    std::thread::scope(|scope| {
        for th in 0..2u64 {
            let (device, k, mid, first) = (&t.device, &k, &mid, &first);
            scope.spawn(move || {
                let _in = session.enter();
                work(th, device, k, mid, || {
                    if th == 0 {
                        *first.lock().expect("lock") = Some(sess.footprint());
                    }
                });
            });
        }
    });
    // The kernels' modules hold the last streams they ran on until unloaded.
    drop(k);
    let first = first.into_inner().expect("lock").expect("footprint after the warm-up");
    let before_sync = sess.footprint();
    t.device.synchronize().expect("cuCtxSynchronize");
    let end = sess.footprint();
    let msg =
        format!("after {WARM} rounds: {first:?}\nat the end: {before_sync:?}\nafter a context sync: {end:?}");
    assert!(before_sync.host_clock <= first.host_clock + 4, "{msg}");
    assert!(before_sync.longest_stream_clock <= first.longest_stream_clock + 4, "{msg}");
    assert!(before_sync.drained_clock <= first.drained_clock + 4, "{msg}");
    assert!(before_sync.all_streams <= first.all_streams + 8, "{msg}");
    assert!(before_sync.retired_index <= 2 * 1024 + 2 * first.retired_index, "{msg}");
    assert_eq!(sess.live().streams, 0, "{msg}");
    assert_eq!(end.retiring, 0, "every destroyed stream observed: {msg}");
    assert_eq!(end.ops, 0, "{msg}");
    assert!(end.host_clock <= first.host_clock + 4, "{msg}");
    session.assert_no_races();
}
