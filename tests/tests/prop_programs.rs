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
