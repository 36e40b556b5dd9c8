//! Kernel: the GPU's own start and end of each run's device operations,
//! from CUPTI's activity records ([`crate::clock::cupti`]); CUPTI records
//! only while this mode samples.

use super::Method;
use crate::bench::{Bench, FirstCall};
use crate::clock::cupti::KernelRuns;
use crate::error::Result;
use crate::record::{Counter, Mode, ModeResult, Record, Unit};
use crate::timer::Timer;
use gpu_sync::Stream;
use std::collections::VecDeque;

/// See the module docs.
pub(crate) struct KernelMethod;

impl Method for KernelMethod {
    fn mode(&self) -> Mode {
        Mode::Kernel
    }

    fn measure(
        &self,
        bench: &Bench,
        timer: &mut Timer,
        rec: &mut Record,
        _first: Option<&mut FirstCall<'_>>,
        f: &mut dyn FnMut(&Stream) -> gpu_sync::Result<()>,
    ) -> Result<Option<ModeResult>> {
        if let Err(why) = timer.kernel_clock() {
            bench.unavailable(rec, Mode::Kernel, why)?;
            return Ok(None);
        }
        let mut sums = Vec::new();
        let mut runs =
            KernelRuns { f, ready: VecDeque::new(), sums: &mut sums, per_run: None, depth: 1, left: 0 };
        let r = bench.sample(timer, Mode::Kernel, 1, &mut runs);
        // CUPTI records only while kernel mode samples: the other modes run
        // without it.
        timer.drop_kernel_clock();
        let mut r = r?;
        if !sums.is_empty() {
            r.counters.push(Counter::new("device-op sum", crate::stats::median(&sums), Unit::Seconds));
        }
        Ok(Some(r))
    }
}
