//! Kernel mode over several streams and devices: CUPTI's activity records
//! carry one clock for every device, so a run's time is its first start to
//! its last end over every stream's records. Each stream's own span (its
//! first start to its last end) is kept beside it, as the event modes keep
//! theirs.
//!
//! Before each run every timing stream waits for every other (device-side
//! stream waits, which CUPTI records as no operation), so a run starts on
//! all devices once all have finished the last one.
//!
//! One clock for all devices is CUPTI's claim: on a GPU machine the
//! devices' timestamps are each device's clock normalized by CUPTI. The
//! barrier gives a check of it: each device's first start in a run cannot
//! precede the other devices' last end in the run before, so the smallest
//! such difference ([`order_slack`], the mode counter `cross-device order
//! slack`) is at least 0 on one clock, and a negative value is a skew of at
//! least its size. A positive slack is the barrier's latency plus any skew
//! in that direction: it does not bound the skew from the other side, and
//! the skew itself is not measured (no GPU run has validated it yet; on the
//! simulator every device's time is the simulated one).

use super::Clock;
use crate::error::{Error as BenchError, Result as BenchResult};
use crate::spans::SpanReading;
use crate::timer::Timer;
use gpu_sync::Stream;
use gpu_sync::cuda_sys::cupti::{ActivityRecord, StreamRecords};
use std::collections::VecDeque;

/// Kernel mode's runs over several streams: the closure run plainly on the
/// timing streams, in rounds; after each round the records of every timing
/// stream are taken and split into runs (each run must enqueue the same
/// number of device operations on each stream, at least one in all).
pub(crate) struct MultiKernelRuns<'f> {
    f: super::multi::MultiWork<'f>,
    streams: Vec<Stream>,
    /// Each timing stream's CUPTI filter and device ordinal.
    filters: Vec<(StreamRecords, u32)>,
    /// Operations per run on each stream, learnt from the first round.
    per_run: Option<Vec<usize>>,
    ready: VecDeque<(f64, SpanReading)>,
    /// The per-stream spans of the samples handed out since `clear_side`.
    pub(crate) side: Vec<SpanReading>,
    depth: usize,
    left: usize,
    /// The smallest cross-device order slack seen, ns ([`order_slack`]).
    pub(crate) order_slack_ns: Option<i64>,
}

/// The smallest, over devices, of a device's first start in a run minus
/// the latest end of the other devices in the run before (`prev`, `now`:
/// each stream's first start and last end, `None` for a stream without
/// operations). Each device waited for those ends (the barrier), so on one
/// clock the slack is at least 0 (the wait's latency); a negative slack is
/// a disagreement of CUPTI's timestamps across devices of at least its
/// size. `None` with fewer than two streams with operations.
pub(crate) fn order_slack(prev: &[Option<(u64, u64)>], now: &[Option<(u64, u64)>]) -> Option<i64> {
    now.iter()
        .enumerate()
        .filter_map(|(i, b)| {
            let (start, _) = (*b)?;
            let others_end =
                prev.iter().enumerate().filter(|(j, _)| *j != i).filter_map(|(_, b)| b.map(|b| b.1)).max()?;
            Some(start as i64 - others_end as i64)
        })
        .min()
}

