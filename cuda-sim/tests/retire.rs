//! Streams, events and allocations that come and go leave nothing behind:
//! after thousands of short-lived ones the simulator holds what it held
//! before, and a new operation copies a clock as short as before (its cost
//! does not depend on how many streams ever existed) — while the oracle
//! still finds a race with the work of a stream destroyed since.

mod common;
use common::*;
use cuda_sim::{Footprint, RaceKind, Session};

const NB: u32 = CUstream_flags::CU_STREAM_NON_BLOCKING.0;
/// Short-lived streams per test (the figure).
const STREAMS: usize = 5_000;

/// `cuMemsetD32Async` of `n` words.
fn memset(x: CUdeviceptr, v: u32, n: usize, s: &OwnedStream) {
    sim::memset32(x, v, n, s).expect("cuMemsetD32Async");
}

/// Asserts that `after` holds no more than `before` plus `slack` clock
/// entries, and the same streams, events and live allocations.
#[track_caller]
fn assert_flat(before: Footprint, after: Footprint, slack: usize) {
    assert_eq!(after.streams, before.streams, "streams: {before:?} -> {after:?}");
    assert_eq!(after.events, before.events, "events: {before:?} -> {after:?}");
    assert_eq!(after.allocations, before.allocations, "allocations: {before:?} -> {after:?}");
    assert_eq!(after.retiring, 0, "{after:?}");
    assert!(after.host_clock <= before.host_clock + slack, "host clock: {before:?} -> {after:?}");
    assert!(
        after.longest_stream_clock <= before.longest_stream_clock + slack,
        "stream clocks: {before:?} -> {after:?}"
    );
    assert!(after.access_records <= before.access_records + slack, "histories: {before:?} -> {after:?}");
}

#[test]
fn five_thousand_short_lived_streams_events_and_buffers_leave_nothing_behind() {
    let _serial = serial();
    let e = env(27);
    let keep = e.stream(NB);
    let x = e.alloc(4096);
    memset(x, 0, 1024, &keep);
    stream::synchronize(&keep).expect("sync");
    let before = e.session.footprint();
    for i in 0..STREAMS {
        // A stream, an event and a buffer, each used once and destroyed:
        // the stream waits for `keep`'s work, and `keep` for the stream's;
        // half the streams are observed by the host before they are
        // destroyed, half only through `keep`.
        let s = e.stream(NB);
        let ev = e.event(CUevent_flags::CU_EVENT_DISABLE_TIMING.0);
        let y = e.alloc(256);
        event::record(&ev, &keep).expect("record on keep");
        stream::wait_event(&s, &ev, 0).expect("s waits for keep's work");
        memset(y, i as u32, 64, &s);
        sim::dtod(x + (i % 16) as u64 * 256, y, 256, &s).expect("copy");
        event::record(&ev, &s).expect("record");
        stream::wait_event(&keep, &ev, 0).expect("keep waits");
        if i % 2 == 0 {
            stream::synchronize(&s).expect("sync s");
            stream::destroy(s).expect("destroy");
        } else {
            stream::destroy(s).expect("destroy");
            stream::synchronize(&keep).expect("sync keep");
        }
        sim::free_async(y, &keep).expect("free y after everything that used it");
        event::destroy(ev).expect("destroy event");
        memset(x, 1, 1024, &keep);
        if i % 64 == 0 {
            stream::synchronize(&keep).expect("sync");
        }
    }
    stream::synchronize(&keep).expect("sync");
    let after = e.session.footprint();
    assert_flat(before, after, 2);
    assert!(after.quarantined <= 1 << 14, "the quarantine is bounded: {after:?}");
    assert!(e.session.races().is_empty(), "{:#?}", e.session.races());
    sim::free(x).expect("free x");
    stream::destroy(keep).expect("destroy keep");
    teardown(e);
}

