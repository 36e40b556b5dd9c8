//! Random programs over several devices and streams (issue 29 item 3): the
//! generator and interpreter of `sync_tests::program_devices` — kernels on
//! a device's own buffers and, once peer access is on, a peer's; copies
//! between any two devices on a stream of any; uploads and downloads; one
//! `ForeignGroup` call over several streams; event and stream waits across
//! devices; host waits; drops; peer access enabled and disabled.
//!
//! Invariants: every value read back equals the sequential reference; an
//! operation touching memory its stream's device does not reach is refused
//! with `DeviceMismatch` naming both devices and changes nothing; on the
//! simulator the race oracle reports nothing and nothing leaks. Planted
//! cross-device bugs (through the raw driver) are flagged, their correct
//! twins are not; a driver failure injected on the new paths (a peer copy,
//! a wait on another device's marker, the peer-access grants, a group call)
//! is an error naming the call, after which nothing leaked, the oracle is
//! clean and the same program runs correctly again.
//!
//! Peer access is process-wide state (gpu-sync's, like the driver's): these
//! tests run one at a time ([`one_at_a_time`]) in their own binary, and each
//! case closes every pair it opened. On the simulator the machine has three
//! devices unless `CUDA_SIM_DEVICES` says otherwise, and each case runs over
//! two or three of them.

use cuda_sim::{FaultPlan, RaceKind, Session};
use cuda_sys::CUresult;
use gpu_sync::{Device, Error};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sync_tests::program::RunError;
use sync_tests::program_devices::{self as program, CrossPlant, Plant, Stats};
use sync_tests::{Ctx, fmt_races, on_sim};

/// Cases per run: `PROGRAM_CASES` if set, else `default` on the simulator
/// and half of it on a GPU.
fn cases(default: u32) -> u32 {
    std::env::var("PROGRAM_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(if on_sim() {
        default
    } else {
        default / 2
    })
}

/// The one lock every test of this binary takes: peer access is
/// process-wide, and a device synchronization beside a planted bug could
/// order the access it expects flagged.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Picks the driver and, on the simulator, a machine of three devices
/// unless `CUDA_SIM_DEVICES` is set (before the first `cuInit` of the
/// process: every test comes here first); then opens a session.
fn ctx(seed: u64) -> Ctx {
    static MACHINE: std::sync::Once = std::sync::Once::new();
    MACHINE.call_once(|| {
        if on_sim() && std::env::var_os(cuda_sim::DEVICES_ENV).is_none() {
            let config = cuda_sim::Config { devices: 3, ..cuda_sim::Config::default() };
            if let Err(e) = cuda_sim::configure(config) {
                panic!("a machine of three simulated devices: {e}");
            }
        }
    });
    sync_tests::ctx(seed)
}

/// Devices `0..n` for `n` in `2..=3` as the machine allows (`pick` chooses),
/// or `None` with fewer than two.
fn devices(pick: bool) -> Option<Vec<Device>> {
    let count = Device::count().expect("cuDeviceGetCount");
    if count < 2 {
        eprintln!("{count} device(s): programs over several devices need two");
        return None;
    }
    let n = if pick && count >= 3 { 3 } else { 2 };
    Some((0..n).map(|i| Device::get(i).expect("device")).collect())
}

fn describe(e: RunError, ops: &[program::Op]) -> String {
    match e {
        RunError::Api { op, error } => format!("op {op} ({:?}) failed: {error}", ops.get(op)),
        RunError::Mismatch(m) => m,
    }
}

fn total_live(s: &Session) -> usize {
    let l = s.live();
    l.device_allocations + l.pinned_allocations + l.streams + l.events + l.modules + l.graphs + l.graph_execs
}

