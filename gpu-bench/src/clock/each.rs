//! One synchronized sample at a time, each holding its own runs: batch
//! mode's samples, each a gated batch of runs ([`Timer::gated`]).

use super::Clock;
use crate::error::Result;
use crate::timer::Timer;

/// A closure that takes one whole sample.
pub(crate) struct Each<'f>(pub(crate) &'f mut dyn FnMut(&mut Timer) -> gpu_sync::Result<f64>);

impl Clock for Each<'_> {
    fn next(&mut self, t: &mut Timer) -> Result<f64> {
        Ok((self.0)(t)?)
    }
}
