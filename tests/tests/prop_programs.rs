//! Random programs over the safe API (several streams, buffers of two sizes,
//! launches with different read/write sets, copies both ways through pinned
//! and pageable memory, waits of each scope, drops, graphs, host reads).
//!
//! On cuda-sim (CI) each case runs in its own seeded session, so the
//! scheduler reorders the queued work differently per case, and the race
//! oracle watches every access. Invariants: every value read back equals the
//! sequential reference; the oracle reports no race, no use-after-free, no
//! double free; nothing leaks once everything is dropped.
//!
//! On a GPU (the bundle, `GPU_SYNC_DRIVER=cuda`) the same generator runs
//! fewer cases against the real driver: the differential test.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sync_tests::program::{self, RunError};
use sync_tests::{ctx, fmt_races, on_sim};

/// Cases per run: `PROGRAM_CASES` if set, else 64 on the simulator and 24 on
/// a GPU.
fn cases() -> u32 {
    std::env::var("PROGRAM_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(if on_sim() { 64 } else { 24 })
}

#[test]
fn random_programs_match_the_sequential_reference_with_no_race_and_no_leak() {
    let mut runner =
        TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() });
    let strategy = (any::<u64>(), program::program(40));
    let result = runner.run(&strategy, |(seed, ops)| {
        let t = ctx(seed);
        let r = program::run(&t.device, &ops);
        if let Err(e) = r {
            return Err(TestCaseError::fail(match e {
                RunError::Api { op, error } => {
                    format!("op {op} ({:?}) failed: {error}", ops[op.min(ops.len() - 1)])
                }
                RunError::Mismatch(m) => m,
            }));
        }
        if let Some(s) = &t.session {
            let races = s.races();
            prop_assert!(races.is_empty(), "the race oracle reported:\n{}", fmt_races(&races));
            let live = s.live();
            prop_assert!(live.is_empty(), "leaked: {live:?}");
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// A proof of a wider scope covers every point a narrower one taken before
/// it covers: event ≤ stream ≤ device. And each covers exactly what it
/// should: a stream proof nothing of another stream, a device proof all
/// work submitted before it.
#[test]
fn a_wider_wait_covers_everything_a_narrower_one_covers() {
    use gpu_sync::{DeviceBuffer, HostAllocFlags, PinnedBuffer, Proof, Stream, SyncEvent};
    let mut runner =
        TestRunner::new(Config { cases: cases().min(32), failure_persistence: None, ..Config::default() });
    let strategy = (any::<u64>(), prop::collection::vec((0usize..3, any::<u32>()), 1..12));
    let result = runner.run(&strategy, |(seed, work)| {
        let t = ctx(seed);
        let k = kernels::Kernels::load(&t.device).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let streams: Vec<Stream> = (0..3).map(|_| Stream::new(&t.device).expect("stream")).collect();
        let mut points = Vec::new();
        let mut pendings = Vec::new();
        for (si, seed) in work {
            let s = &streams[si];
            let mut b = DeviceBuffer::<u32>::alloc(s, 64).expect("alloc");
            k.fill_pattern(s, &mut b, seed).expect("fill");
            let p = s
                .download(&b, PinnedBuffer::new(&t.device, 64, HostAllocFlags::empty()).expect("pinned"))
                .expect("download");
            points.push((si, p.work()));
            pendings.push(p);
        }
        // Narrow to wide: an event per stream, then the streams, then the device.
        let events: Vec<_> = streams
            .iter()
            .map(|s| {
                let e = SyncEvent::new(&t.device).expect("event");
                e.record(s).expect("record");
                e.synchronize().expect("event sync")
            })
            .collect();
        let stream_proofs: Vec<_> = streams.iter().map(|s| s.synchronize().expect("stream sync")).collect();
        let device = t.device.synchronize().expect("device sync");
        for (si, w) in &points {
            for (sj, (ev, sp)) in events.iter().zip(&stream_proofs).enumerate() {
                prop_assert_eq!(
                    ev.covers(w),
                    sj == *si,
                    "event proof of stream {} vs work of stream {}",
                    sj,
                    si
                );
                prop_assert_eq!(
                    sp.covers(w),
                    sj == *si,
                    "stream proof of stream {} vs work of stream {}",
                    sj,
                    si
                );
                if ev.covers(w) {
                    prop_assert!(sp.covers(w), "a stream proof missed what an earlier event proof covered");
                }
            }
            prop_assert!(device.covers(w), "the device proof missed work submitted before it");
        }
        for p in pendings {
            p.redeem(&device).map_err(|nc| TestCaseError::fail(nc.to_string()))?;
        }
        drop((k, streams));
        if let Some(s) = &t.session {
            prop_assert!(s.races().is_empty(), "{}", fmt_races(&s.races()));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