#[test]
fn random_programs_over_several_devices_match_the_reference_with_no_race_and_no_leak() {
    let _one = one_at_a_time();
    let n = cases(128);
    let mut runner = TestRunner::new(Config { cases: n, failure_persistence: None, ..Config::default() });
    let strategy = (any::<u64>(), any::<bool>(), program::program(40));
    let total = std::cell::Cell::new(Stats::default());
    let result = runner.run(&strategy, |(seed, three, ops)| {
        let t = ctx(seed);
        let Some(devices) = devices(three) else { return Ok(()) };
        match program::run(&devices, &ops) {
            Ok(stats) => total.set({
                let mut t = total.get();
                t += stats;
                t
            }),
            Err(e) => {
                return Err(TestCaseError::fail(format!(
                    "over {} devices: {}",
                    devices.len(),
                    describe(e, &ops)
                )));
            }
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
    // Not vacuous: the programs reached every path this test is about
    // (each is common enough that a few dozen programs always do).
    let total = total.get();
    eprintln!("{n} programs exercised {total:?}");
    if n >= 64 && Device::count().is_ok_and(|c| c >= 2) {
        let Stats {
            refused,
            peer_uses,
            cross_copies,
            cross_waits,
            groups_across,
            peer_changes,
            peer_captures,
        } = total;
        assert!(
            [refused, peer_uses, cross_copies, cross_waits, groups_across, peer_changes, peer_captures]
                .iter()
                .all(|&c| c > 0),
            "a path went unexercised: {total:?}"
        );
    }
}

/// A cross-device bug planted in a random program is flagged every time,
/// its correctly synchronized twin never.
fn planted(kind: CrossPlant, expect: RaceKind) {
    let _one = one_at_a_time();
    if !on_sim() {
        return;
    }
    let mut runner =
        TestRunner::new(Config { cases: cases(24), failure_persistence: None, ..Config::default() });
    let strategy = (any::<u64>(), any::<bool>(), program::program(16), any::<usize>());
    let r = runner.run(&strategy, |(seed, three, ops, at)| {
        for correct in [true, false] {
            let t = ctx(seed);
            let Some(devices) = devices(three) else { return Ok(()) };
            // A buggy twin that faulted poisoned its session, where the
            // closing of its pairs could not wait for the device: close
            // them in this fresh session.
            program::close_peers(&devices).map_err(|e| TestCaseError::fail(format!("closing: {e}")))?;
            let p = Plant { at, kind, correct };
            let r = program::run_planted(&devices, &ops, Some(p));
            // The buggy twin may fault (a lost context), as on a GPU.
            if correct && let Err(e) = r {
                return Err(TestCaseError::fail(format!("{p:?}: the program failed: {}", describe(e, &ops))));
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
                    races.iter().any(|r| r.kind == expect),
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
fn a_missing_wait_across_devices_is_flagged_and_its_twin_is_not() {
    planted(CrossPlant::MissingWait, RaceKind::DataRace);
}

#[test]
fn an_early_free_across_devices_is_flagged_and_its_twin_is_not() {
    planted(CrossPlant::EarlyFree, RaceKind::UnorderedFree);
}

/// The driver calls of the paths issue 29 added: peer copies, waits (on
/// another device's marker among them), the peer-access grants and the
/// group call's memsets.
const NEW_PATHS: &[&str] = &[
    "cuMemcpyPeerAsync",
    "cuStreamWaitEvent",
    "cuEventRecord",
    "cuCtxEnablePeerAccess",
    "cuCtxDisablePeerAccess",
    "cuMemPoolSetAccess",
    "cuMemPoolGetAccess",
    "cuDeviceGetDefaultMemPool",
    "cuDeviceCanAccessPeer",
    "cuMemsetD32Async",
];

#[test]
fn failing_a_call_of_the_new_paths_is_an_error_naming_it_and_loses_nothing() {
    let _one = one_at_a_time();
    if !on_sim() {
        return;
    }
    sync_tests::logs::capture();
    let injected = CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    let mut runner =
        TestRunner::new(Config { cases: cases(12), failure_persistence: None, ..Config::default() });
    let r = runner.run(&(any::<u64>(), any::<bool>(), program::program(20)), |(seed, three, ops)| {
        // A clean run: the calls the program makes on the new paths.
        let calls: Vec<(usize, &str)> = {
            let t = ctx(seed);
            let Some(devices) = devices(three) else { return Ok(()) };
            let s = t.session.as_ref().expect("sim");
            let before = s.calls().len();
            if let Err(e) = program::run(&devices, &ops) {
                return Err(TestCaseError::fail(format!("the clean run failed: {}", describe(e, &ops))));
            }
            s.calls()[before..]
                .iter()
                .enumerate()
                .filter(|(_, c)| NEW_PATHS.contains(c))
                .map(|(n, &c)| (n, c))
                .collect()
        };
        // Fail the first call of each name, and an even sample of the rest.
        let step = (calls.len() / 12).max(1);
        let chosen = calls.iter().enumerate().filter(|&(j, &(n, name))| {
            j % step == 0 || calls.iter().find(|c| c.1 == name).is_some_and(|c| c.0 == n)
        });
        for (_, &(n, _)) in chosen {
            let t = ctx(seed);
            let Some(devices) = devices(three) else { return Ok(()) };
            let s = t.session.as_ref().expect("sim");
            let before = s.calls().len();
            s.inject(FaultPlan::new().fail_nth((before + n) as u64, injected));
            sync_tests::logs::take();
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program::run(&devices, &ops)));
            s.clear_faults();
            let logged = sync_tests::logs::take();
            // A run can make other calls than the clean one (gpu-sync caches
            // the current context per thread): name the one that failed.
            let Some(&name) = s.calls().get(before + n) else { continue };
            let what = format!("failing call {n} ({name})");

            let outcome = outcome.map_err(|_| TestCaseError::fail(format!("{what} panicked")))?;
            match outcome {
                Err(RunError::Api { error, .. }) => {
                    prop_assert_eq!(error.cu_error().map(|e| e.0), Some(injected), "{}: {}", what, error);
                    prop_assert_eq!(
                        error.call(),
                        Some(name),
                        "{}: the error names another call: {}",
                        what,
                        error
                    );
                }
                Err(RunError::Mismatch(m)) => {
                    return Err(TestCaseError::fail(format!("{what} corrupted data: {m}")));
                }
                // Not returned: then it failed inside a Drop, which logs it.
                Ok(_) => prop_assert!(
                    logged.iter().any(|l| l.contains(name)),
                    "{} went unreported and unlogged; logged: {:?}",
                    what,
                    logged
                ),
            }
            // A failed disable may leave a pair open: close it now.
            program::close_peers(&devices)
                .map_err(|e| TestCaseError::fail(format!("{what}: closing: {e}")))?;
            for d in &devices {
                d.synchronize().map_err(|e| TestCaseError::fail(format!("{what}: device sync: {e}")))?;
            }
            let races = s.races();
            prop_assert!(races.is_empty(), "{} then the oracle reported:\n{}", what, fmt_races(&races));
            // A failure in a Drop leaks what that drop was freeing (one
            // object, logged); anything else leaks nothing.
            let leaked = total_live(s);
            prop_assert!(leaked <= 1, "{} leaked {:?}", what, s.live());
            if leaked == 1 {
                prop_assert!(
                    logged.iter().any(|l| l.contains("leaking")),
                    "{} leaked {:?} silently",
                    what,
                    s.live()
                );
            }
            // Later operations are still correct: the same program again.
            if let Err(e) = program::run(&devices, &ops) {
                return Err(TestCaseError::fail(format!(
                    "{what}, then the program again: {}",
                    describe(e, &ops)
                )));
            }
            let races = s.races();
            prop_assert!(races.is_empty(), "{} then a clean rerun was flagged:\n{}", what, fmt_races(&races));
        }
        Ok(())
    });
    if let Err(e) = r {
        panic!("{e}");
    }
}

#[test]
fn a_failed_grant_leaves_peer_access_closed_and_a_later_enable_works() {
    let _one = one_at_a_time();
    if !on_sim() {
        return;
    }
    let t = ctx(0x2931);
    let Some(d) = devices(false) else { return };
    let s = t.session.as_ref().expect("sim");
    let (a, b) = (&d[0], &d[1]);
    // The driver's peer limit: an error naming both devices.
    s.inject(FaultPlan::new().fail_nth_of("cuCtxEnablePeerAccess", 0, CUresult::CUDA_ERROR_TOO_MANY_PEERS));
    match a.enable_peer_access(b) {
        Err(Error::PeerAccess { device: 0, peer: 1, reason }) => {
            assert!(reason.contains("CUDA_ERROR_TOO_MANY_PEERS"), "{reason}")
        }
        other => panic!("TOO_MANY_PEERS: {other:?}"),
    }
    s.clear_faults();
    assert!(!a.peer_access_enabled(b), "nothing opened");
    // The pool's grant fails after the context's: the context's undone.
    if a.has_memory_pools() {
        s.inject(FaultPlan::new().fail_every("cuMemPoolSetAccess", CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        let r = a.enable_peer_access(b);
        s.clear_faults();
        match r {
            Err(e) => assert_eq!(e.call(), Some("cuMemPoolSetAccess"), "{e}"),
            Ok(()) => panic!("the pool's grant failed, yet peer access was enabled"),
        }
        assert!(!a.peer_access_enabled(b), "nothing opened");
    }
    // A kernel on a's stream over b's buffer is still refused ...
    let k = kernels::Kernels::load(a).expect("kernels");
    let (sa, sb) = (gpu_sync::Stream::new(a).expect("stream a"), gpu_sync::Stream::new(b).expect("stream b"));
    let mut x = gpu_sync::DeviceBuffer::<u32>::zeroed(&sb, 256).expect("x on b");
    let r = k.bump(&sa, &mut x, 1);
    assert!(matches!(r, Err(Error::DeviceMismatch { expected: 0, found: 1, .. })), "{r:?}");
    // ... until an enable succeeds (both grants made from scratch again).
    a.enable_peer_access(b).expect("enable after the failures");
    k.bump(&sa, &mut x, 1).expect("a kernel on a over b's memory");
    assert_eq!(sb.to_vec(&x).expect("x"), vec![1; 256]);
    drop((x, k, sa, sb));
    a.disable_peer_access(b).expect("disable");
    let races = s.races();
    assert!(races.is_empty(), "{}", fmt_races(&races));
    for d in &d {
        d.synchronize().expect("sync");
    }
    assert_eq!(total_live(s), 0, "{:?}", s.live());
}

/// A graph captured on device A over device B's buffer while A reaches B,
/// replayed after `disable_peer_access`: the replay must be refused with
/// `DeviceMismatch`, as a launch is (`GraphExec::launch` asks the device
/// rule again of the peer buffers its kernels touch,
/// `engine::reached_again`). Before that fix the replay was accepted and its
/// kernel touched memory A no longer reached — an illegal address, the
/// context lost (sticky) on the simulator as on a GPU.
#[test]
fn a_graph_over_a_peer_buffer_is_refused_once_peer_access_is_disabled() {
    let _one = one_at_a_time();
    let t = ctx(0x2932);
    let Some(d) = devices(false) else { return };
    let (a, b) = (&d[0], &d[1]);
    if !a.can_access_peer(b).expect("cuDeviceCanAccessPeer") {
        return;
    }
    let k = kernels::Kernels::load(a).expect("kernels");
    let (sa, sb) = (gpu_sync::Stream::new(a).expect("stream a"), gpu_sync::Stream::new(b).expect("stream b"));
    let mut x = gpu_sync::DeviceBuffer::<u32>::zeroed(&sb, 256).expect("x on b");
    a.enable_peer_access(b).expect("enable");
    let graph =
        sa.capture(|cap| k.bump(cap.stream(), &mut x, 1)).expect("a capture over a reached peer buffer");
    let exec = graph.instantiate().expect("instantiate");
    exec.launch(&sa).expect("a replay while a reaches b");
    a.disable_peer_access(b).expect("disable");
    let r = exec.launch(&sa);
    let synced = sa.synchronize().map(drop);
    assert!(
        matches!(r, Err(Error::DeviceMismatch { expected: 0, found: 1, .. })),
        "a replay over memory a no longer reaches: {r:?} (then the stream's sync: {synced:?})"
    );
    assert_eq!(sb.to_vec(&x).expect("x"), vec![1; 256], "the refused replay changed nothing");
    drop((exec, x, k, sa, sb));
    t.finish();
}
