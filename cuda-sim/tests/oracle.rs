//! The race oracle: planted bugs are found, correct programs are clean.

mod common;
use common::*;
use cuda_sim::{Actor, RaceKind, RaceReport};

const NB: u32 = CUstream_flags::CU_STREAM_NON_BLOCKING.0;

fn kinds(r: &[RaceReport]) -> Vec<RaceKind> {
    r.iter().map(|x| x.kind).collect()
}

/// Stream A writes a buffer, stream B reads it, with or without a wait.
fn two_streams(seed: u64, wait: bool) -> Vec<RaceReport> {
    let e = env(seed);
    let (a, b) = (e.stream(NB), e.stream(NB));
    let ev = e.event(CUevent_flags::CU_EVENT_DISABLE_TIMING.0);
    let (x, y) = (e.alloc(64), e.alloc(64));
    e.fill(&b, y, 0, 16);
    stream::synchronize(&b).unwrap();
    e.fill(&a, x, 1, 16);
    if wait {
        event::record(&ev, &a).unwrap();
        stream::wait_event(&b, &ev, 0).unwrap();
    }
    e.add(&b, x, y, 16);
    context::synchronize(d()).unwrap();
    let races = e.session.take_races();
    sim::free(x).unwrap();
    sim::free(y).unwrap();
    event::destroy(ev).unwrap();
    stream::destroy(a).unwrap();
    stream::destroy(b).unwrap();
    teardown(e);
    races
}

#[test]
fn a_missing_wait_between_two_streams_is_a_race() {
    let _serial = serial();
    for seed in 0..4 {
        let races = two_streams(30 + seed, false);
        assert_eq!(kinds(&races), vec![RaceKind::DataRace], "{races:?}");
        let r = &races[0];
        let mut ops = [r.first.op.as_str(), r.second.op.as_str()];
        ops.sort_unstable();
        assert_eq!(ops, ["kernel sim_add_u32 param 0 (read)", "kernel sim_fill_u32 param 0 (write)"]);
        assert!(matches!(r.first.actor, Actor::Stream(_)) && matches!(r.second.actor, Actor::Stream(_)));
        assert_ne!(r.first.actor, r.second.actor);
        assert_eq!(r.first.len, 64);
        assert_eq!(r.allocation, r.first.addr);
        let text = r.to_string();
        assert!(text.starts_with("data race on allocation"), "{text}");
        assert!(text.contains("(no event wait or host synchronization orders them)"), "{text}");
    }
}

#[test]
fn the_same_program_with_a_wait_is_clean() {
    let _serial = serial();
    for seed in 0..4 {
        let races = two_streams(40 + seed, true);
        assert!(races.is_empty(), "{races:?}");
    }
}

/// B reads a stream-ordered allocation of A; A frees it, with or without
/// waiting for B.
fn early_free(seed: u64, wait: bool) -> (Vec<RaceReport>, CUresult) {
    let e = env(seed);
    let (a, b) = (e.stream(NB), e.stream(NB));
    let (ready, done) = (e.event(0), e.event(0));
    let x = memory::alloc_async(64, &a).unwrap();
    let y = e.alloc(64);
    e.fill(&a, x, 1, 16);
    e.fill(&b, y, 0, 16);
    event::record(&ready, &a).unwrap();
    stream::wait_event(&b, &ready, 0).unwrap();
    e.add(&b, x, y, 16);
    if wait {
        event::record(&done, &b).unwrap();
        stream::wait_event(&a, &done, 0).unwrap();
    }
    sim::free_async(x, &a).unwrap();
    let sync = code(context::synchronize(d()));
    let races = e.session.take_races();
    if sync == OK {
        sim::free(y).unwrap();
        event::destroy(ready).unwrap();
        event::destroy(done).unwrap();
        stream::destroy(a).unwrap();
        stream::destroy(b).unwrap();
        teardown(e);
    }
    (races, sync)
}

#[test]
fn an_early_stream_ordered_free_is_reported() {
    let _serial = serial();
    for seed in 0..6 {
        let (races, sync) = early_free(50 + seed, false);
        assert_eq!(kinds(&races), vec![RaceKind::UnorderedFree], "{races:?}");
        let r = &races[0];
        assert!([&r.first.op, &r.second.op].iter().any(|o| *o == "cuMemFreeAsync"), "{r}");
        assert!([&r.first.op, &r.second.op].iter().any(|o| o.contains("sim_add_u32 param 0")), "{r}");
        // Whichever ran first, nothing faults: freed memory is reported,
        // not an illegal address.
        assert_eq!(sync, OK);
    }
    let (races, sync) = early_free(60, true);
    assert!(races.is_empty(), "{races:?}");
    assert_eq!(sync, OK);
}

