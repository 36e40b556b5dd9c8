//! First call: the host clock around the first run (or the separate
//! first-call closure, which may load the module) and a stream
//! synchronization; events cannot see a module load. On the simulator the
//! first call reads the simulated clock (events) like every other mode:
//! its host time is the simulator's own CPU time, a different clock, which
//! never goes in a column of simulated times (the simulator models no
//! module load, so a simulated first call costs what a later one does).

use super::Method;
use crate::bench::{Bench, FirstCall as FirstClosure};
use crate::error::Result;
use crate::record::{Mode, ModeResult, Record};
use crate::timer::Timer;
use gpu_sync::Stream;
use std::time::Instant;

/// See the module docs.
pub(crate) struct FirstCallMethod;

impl Method for FirstCallMethod {
    fn mode(&self) -> Mode {
        Mode::FirstCall
    }

    fn measure(
        &self,
        bench: &Bench,
        timer: &mut Timer,
        _rec: &mut Record,
        first: Option<&mut FirstClosure<'_>>,
        f: &mut dyn FnMut(&Stream) -> gpu_sync::Result<()>,
    ) -> Result<Option<ModeResult>> {
        let t = if crate::bench::simulated() {
            match first {
                Some(g) => timer.time_events(g)?,
                None => timer.time_events(f)?,
            }
        } else {
            let t0 = Instant::now();
            match first {
                Some(g) => g(&timer.stream)?,
                None => f(&timer.stream)?,
            }
            timer.stream.synchronize()?;
            t0.elapsed().as_secs_f64()
        };
        let mut r = bench.finish(Mode::FirstCall, vec![t], 1, None, Vec::new(), (0, true), 0);
        r.sampling_s = t;
        Ok(Some(r))
    }
}
