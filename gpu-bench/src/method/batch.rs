//! Batch: runs queued back to back behind the spin gate, the gate opened
//! once they are all queued; time per run = span / N, with no host launch
//! gaps ([`Timer::gated`]). Needs the instruments.

use super::Method;
use crate::bench::{Bench, FirstCall};
use crate::clock::each::Each;
use crate::error::Result;
use crate::record::{Mode, ModeResult, Record, Warning};
use crate::stop::Rule;
use crate::timer::{PIPELINE_AHEAD_S, Timer};
use gpu_sync::Stream;

/// See the module docs.
pub(crate) struct BatchMethod;

impl Method for BatchMethod {
    fn mode(&self) -> Mode {
        Mode::Batch
    }

    fn measure(
        &self,
        bench: &Bench,
        timer: &mut Timer,
        rec: &mut Record,
        _first: Option<&mut FirstCall<'_>>,
        f: &mut dyn FnMut(&Stream) -> gpu_sync::Result<()>,
    ) -> Result<Option<ModeResult>> {
        if timer.instruments.is_none() {
            bench.unavailable(
                rec,
                Mode::Batch,
                "no instruments loaded (the spin gate): Bench::instruments(gpu_bench::instruments::load(..))"
                    .into(),
            )?;
            return Ok(None);
        }
        // Samples of about PIPELINE_AHEAD_S of work: a 10 ms kernel is not
        // batched 64 times per sample.
        let est = timer.time(&mut *f)?;
        let fit = if est > 0.0 { (PIPELINE_AHEAD_S / est).ceil() as usize } else { usize::MAX };
        let n = bench.settings_ref().batch_runs.max(1).min(fit.max(1));
        let mut timeouts = 0usize;
        let mut one = |t: &mut Timer| {
            let (per_run, opened) = t.time_batch(n, &mut *f)?;
            timeouts += usize::from(!opened);
            Ok(per_run)
        };
        let r = bench.sample(timer, Mode::Batch, n, &mut Each(&mut one))?;
        if timeouts > 0 {
            rec.warnings.push(Warning {
                rule: Rule::Gate,
                mode: Some(Mode::Batch),
                message: format!(
                    "the spin gate timed out in {timeouts} samples before {n} runs were queued: \
                     those include host launch gaps"
                ),
            });
        }
        Ok(Some(r))
    }
}
