//! Kernel mode's source: the GPU's own start and end of each run's device
//! operations, from CUPTI's activity records (through cuda-sys's one
//! process-wide subscriber).

use super::Clock;
use crate::error::{Error as BenchError, Result as BenchResult};
use crate::timer::Timer;
use gpu_sync::{Result, Stream};
use std::collections::VecDeque;

/// Kernel mode's runs: the closure run plainly on the timing stream, in
/// rounds; after each round the CUPTI records of the timing stream are
/// taken and split into runs (each run must enqueue the same number of
/// device operations). A sample is the span from a run's first start to
/// its last end; the sum of its operations' durations is kept beside it.
pub(crate) struct KernelRuns<'f> {
    pub(crate) f: &'f mut dyn FnMut(&Stream) -> Result<()>,
    /// (span, sum) of runs measured and not yet handed out, seconds.
    pub(crate) ready: VecDeque<(f64, f64)>,
    /// The sums of the runs handed out since the last [`Source::clear_side`].
    pub(crate) sums: &'f mut Vec<f64>,
    /// Device operations per run, learnt from the first round.
    pub(crate) per_run: Option<usize>,
    pub(crate) depth: usize,
    pub(crate) left: usize,
}

impl Clock for KernelRuns<'_> {
    fn next(&mut self, t: &mut Timer) -> BenchResult<f64> {
        while self.ready.is_empty() {
            if t.kernel_counters.is_some() {
                self.profiled_round(t)?;
                continue;
            }
            let n = self.depth.min(self.left.max(1));
            let Some((consumer, sid)) = t.kernel_clock.as_ref() else {
                return Err(BenchError::Kernel("no CUPTI consumer".into()));
            };
            let sid = *sid;
            // Records of earlier work on the stream (clock probes) are not
            // this round's.
            consumer.take().map_err(|e| BenchError::Kernel(e.to_string()))?;
            for _ in 0..n {
                (self.f)(&t.stream)?;
            }
            t.stream.synchronize()?;
            let Some((consumer, _)) = t.kernel_clock.as_ref() else {
                return Err(BenchError::Kernel("no CUPTI consumer".into()));
            };
            let recs = sid.select(consumer.take().map_err(|e| BenchError::Kernel(e.to_string()))?);
            if recs.is_empty() {
                return Err(BenchError::Kernel(
                    "CUPTI recorded no kernel, copy or memset for the runs on the timing stream \
                     (does the closure enqueue its work on the stream it is given?)"
                        .into(),
                ));
            }
            let k = *self.per_run.get_or_insert(recs.len() / n);
            if k == 0 || recs.len() != k * n {
                return Err(BenchError::Kernel(format!(
                    "{} device operations recorded for {n} runs: each run must enqueue the same number \
                     ({k} in the first round)",
                    recs.len()
                )));
            }
            for run in recs.chunks(k) {
                let (start, end) = super::multi_cupti::bounds(run).unwrap_or((0, 0));
                let sum: u64 = run.iter().map(|r| r.duration_ns()).sum();
                self.ready.push_back((end.saturating_sub(start) as f64 * 1e-9, sum as f64 * 1e-9));
            }
            self.left = self.left.saturating_sub(n);
        }
        let (span, sum) = self.ready.pop_front().unwrap_or((0.0, 0.0));
        self.sums.push(sum);
        Ok(span)
    }

    fn size_for(&mut self, estimate_s: f64) {
        self.depth = runs_per_round(estimate_s);
    }

    fn set_left(&mut self, n: usize) {
        self.left = n;
    }

    fn drain(&mut self, _t: &Timer) -> BenchResult<Vec<f64>> {
        let sums = &mut *self.sums;
        Ok(self
            .ready
            .drain(..)
            .map(|(span, sum)| {
                sums.push(sum);
                span
            })
            .collect())
    }

    fn clear_side(&mut self) {
        self.sums.clear();
    }
}