#[test]
fn an_operation_after_5000_dead_streams_stamps_a_clock_as_short_as_before() {
    // Every dead stream was seen by `keep` (an event wait) before the host
    // observed it: `keep`'s clock names it until the host's retirement
    // reaches `keep` at its next operation, which must drop it again.
    let _serial = serial();
    let e = env(28);
    let keep = e.stream(NB);
    let x = e.alloc(1024);
    memset(x, 0, 256, &keep);
    stream::synchronize(&keep).expect("sync");
    let first = e.session.footprint();
    for i in 0..STREAMS {
        let s = e.stream(NB);
        let ev = e.event(CUevent_flags::CU_EVENT_DISABLE_TIMING.0);
        memset(x, i as u32, 256, &s);
        event::record(&ev, &s).expect("record");
        stream::wait_event(&keep, &ev, 0).expect("keep waits");
        event::destroy(ev).expect("destroy event");
        stream::destroy(s).expect("destroy");
        memset(x, 7, 256, &keep);
        stream::synchronize(&keep).expect("sync");
    }
    let late = e.session.footprint();
    assert_flat(first, late, 2);
    // A stream created now starts as short as the first one did.
    let fresh = e.stream(NB);
    memset(x, 9, 256, &fresh);
    stream::synchronize(&fresh).expect("sync");
    assert!(e.session.footprint().longest_stream_clock <= first.longest_stream_clock + 2);
    assert!(e.session.races().is_empty(), "{:#?}", e.session.races());
    stream::destroy(fresh).expect("destroy");
    sim::free(x).expect("free x");
    stream::destroy(keep).expect("destroy keep");
    teardown(e);
}

/// Stream B reads `x` (queued first), stream A writes it, A records an
/// event and is destroyed, the host waits for the event (A drains and is
/// retired), then B is synchronized. With `ordered`, B's read waits for A's
/// write through a second event. Returns the reports and whether B's read
/// was still queued when A was retired (the oracle then judged it against
/// a retired stream's write).
fn read_beside_a_destroyed_writer(seed: u64, ordered: bool) -> (Vec<cuda_sim::RaceReport>, bool) {
    let e = env(seed);
    let (a, b) = (e.stream(NB), e.stream(NB));
    let (x, y) = (e.alloc(256), e.alloc(256));
    let (done, order) = (e.event(0), e.event(0));
    memset(x, 0, 64, &a);
    memset(y, 0, 64, &b);
    stream::synchronize(&a).expect("sync a");
    stream::synchronize(&b).expect("sync b");
    if ordered {
        memset(x, 1, 64, &a);
        event::record(&order, &a).expect("record");
        stream::wait_event(&b, &order, 0).expect("b waits for a's write");
        sim::dtod(y, x, 256, &b).expect("b reads x");
    } else {
        sim::dtod(y, x, 256, &b).expect("b reads x");
        memset(x, 1, 64, &a);
    }
    event::record(&done, &a).expect("record");
    stream::destroy(a).expect("destroy a, its write still queued");
    event::synchronize(&done).expect("host waits for a");
    let f = e.session.footprint();
    let judged_late = f.retiring == 0 && e.session.pending() > 0;
    stream::synchronize(&b).expect("sync b");
    let races = e.session.take_races();
    for ev in [done, order] {
        event::destroy(ev).expect("destroy event");
    }
    stream::destroy(b).expect("destroy b");
    sim::free(x).expect("free");
    sim::free(y).expect("free");
    teardown(e);
    (races, judged_late)
}

#[test]
fn a_race_with_a_destroyed_and_retired_stream_is_still_reported() {
    let _serial = serial();
    let mut late = 0;
    for seed in 0..32 {
        let (races, judged_late) = read_beside_a_destroyed_writer(seed, false);
        assert_eq!(races.len(), 1, "seed {seed}: {races:#?}");
        assert_eq!(races[0].kind, RaceKind::DataRace, "seed {seed}");
        late += usize::from(judged_late);
        let (races, _) = read_beside_a_destroyed_writer(seed, true);
        assert!(races.is_empty(), "seed {seed}, ordered: {races:#?}");
    }
    assert!(late > 0, "no seed ran B's read after A was retired: the retired path went untested");
}

