//! The race oracle is neither vacuous nor noisy, and obeys its model laws.
//!
//! Planted bugs: the program generator of `prop_programs`, with one
//! synchronization removed through the raw driver at a random point — a
//! missing wait, an early free, a host read of an unwaited pinned buffer.
//! Each must be flagged in every case, and its correctly synchronized twin
//! never. Model laws (vector clocks, PyTorch CSAN's rules): same-stream work
//! never races; waiting twice equals waiting once; re-recording an event
//! supersedes its earlier point; waiting on a never-recorded event orders
//! nothing; happens-before is transitive; a stream's clock never goes back.
//! Simulator only: on a GPU these tests return at once. They run one at a
//! time ([`sync_tests::exclusive`]): a device synchronization in a test
//! beside them would order the accesses they expect flagged.

use cuda_sim::RaceKind;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sync_tests::program::{self, Plant, PlantKind};
use sync_tests::raw::Raw;
use sync_tests::{ctx, fmt_races, on_sim};

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

fn planted(kind: PlantKind, expect: &[RaceKind]) {
    if !on_sim() {
        return;
    }
    let _one_at_a_time = sync_tests::exclusive();
    let strategy = (any::<u64>(), program::program(24), any::<usize>());
    let r = runner(24).run(&strategy, |(seed, ops, at)| {
        for correct in [true, false] {
            let t = ctx(seed);
            let p = Plant { at, kind, correct };
            let r = program::run_planted(&t.device, &ops, Some(p));
            // The buggy twin may fault (a lost context), as on a GPU; the
            // correct one must run through.
            if correct && let Err(e) = r {
                return Err(TestCaseError::fail(format!("{p:?}: the program failed: {e:?}")));
            }
            let races = t.session.as_ref().map(|s| s.races()).unwrap_or_default();
            if correct {
                prop_assert!(
                    races.is_empty(),
                    "{p:?} with its synchronization was flagged:\n{}",
                    fmt_races(&races)
                );
            } else {
                prop_assert!(
                    races.iter().any(|r| expect.contains(&r.kind)),
                    "{p:?} without its synchronization was not flagged as {expect:?}; reports:\n{}",
                    fmt_races(&races)
                );
            }
        }
        Ok(())
    });
    if let Err(e) = r {
        panic!("{e}");
    }
}

#[test]
fn a_missing_wait_is_flagged_every_time() {
    planted(PlantKind::MissingWait, &[RaceKind::DataRace]);
}

#[test]
fn an_early_free_is_flagged_every_time() {
    planted(PlantKind::EarlyFree, &[RaceKind::UnorderedFree]);
}

#[test]
fn a_host_read_of_an_unwaited_pinned_buffer_is_flagged_every_time() {
    planted(PlantKind::UnwaitedHostRead, &[RaceKind::DataRace]);
}

/// Raw scenario helpers over device 0 in a fresh session.
struct Lab {
    t: sync_tests::Ctx,
    raw: Raw,
    words: usize,
    _guard: std::sync::MutexGuard<'static, ()>,
}

impl Lab {
    fn new(seed: u64) -> Option<Lab> {
        if !on_sim() {
            return None;
        }
        // Expected races must not be ordered by another test's device sync.
        let guard = sync_tests::exclusive();
        let t = ctx(seed);
        if let Err(e) = t.device.make_current() {
            panic!("make_current: {e}");
        }
        Some(Lab { t, raw: Raw::new(), words: 64, _guard: guard })
    }
    fn races(&self) -> Vec<cuda_sim::RaceReport> {
        self.t.session.as_ref().map(|s| s.races()).unwrap_or_default()
    }
    fn bytes(&self) -> usize {
        self.words * 4
    }
}

#[test]
fn same_stream_work_never_races() {
    if !on_sim() {
        return;
    }
    let r = runner(32).run(
        &(any::<u64>(), prop::collection::vec((0u8..3, 0u8..4, 0u8..4), 1..40)),
        |(seed, steps)| {
            let lab = Lab::new(seed).expect("sim");
            let s = lab.raw.stream();
            let bufs: Vec<_> = (0..4).map(|_| lab.raw.alloc(lab.bytes(), s)).collect();
            for (kind, a, b) in steps {
                let (a, b) = (bufs[a as usize], bufs[b as usize]);
                match kind {
                    0 => lab.raw.memset(a, 1, lab.words, s),
                    1 if a != b => lab.raw.copy(a, b, lab.bytes(), s),
                    _ => lab.raw.memset(b, 2, lab.words, s),
                }
            }
            for p in bufs {
                lab.raw.free(p, s);
            }
            lab.raw.sync(s);
            lab.raw.destroy_stream(s);
            let races = lab.races();
            prop_assert!(races.is_empty(), "{}", fmt_races(&races));
            Ok(())
        },
    );
    if let Err(e) = r {
        panic!("{e}");
    }
}