impl KernelRuns<'_> {
    /// One round under CUPTI's range profiler ([`KernelRecords::Profiler`](crate::KernelRecords::Profiler)):
    /// each run's sample is the sum of its kernels' `gpu__time_duration`
    /// (the kernels are serialized; the counter has no timestamps). Before
    /// the first round, one run is watched for copies and memsets on the
    /// timing stream (which the profiler does not see) by the consumer made
    /// beside the profiler, then the consumer is dropped.
    fn profiled_round(&mut self, t: &mut Timer) -> BenchResult<()> {
        let kernel = |e: String| BenchError::Kernel(e);
        if let Some((consumer, sid)) = t.kernel_clock.as_ref() {
            // The first round: one run watched for copies and memsets (the
            // closure enqueues the same each run), then the records off, so
            // the profiler runs alone.
            let sid = *sid;
            consumer.take().map_err(|e| kernel(e.to_string()))?;
            (self.f)(&t.stream)?;
            t.stream.synchronize()?;
            let Some((consumer, _)) = t.kernel_clock.as_ref() else {
                return Err(kernel("no CUPTI consumer".into()));
            };
            let others = sid.select(consumer.take().map_err(|e| kernel(e.to_string()))?);
            t.kernel_clock = None;
            if !others.is_empty() {
                return Err(kernel(format!(
                    "a run enqueued {} copies or memsets on the timing stream, which the range profiler \
                     (--kernel-records profiler) does not time: use concurrent or serial records",
                    others.len()
                )));
            }
        }
        // One run first, to learn its kernels; then as many as fit, and no
        // more than about PIPELINE_AHEAD_S of idle waits a round, so the
        // stopping rule sees samples as often as in the other modes.
        let room = self.per_run.map_or(1, |k| crate::timer::PROFILER_MAX_KERNELS / k.max(1));
        let idle = std::time::Duration::from_secs_f64(crate::timer::PROFILER_IDLE_S);
        let idle_room = (crate::timer::PIPELINE_AHEAD_S / crate::timer::PROFILER_IDLE_S).ceil() as usize;
        let n = self.depth.min(self.left.max(1)).min(room.max(1)).min(idle_room.max(1));
        t.stream.device().make_current()?;
        let Some(counters) = t.kernel_counters.as_mut() else {
            return Err(kernel("no range profiler".into()));
        };
        counters.start().map_err(|e| kernel(e.to_string()))?;
        let mut ran = Ok(());
        for _ in 0..n {
            // Each run alone on an idle GPU (PROFILER_IDLE_S says why): the
            // stream drained, then the host waits before launching it.
            ran = t.stream.synchronize().and_then(|_drained| {
                std::thread::sleep(idle);
                (self.f)(&t.stream)
            });
            if ran.is_err() {
                break;
            }
        }
        let synced = t.stream.synchronize();
        let current = t.stream.device().make_current();
        let Some(counters) = t.kernel_counters.as_mut() else {
            return Err(kernel("no range profiler".into()));
        };
        // Stopped whatever happened to the runs, so the next round can start.
        let durations = counters.stop().map_err(|e| kernel(e.to_string()));
        ran?;
        synced?;
        current?;
        let durations = durations?;
        if durations.is_empty() {
            return Err(kernel(
                "the range profiler saw no kernel in the runs: does the closure launch its kernels on the \
                 stream it is given? Does another CUPTI user in this process (a trace, a profile, a \
                 consumer of CUPTI's memcpy or memset records) keep activity records on? The profiler \
                 records nothing while they are"
                    .into(),
            ));
        }
        let k = *self.per_run.get_or_insert(durations.len() / n);
        if k == 0 || durations.len() != k * n {
            return Err(kernel(format!(
                "{} kernels profiled for {n} runs: each run must launch the same number ({k} in the first round)",
                durations.len()
            )));
        }
        for run in durations.chunks(k) {
            let sum: f64 = run.iter().sum::<f64>() * 1e-9;
            self.ready.push_back((sum, sum));
        }
        self.left = self.left.saturating_sub(n);
        Ok(())
    }
}

/// Runs per round of a CUPTI clock for a sample of about `estimate_s`:
/// enough to fill the pipeline's time ahead, 1 to 256 (256 without an
/// estimate).
pub(super) fn runs_per_round(estimate_s: f64) -> usize {
    let n = if estimate_s > 0.0 { (crate::timer::PIPELINE_AHEAD_S / estimate_s).ceil() } else { 256.0 };
    (n.min(256.0) as usize).max(1)
}
