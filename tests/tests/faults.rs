//! Fault injection: for each driver call a generated program makes, failing
//! that call makes the safe API return an error at that call — naming it,
//! with the injected code — with no panic and no leak. Destructor calls
//! (`cuMemFreeAsync`, `cuStreamDestroy`, …) cannot return an error: their
//! failure is logged and the one object leaked, by design. A sticky error is
//! reported as a lost context by every later call. Simulator only.

use cuda_sim::{FaultPlan, Session};
use cuda_sys::CUresult;
use gpu_sync::Error;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sync_tests::program::{self, RunError};
use sync_tests::{ctx, on_sim};

fn total_live(s: &Session) -> usize {
    let l = s.live();
    l.device_allocations + l.pinned_allocations + l.streams + l.events + l.modules + l.graphs + l.graph_execs
}

#[test]
fn failing_any_driver_call_of_a_program_is_an_error_at_that_call() {
    if !on_sim() {
        return;
    }
    sync_tests::logs::capture();
    let injected = CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    let r = TestRunner::new(Config { cases: 16, failure_persistence: None, ..Config::default() }).run(
        &(any::<u64>(), program::program(16)),
        |(seed, ops)| {
            // A clean run: the calls the program makes.
            let calls = {
                let t = ctx(seed);
                let s = t.session.as_ref().expect("sim");
                let before = s.calls().len();
                prop_assert!(program::run(&t.device, &ops).is_ok());
                s.calls()[before..].to_vec()
            };
            // Fail each call in turn (every one if few, else an even sample).
            let step = (calls.len() / 48).max(1);
            for n in (0..calls.len()).step_by(step) {
                let t = ctx(seed);
                let s = t.session.as_ref().expect("sim");
                let before = s.calls().len() as u64;
                s.inject(FaultPlan::new().fail_nth(before + n as u64, injected));
                sync_tests::logs::take();
                let outcome =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program::run(&t.device, &ops)));
                s.clear_faults();
                // The call that failed, from this run's own log (a run can
                // make fewer calls than the clean one: gpu-sync caches the
                // current context per thread, for one).
                let Some(&name) = s.calls().get(before as usize + n) else { continue };
                let logged = sync_tests::logs::take();
                let outcome = match outcome {
                    Ok(o) => o,
                    Err(_) => return Err(TestCaseError::fail(format!("failing call {n} ({name}) panicked"))),
                };
                match outcome {
                    Err(RunError::Api { error, .. }) => {
                        prop_assert_eq!(error.cu_error().map(|e| e.0), Some(injected), "{}", error);
                        prop_assert_eq!(error.call(), Some(name), "the error names another call: {}", error);
                    }
                    Err(RunError::Mismatch(m)) => {
                        return Err(TestCaseError::fail(format!(
                            "failing call {n} ({name}) corrupted data: {m}"
                        )));
                    }
                    // Not returned: then it failed inside a Drop (a free, a
                    // destroy, or a wait a free needs), which must log it.
                    Ok(()) => {
                        prop_assert!(
                            logged.iter().any(|l| l.contains(name)),
                            "failing call {} ({}) went unreported and unlogged; logged: {:?}",
                            n,
                            name,
                            logged
                        );
                    }
                }
                // Everything was dropped; let the queued frees run.
                if let Err(e) = t.device.synchronize() {
                    return Err(TestCaseError::fail(format!(
                        "after failing call {n} ({name}): device sync: {e}"
                    )));
                }
                // A failure in a Drop leaks what that drop was freeing (one
                // object, logged); anything else leaks nothing.
                let leaked = total_live(s);
                prop_assert!(leaked <= 1, "failing call {} ({}) leaked {:?}", n, name, s.live());
                if leaked == 1 {
                    prop_assert!(
                        logged.iter().any(|l| l.contains("leaking")),
                        "failing call {} ({}) leaked {:?} without saying so",
                        n,
                        name,
                        s.live()
                    );
                }
            }
            Ok(())
        },
    );
    if let Err(e) = r {
        panic!("{e}");
    }
}

#[test]
fn a_sticky_error_is_a_lost_context_for_every_later_call() {
    if !on_sim() {
        return;
    }
    let t = ctx(77);
    let s = t.session.as_ref().expect("sim");
    let k = kernels::Kernels::load(&t.device).expect("kernels");
    let stream = gpu_sync::Stream::new(&t.device).expect("stream");
    let mut x = gpu_sync::DeviceBuffer::<u32>::zeroed(&stream, 64).expect("x");
    s.inject(FaultPlan::new().fail_nth_of("cuLaunchKernel", 0, CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
    match k.bump(&stream, &mut x, 1) {
        Err(Error::ContextLost { call, error }) => {
            assert_eq!(call, "cuLaunchKernel");
            assert_eq!(error.0, CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
        }
        other => panic!("expected a lost context, got {other:?}"),
    }
    s.clear_faults();
    for r in [stream.synchronize().map(drop), k.bump(&stream, &mut x, 1), stream.to_vec(&x).map(drop)] {
        assert!(matches!(r, Err(Error::ContextLost { .. })), "{r:?}");
    }
    assert_eq!(s.sticky_error(), Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
    // Dropping in a lost context neither panics nor frees memory that may be
    // in use: it logs and leaks.
    drop((x, stream, k));
}