#[test]
fn reading_a_pinned_d2h_destination_before_synchronizing_is_a_race() {
    let _serial = serial();
    for synced in [false, true] {
        let e = env(70);
        let s = e.stream(NB);
        let x = e.alloc(64);
        e.fill(&s, x, 4, 16);
        let host = e.pinned(64, 0);
        sim::dtoh(host, x, 64, &s).unwrap();
        if synced {
            stream::synchronize(&s).unwrap();
        }
        cuda_sim::host_read(host, 64);
        stream::synchronize(&s).unwrap();
        let races = e.session.take_races();
        if synced {
            assert!(races.is_empty(), "{races:?}");
        } else {
            assert_eq!(kinds(&races), vec![RaceKind::DataRace], "{races:?}");
            let r = &races[0];
            assert_eq!(r.second.actor, Actor::Host);
            assert_eq!(r.second.op, "host_read");
            assert_eq!(r.first.op, "cuMemcpyDtoHAsync destination");
        }
        // A host write before the H2D reading it is synchronized, likewise.
        sim::htod(x, host, 64, &s).unwrap();
        cuda_sim::host_write(host, 4);
        stream::synchronize(&s).unwrap();
        assert_eq!(kinds(&e.session.take_races()), vec![RaceKind::DataRace]);
        sim::free_host(host).unwrap();
        sim::free(x).unwrap();
        stream::destroy(s).unwrap();
        teardown(e);
    }
}

#[test]
fn use_after_free_is_reported_and_does_not_fault() {
    let _serial = serial();
    let e = env(80);
    let s = e.stream(NB);
    let x = memory::alloc_async(64, &s).unwrap();
    sim::free_async(x, &s).unwrap();
    stream::synchronize(&s).unwrap();
    e.fill(&s, x, 1, 16);
    assert_eq!(code(stream::synchronize(&s)), OK);
    let races = e.session.take_races();
    assert_eq!(kinds(&races), vec![RaceKind::UseAfterFree], "{races:?}");
    assert_eq!(races[0].first.op, "cuMemFreeAsync");
    assert!(races[0].to_string().starts_with("use after free"));
    stream::destroy(s).unwrap();
    teardown(e);
}

#[test]
fn double_frees_are_reported_and_refused() {
    let _serial = serial();
    let e = env(81);
    let s = e.stream(NB);
    let x = memory::alloc_async(64, &s).unwrap();
    sim::free_async(x, &s).unwrap();
    assert_eq!(code(sim::free_async(x, &s)), CUresult::CUDA_ERROR_INVALID_VALUE);
    stream::synchronize(&s).unwrap();
    assert_eq!(code(sim::free(x)), CUresult::CUDA_ERROR_INVALID_VALUE);
    let y = e.alloc(16);
    sim::free(y).unwrap();
    assert_eq!(code(sim::free(y)), CUresult::CUDA_ERROR_INVALID_VALUE);
    let h = e.pinned(16, 0);
    sim::free_host(h).unwrap();
    assert_eq!(code(sim::free_host(h)), CUresult::CUDA_ERROR_INVALID_VALUE);
    let races = e.session.take_races();
    assert_eq!(kinds(&races), vec![RaceKind::DoubleFree; 4], "{races:?}");
    stream::destroy(s).unwrap();
    teardown(e);
}

#[test]
fn a_stream_ordered_allocation_used_on_another_stream_without_a_wait_races() {
    let _serial = serial();
    let e = env(82);
    let (a, b) = (e.stream(NB), e.stream(NB));
    let x = memory::alloc_async(64, &a).unwrap();
    e.fill(&b, x, 1, 16);
    context::synchronize(d()).unwrap();
    let races = e.session.take_races();
    assert_eq!(kinds(&races), vec![RaceKind::DataRace], "{races:?}");
    assert!([&races[0].first.op, &races[0].second.op].iter().any(|o| *o == "cuMemAllocAsync"));
    sim::free_async(x, &b).unwrap();
    context::synchronize(d()).unwrap();
    assert!(e.session.take_races().is_empty());
    stream::destroy(a).unwrap();
    stream::destroy(b).unwrap();
    teardown(e);
}

#[test]
fn freeing_pinned_memory_with_a_copy_in_flight_is_reported() {
    let _serial = serial();
    let e = env(83);
    let s = e.stream(NB);
    let x = e.alloc(64);
    let host = e.pinned(64, 0);
    sim::htod(x, host, 64, &s).unwrap();
    sim::free_host(host).unwrap();
    let races = e.session.take_races();
    assert_eq!(kinds(&races), vec![RaceKind::UnorderedFree], "{races:?}");
    assert_eq!(races[0].second.op, "cuMemFreeHost");
    // The implicit synchronization of cuMemFreeHost let the copy finish.
    assert_eq!(e.session.pending(), 0);
    sim::free(x).unwrap();
    stream::destroy(s).unwrap();
    teardown(e);
}
