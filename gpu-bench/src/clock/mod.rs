//! Time sources: where a mode's samples come from. Each is a [`Clock`]
//! that hands out one sample (seconds per run) at a time; a new source (a
//! profiler's, another device layout's) is a new file here, not an arm in a
//! central match.
//!
//! - [`events`]: event pairs around each run, in gated rounds behind the
//!   spin gate (or enqueued ahead on a ring without instruments): hot, cold,
//!   graph;
//! - [`each`]: one synchronized sample at a time, each holding its own runs
//!   (batch behind the gate);
//! - [`cupti`]: the GPU's own start and end of each run's operations, from
//!   CUPTI's activity records (kernel);
//! - [`multi`]: one start/end pair per stream around each run over several
//!   streams and devices ([`crate::spans`]), the sample the longest span
//!   (hot, cold, batch of [`crate::Bench::run_streams`]);
//! - [`multi_cupti`]: CUPTI's records of every stream, a run's first start
//!   to its last end over all devices (kernel of
//!   [`crate::Bench::run_streams`]);
//! - [`host`] (public, `gpu_bench::host`): the host clock, for what events
//!   cannot see.

pub(crate) mod cupti;
pub(crate) mod each;
pub(crate) mod events;
pub mod host;
pub(crate) mod multi;
pub(crate) mod multi_cupti;

use crate::error::Result;
use crate::timer::Timer;

/// A source of samples (see the module docs).
pub(crate) trait Clock {
    /// The next sample, seconds per run.
    fn next(&mut self, t: &mut Timer) -> Result<f64>;

    /// Sizes what is queued ahead for samples of about `estimate_s`.
    fn size_for(&mut self, _estimate_s: f64) {}

    /// The GPU went idle (a synchronizing clock probe): prime the next sample.
    fn set_idle(&mut self) {}

    /// Runs it may still start (the sample cap).
    fn set_left(&mut self, _n: usize) {}

    /// Every run already measured and not handed out, in order.
    fn drain(&mut self, _t: &Timer) -> Result<Vec<f64>> {
        Ok(Vec::new())
    }

    /// Forgets what was kept beside the samples so far (warmup's).
    fn clear_side(&mut self) {}
}