/// x written on A; B waits `waits` times on an event recorded after the
/// write; B reads x. Returns the reports.
fn handoff(seed: u64, waits: usize, rerecord_elsewhere: bool, record: bool) -> Vec<cuda_sim::RaceReport> {
    let lab = Lab::new(seed).expect("sim");
    let (a, b, c) = (lab.raw.stream(), lab.raw.stream(), lab.raw.stream());
    let x = lab.raw.alloc(lab.bytes(), a);
    let y = lab.raw.alloc(lab.bytes(), b);
    lab.raw.memset(x, 9, lab.words, a);
    let e = lab.raw.event();
    if record {
        lab.raw.record(e, a);
    }
    if rerecord_elsewhere {
        lab.raw.record(e, c);
    }
    for _ in 0..waits {
        lab.raw.wait(b, e);
    }
    lab.raw.copy(y, x, lab.bytes(), b);
    for s in [a, b, c] {
        lab.raw.sync(s);
    }
    lab.raw.free(x, a);
    lab.raw.free(y, b);
    lab.raw.sync(a);
    lab.raw.sync(b);
    let races = lab.races();
    for s in [a, b, c] {
        lab.raw.destroy_stream(s);
    }
    lab.raw.destroy_event(e);
    races
}

#[test]
fn waiting_twice_equals_waiting_once_and_no_wait_races() {
    if !on_sim() {
        return;
    }
    for seed in 0..8 {
        let once = handoff(seed, 1, false, true);
        let twice = handoff(seed, 2, false, true);
        assert!(once.is_empty(), "one wait: {}", fmt_races(&once));
        assert_eq!(once, twice, "waiting twice differs from waiting once");
        let none = handoff(seed, 0, false, true);
        assert!(none.iter().any(|r| r.kind == RaceKind::DataRace), "no wait was not flagged");
    }
}

#[test]
fn re_recording_an_event_supersedes_its_earlier_point() {
    if !on_sim() {
        return;
    }
    for seed in 0..8 {
        let races = handoff(seed, 1, true, true);
        assert!(
            races.iter().any(|r| r.kind == RaceKind::DataRace),
            "a wait on an event re-recorded on another stream still ordered the first record's work"
        );
    }
}

#[test]
fn waiting_on_a_never_recorded_event_orders_nothing() {
    if !on_sim() {
        return;
    }
    for seed in 0..8 {
        let races = handoff(seed, 1, false, false);
        assert!(races.iter().any(|r| r.kind == RaceKind::DataRace), "a never-recorded event ordered work");
    }
}

#[test]
fn happens_before_is_transitive_through_chains_of_streams() {
    if !on_sim() {
        return;
    }
    let r = runner(32).run(&(any::<u64>(), 2usize..6), |(seed, len)| {
        let lab = Lab::new(seed).expect("sim");
        let streams: Vec<_> = (0..len).map(|_| lab.raw.stream()).collect();
        let x = lab.raw.alloc(lab.bytes(), streams[0]);
        lab.raw.memset(x, 5, lab.words, streams[0]);
        let mut events = Vec::new();
        for w in streams.windows(2) {
            let e = lab.raw.event();
            lab.raw.record(e, w[0]);
            lab.raw.wait(w[1], e);
            events.push(e);
        }
        let last = streams[len - 1];
        let y = lab.raw.alloc(lab.bytes(), last);
        lab.raw.copy(y, x, lab.bytes(), last);
        lab.raw.sync(last);
        lab.raw.free(x, last);
        lab.raw.free(y, last);
        lab.raw.sync(last);
        let races = lab.races();
        for s in streams {
            lab.raw.destroy_stream(s);
        }
        for e in events {
            lab.raw.destroy_event(e);
        }
        prop_assert!(races.is_empty(), "a chain of {len} streams did not order: {}", fmt_races(&races));
        Ok(())
    });
    if let Err(e) = r {
        panic!("{e}");
    }
}

#[test]
fn a_streams_clock_never_goes_back() {
    if !on_sim() {
        return;
    }
    for seed in 0..8 {
        let lab = Lab::new(seed).expect("sim");
        let (a, b) = (lab.raw.stream(), lab.raw.stream());
        let x = lab.raw.alloc(lab.bytes(), a);
        let y = lab.raw.alloc(lab.bytes(), b);
        let (old, new) = (lab.raw.event(), lab.raw.event());
        lab.raw.record(old, a); // before the write
        lab.raw.memset(x, 3, lab.words, a);
        lab.raw.record(new, a); // after it
        lab.raw.wait(b, new);
        lab.raw.wait(b, old); // an older point must not undo the newer one
        lab.raw.copy(y, x, lab.bytes(), b);
        lab.raw.sync(a);
        lab.raw.sync(b);
        lab.raw.free(x, b);
        lab.raw.free(y, b);
        lab.raw.sync(b);
        let races = lab.races();
        assert!(races.is_empty(), "waiting on an older event undid a newer wait: {}", fmt_races(&races));
        for s in [a, b] {
            lab.raw.destroy_stream(s);
        }
        lab.raw.destroy_event(old);
        lab.raw.destroy_event(new);
    }
}