#[test]
fn a_context_synchronization_observes_a_destroyed_stream_that_drained_unobserved() {
    // A writes x and is destroyed; its write runs while the host queries an
    // idle stream (so the host never observes A). `cuCtxSynchronize` then
    // orders all of it: B's later write of x is not a race.
    let _serial = serial();
    let e = env(29);
    let (a, b) = (e.stream(NB), e.stream(NB));
    let x = e.alloc(256);
    memset(x, 1, 64, &a);
    stream::destroy(a).expect("destroy a");
    for _ in 0..1000 {
        if e.session.pending() == 0 {
            break;
        }
        assert!(stream::query(&b).expect("query"), "b is idle");
    }
    assert_eq!(e.session.pending(), 0, "a's write ran");
    assert_eq!(e.session.footprint().retiring, 1, "the host has not observed a");
    context::synchronize(d()).expect("cuCtxSynchronize");
    assert_eq!(e.session.footprint().retiring, 0, "the context synchronization observed a");
    memset(x, 2, 64, &b);
    stream::synchronize(&b).expect("sync b");
    assert!(e.session.races().is_empty(), "{:#?}", e.session.races());
    stream::destroy(b).expect("destroy b");
    sim::free(x).expect("free");
    teardown(e);
}

#[test]
fn a_session_that_ends_frees_its_state() {
    let _serial = serial();
    let before = {
        let probe = Session::new(1);
        probe.footprint().all_streams
    };
    {
        let e = env(30);
        for _ in 0..100 {
            let s = e.stream(NB);
            let x = e.alloc(64);
            memset(x, 3, 16, &s);
            stream::synchronize(&s).expect("sync");
            stream::destroy(s).expect("destroy");
            sim::free(x).expect("free");
        }
        teardown(e);
    }
    let probe = Session::new(2);
    assert_eq!(probe.footprint().all_streams, before, "no stream of an ended session stays");
}

/// Runs queued work by querying the idle stream `idle` (which observes
/// nothing else) until none is left.
fn drain_unobserved(e: &Env, idle: &OwnedStream) {
    for _ in 0..100_000 {
        if e.session.pending() == 0 {
            return;
        }
        assert!(stream::query(idle).expect("query"), "the idle stream is idle");
    }
    panic!("{} operations still queued", e.session.pending());
}

#[test]
fn five_thousand_streams_ending_in_a_free_nobody_waits_for_leave_nothing_behind() {
    // Each stream writes a buffer the host then reads (so the host saw part
    // of the stream), frees it stream-ordered, and is destroyed: its last
    // operation, the free, is observed by no host. A clock of every such
    // stream would keep the state growing with the streams ever made.
    let _serial = serial();
    let e = env(31);
    let (keep, idle) = (e.stream(NB), e.stream(NB));
    let x = e.alloc(1024);
    memset(x, 0, 256, &keep);
    stream::synchronize(&keep).expect("sync");
    let before = e.session.footprint();
    for i in 0..STREAMS {
        let s = e.stream(NB);
        let y = e.alloc(256);
        memset(y, i as u32, 64, &s);
        if i % 2 == 0 {
            stream::synchronize(&s).expect("the host sees the write, not the free");
        }
        sim::free_async(y, &s).expect("free y on s");
        stream::destroy(s).expect("destroy");
        memset(x, i as u32, 256, &keep);
        if i % 64 == 0 {
            stream::synchronize(&keep).expect("sync keep");
            drain_unobserved(&e, &idle);
        }
    }
    stream::synchronize(&keep).expect("sync keep");
    drain_unobserved(&e, &idle);
    // `keep`'s next operation drops what the last streams' retirement
    // covers (its clock still names the last stream the host saw).
    memset(x, 7, 256, &keep);
    stream::synchronize(&keep).expect("sync keep");
    let after = e.session.footprint();
    assert_eq!(after.streams, before.streams, "{before:?} -> {after:?}");
    assert_eq!(after.allocations, before.allocations, "{before:?} -> {after:?}");
    assert!(after.host_clock <= before.host_clock + 2, "host clock: {before:?} -> {after:?}");
    assert!(after.longest_stream_clock <= before.longest_stream_clock + 2, "{before:?} -> {after:?}");
    assert!(after.drained_clock <= 4, "one drained clock, not one per stream: {after:?}");
    assert!(after.retired_index <= 2 * 1024, "the index is swept: {after:?}");
    assert!(after.quarantined <= 1 << 14, "the quarantine is bounded: {after:?}");
    assert_eq!(after.retiring, STREAMS, "no host saw a free: {after:?}");
    context::synchronize(d()).expect("cuCtxSynchronize");
    assert_eq!(e.session.footprint().retiring, 0, "the context synchronization observed them all");
    assert!(e.session.races().is_empty(), "{:#?}", e.session.races());
    sim::free(x).expect("free x");
    stream::destroy(keep).expect("destroy keep");
    stream::destroy(idle).expect("destroy idle");
    teardown(e);
}