impl<'f> MultiKernelRuns<'f> {
    /// Needs the lead timer's CUPTI consumer ([`Timer::kernel_clock`]).
    pub(crate) fn new(
        lead: &Timer,
        others: &[Timer],
        f: super::multi::MultiWork<'f>,
    ) -> std::result::Result<MultiKernelRuns<'f>, String> {
        let a = gpu_sync::cuda_sys::cupti::activity().map_err(|e| e.to_string())?;
        let streams: Vec<Stream> =
            std::iter::once(lead.stream.clone()).chain(others.iter().map(|t| t.stream.clone())).collect();
        let filters = streams
            .iter()
            .map(|s| {
                let sid =
                    a.stream_records(s.device().raw_context(), s.as_raw()).map_err(|e| e.to_string())?;
                Ok((sid, s.device().ordinal().max(0) as u32))
            })
            .collect::<std::result::Result<Vec<_>, String>>()?;
        Ok(MultiKernelRuns {
            f,
            streams,
            filters,
            per_run: None,
            ready: VecDeque::new(),
            side: Vec::new(),
            depth: 1,
            left: 0,
            order_slack_ns: None,
        })
    }

    fn round(&mut self, t: &mut Timer) -> BenchResult<()> {
        let kerr = |e: gpu_sync::cuda_sys::cupti::CuptiError| BenchError::Kernel(e.to_string());
        let n = self.depth.min(self.left.max(1));
        let Some((consumer, _)) = t.kernel_clock.as_ref() else {
            return Err(BenchError::Kernel("no CUPTI consumer".into()));
        };
        // Records of earlier work (clock probes) are not this round's.
        consumer.take().map_err(kerr)?;
        for _ in 0..n {
            // A barrier: every stream waits for every other's last run, so
            // each run starts on all devices together (otherwise a device
            // with less work runs ahead, and first start to last end would
            // span several runs).
            for (i, a) in self.streams.iter().enumerate() {
                for b in self.streams.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, b)| b) {
                    a.wait_stream(b)?;
                }
            }
            (self.f)(&self.streams)?;
        }
        for s in &self.streams {
            s.synchronize()?;
        }
        let Some((consumer, _)) = t.kernel_clock.as_ref() else {
            return Err(BenchError::Kernel("no CUPTI consumer".into()));
        };
        let all = consumer.take().map_err(kerr)?;
        let per_stream: Vec<Vec<ActivityRecord>> = self
            .filters
            .iter()
            .map(|(sid, dev)| sid.select(all.iter().filter(|r| r.device_id == *dev).cloned()))
            .collect();
        let counts: Vec<usize> = per_stream.iter().map(Vec::len).collect();
        let k = self.per_run.get_or_insert_with(|| counts.iter().map(|c| c / n).collect()).clone();
        if k.iter().all(|&k| k == 0) || counts.iter().zip(&k).any(|(c, k)| *c != k * n) {
            return Err(BenchError::Kernel(format!(
                "{counts:?} device operations recorded per stream for {n} runs: each run must enqueue \
                 the same number on each stream ({k:?} in the first round), at least one in all"
            )));
        }
        let mut prev: Option<Vec<Option<(u64, u64)>>> = None;
        for run in 0..n {
            let chunks: Vec<&[ActivityRecord]> =
                per_stream.iter().zip(&k).map(|(recs, &k)| &recs[run * k..(run + 1) * k]).collect();
            let bounds = |c: &[ActivityRecord]| {
                let start = c.iter().map(|r| r.start_ns).min()?;
                Some((start, c.iter().map(|r| r.end_ns).max().unwrap_or(start)))
            };
            let each: Vec<Option<(u64, u64)>> = chunks.iter().map(|c| bounds(c)).collect();
            let start = each.iter().flatten().map(|b| b.0).min().unwrap_or(0);
            let end = each.iter().flatten().map(|b| b.1).max().unwrap_or(start);
            let spans_s =
                each.iter().map(|b| b.map_or(0.0, |(s, e)| e.saturating_sub(s) as f64 * 1e-9)).collect();
            if let Some(p) = &prev {
                self.order_slack_ns = order_slack(p, &each).into_iter().chain(self.order_slack_ns).min();
            }
            prev = Some(each);
            self.ready.push_back((end.saturating_sub(start) as f64 * 1e-9, SpanReading { spans_s }));
        }
        self.left = self.left.saturating_sub(n);
        Ok(())
    }
}

impl Clock for MultiKernelRuns<'_> {
    fn next(&mut self, t: &mut Timer) -> BenchResult<f64> {
        while self.ready.is_empty() {
            self.round(t)?;
        }
        let Some((s, r)) = self.ready.pop_front() else {
            return Err(BenchError::Kernel("no run measured".into()));
        };
        self.side.push(r);
        Ok(s)
    }

    fn size_for(&mut self, estimate_s: f64) {
        let n = if estimate_s > 0.0 { (crate::timer::PIPELINE_AHEAD_S / estimate_s).ceil() } else { 256.0 };
        self.depth = (n.min(256.0) as usize).max(1);
    }

    fn set_left(&mut self, n: usize) {
        self.left = n;
    }

    fn drain(&mut self, _t: &Timer) -> BenchResult<Vec<f64>> {
        Ok(self
            .ready
            .drain(..)
            .map(|(s, r)| {
                self.side.push(r);
                s
            })
            .collect())
    }

    fn clear_side(&mut self) {
        self.side.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::order_slack;

    #[test]
    fn order_slack_is_each_devices_start_after_the_others_previous_end() {
        // Run 1 ended at 130 (device 0) and 150 (device 1); run 2 starts at
        // 152 on device 0 (2 after device 1's end) and 151 on device 1 (21
        // after device 0's end).
        let prev = [Some((100, 130)), Some((100, 150))];
        assert_eq!(order_slack(&prev, &[Some((152, 160)), Some((151, 170))]), Some(2));
        // Device 0 starting before device 1's end: clocks disagree by 5.
        assert_eq!(order_slack(&prev, &[Some((145, 160)), Some((151, 170))]), Some(-5));
        // A stream without operations adds no constraint.
        assert_eq!(order_slack(&[Some((100, 130)), None], &[Some((152, 160)), None]), None);
    }
}