/// Stream A writes `x` and frees `y`, the host having seen only A's first
/// write of `x`; A is destroyed and drains unobserved. Then stream B writes
/// `x` and `y`: after nothing (both unordered with A's last operations), or
/// after an event A recorded last, or after a context synchronization.
fn write_after_an_unobserved_free(seed: u64, order: &str) -> Vec<cuda_sim::RaceReport> {
    let e = env(seed);
    let (a, b, idle) = (e.stream(NB), e.stream(NB), e.stream(NB));
    let (x, y) = (e.alloc(256), e.alloc(256));
    let done = e.event(0);
    memset(x, 1, 64, &a);
    memset(y, 1, 64, &a);
    stream::synchronize(&a).expect("the host sees a's first writes");
    memset(x, 2, 64, &a);
    sim::free_async(y, &a).expect("free y on a");
    event::record(&done, &a).expect("record");
    stream::destroy(a).expect("destroy a");
    drain_unobserved(&e, &idle);
    match order {
        "event" => stream::wait_event(&b, &done, 0).expect("b waits for a's end"),
        "context" => context::synchronize(d()).expect("cuCtxSynchronize"),
        _ => {}
    }
    memset(x, 3, 64, &b);
    memset(y, 3, 64, &b);
    stream::synchronize(&b).expect("sync b");
    let races = e.session.take_races();
    event::destroy(done).expect("destroy event");
    stream::destroy(b).expect("destroy b");
    stream::destroy(idle).expect("destroy idle");
    sim::free(x).expect("free x");
    teardown(e);
    races
}

#[test]
fn an_access_unordered_with_a_destroyed_streams_unobserved_work_is_still_reported() {
    let _serial = serial();
    for seed in 0..8 {
        let races = write_after_an_unobserved_free(seed, "none");
        let kinds: Vec<RaceKind> = races.iter().map(|r| r.kind).collect();
        assert!(kinds.contains(&RaceKind::DataRace), "seed {seed}: b's write of x vs a's: {races:#?}");
        assert!(
            kinds.iter().any(|k| matches!(k, RaceKind::UnorderedFree)),
            "seed {seed}: b's write of y vs a's free: {races:#?}"
        );
        let races = write_after_an_unobserved_free(seed, "event");
        assert!(
            races.iter().all(|r| r.kind == RaceKind::UseAfterFree),
            "seed {seed}: ordered by the event: {races:#?}"
        );
        assert_eq!(races.len(), 1, "seed {seed}: only the use after free: {races:#?}");
        let races = write_after_an_unobserved_free(seed, "context");
        assert!(
            races.iter().all(|r| r.kind == RaceKind::UseAfterFree),
            "seed {seed}: ordered by the context: {races:#?}"
        );
        assert_eq!(races.len(), 1, "seed {seed}: only the use after free: {races:#?}");
    }
}
