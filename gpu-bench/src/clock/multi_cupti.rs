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
//! barrier gives a check of it, and a bound on the skew from both sides:
//! device j's first start in a run cannot precede device i's last end in
//! the run before, so the smallest such difference over the runs,
//! `slack(i → j)` ([`PairSlack`]), is the true gap (at least 0: the wait's
//! latency) plus j's clock minus i's. Hence j's clock minus i's lies in
//! `[−slack(j → i), slack(i → j)]`: the mode counters `device j − device 0
//! clock, at least` and `at most`, for every other device j. The smallest
//! slack overall is the counter `cross-device order slack`: below 0 the
//! clocks disagree by at least its size. The interval's width is the two
//! directions' smallest wait latencies, so the bound is as tight as the
//! barrier is fast (on the simulator every device's time is the simulated
//! one, and the bounds read 0 or more on both sides).

use super::Clock;
use crate::error::{Error as BenchError, Result as BenchResult};
use crate::spans::SpanReading;
use crate::timer::Timer;
use gpu_sync::Stream;
use gpu_sync::cuda_sys::cupti::{ActivityRecord, StreamRecords};

/// Kernel mode's runs over several streams: the closure run plainly on the
/// timing streams, in rounds; after each round the records of every timing
/// stream are taken and split into runs (each run must enqueue the same
/// number of device operations on each stream, at least one in all).
pub(crate) struct MultiKernelRuns<'f> {
    f: super::multi::MultiWork<'f>,
    /// The timing streams, the lead's first.
    pub(crate) streams: Vec<Stream>,
    /// Each timing stream's CUPTI filter.
    filters: StreamFilters,
    /// Operations per run on each stream, learnt from the first round.
    per_run: Option<Vec<usize>>,
    pub(crate) readings: super::multi::Readings,
    depth: usize,
    left: usize,
    /// The smallest slack seen between each ordered pair of timing
    /// streams.
    pub(crate) slack: PairSlack,
}

/// The smallest order slack seen from each timing stream to each other,
/// ns: `min[i][j]` is the smallest, over the runs, of stream j's first start
/// in a run minus stream i's last end in the run before (see the module
/// docs); `None` until both had operations in consecutive runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct PairSlack {
    min: Vec<Vec<Option<i64>>>,
}

impl PairSlack {
    /// Takes one run's bounds (`prev`, `now`: each stream's first start and
    /// last end, `None` for a stream without operations).
    pub(crate) fn add(&mut self, prev: &[Option<(u64, u64)>], now: &[Option<(u64, u64)>]) {
        let n = now.len().max(prev.len());
        if self.min.len() < n {
            self.min.resize(n, Vec::new());
        }
        for row in &mut self.min {
            row.resize(n, None);
        }
        for (i, p) in prev.iter().enumerate() {
            let Some((_, end)) = *p else { continue };
            for (j, b) in now.iter().enumerate().filter(|(j, _)| *j != i) {
                let Some((start, _)) = *b else { continue };
                let d = start as i64 - end as i64;
                let m = &mut self.min[i][j];
                *m = Some(m.map_or(d, |m| m.min(d)));
            }
        }
    }

    /// The smallest slack over every ordered pair (the order check): below
    /// 0 the devices' clocks disagree by at least its size.
    pub(crate) fn smallest(&self) -> Option<i64> {
        self.min.iter().flatten().flatten().copied().min()
    }

    /// Stream j's clock minus stream 0's, bounded from both sides:
    /// `(j, at least, at most)` in ns for every stream j > 0 with slacks
    /// both ways.
    pub(crate) fn skew_vs_first(&self) -> Vec<(usize, i64, i64)> {
        (1..self.min.len())
            .filter_map(|j| {
                let to_j = self.min.first()?.get(j).copied().flatten()?;
                let to_0 = self.min.get(j)?.first().copied().flatten()?;
                Some((j, -to_0, to_j))
            })
            .collect()
    }
}

impl<'f> MultiKernelRuns<'f> {
    /// Needs the lead timer's CUPTI consumer ([`Timer::kernel_clock`]).
    pub(crate) fn new(
        lead: &Timer,
        others: &[Timer],
        f: super::multi::MultiWork<'f>,
    ) -> std::result::Result<MultiKernelRuns<'f>, String> {
        let streams: Vec<Stream> =
            std::iter::once(lead.stream.clone()).chain(others.iter().map(|t| t.stream.clone())).collect();
        let filters = StreamFilters::new(&streams)?;
        Ok(MultiKernelRuns {
            f,
            streams,
            filters,
            per_run: None,
            readings: super::multi::Readings::default(),
            depth: 1,
            left: 0,
            slack: PairSlack::default(),
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
        let per_stream = self.filters.split(&all);
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
            let each: Vec<Option<(u64, u64)>> = chunks.iter().map(|c| bounds(c)).collect();
            let start = each.iter().flatten().map(|b| b.0).min().unwrap_or(0);
            let end = each.iter().flatten().map(|b| b.1).max().unwrap_or(start);
            let spans_s =
                each.iter().map(|b| b.map_or(0.0, |(s, e)| e.saturating_sub(s) as f64 * 1e-9)).collect();
            if let Some(p) = &prev {
                self.slack.add(p, &each);
            }
            prev = Some(each);
            self.readings.extend([(end.saturating_sub(start) as f64 * 1e-9, SpanReading { spans_s })]);
        }
        self.left = self.left.saturating_sub(n);
        Ok(())
    }
}

/// Each stream's CUPTI filter and device ordinal: one consumer's records
/// split per stream (CUPTI's stream ids are unique on their device only).
/// Kernel mode over several streams and the NCCL sweep's CUPTI check
/// ([`crate::nccl`]) both read their streams through it.
pub(crate) struct StreamFilters(Vec<(StreamRecords, u32)>);

impl StreamFilters {
    /// The filters of `streams`, in order; the reason as text when CUPTI
    /// cannot be used here.
    pub(crate) fn new<'s>(
        streams: impl IntoIterator<Item = &'s Stream>,
    ) -> std::result::Result<Self, String> {
        let a = gpu_sync::cuda_sys::cupti::activity().map_err(|e| e.to_string())?;
        streams
            .into_iter()
            .map(|s| {
                let sid =
                    a.stream_records(s.device().raw_context(), s.as_raw()).map_err(|e| e.to_string())?;
                Ok((sid, s.device().ordinal().max(0) as u32))
            })
            .collect::<std::result::Result<Vec<_>, String>>()
            .map(StreamFilters)
    }

    /// Each stream's device operations among `all`, in the order they
    /// started.
    pub(crate) fn split(&self, all: &[ActivityRecord]) -> Vec<Vec<ActivityRecord>> {
        self.0
            .iter()
            .map(|(sid, dev)| sid.select(all.iter().filter(|r| r.device_id == *dev).cloned()))
            .collect()
    }
}

/// The first start and the last end of `recs`, ns; `None` when empty.
pub(crate) fn bounds(recs: &[ActivityRecord]) -> Option<(u64, u64)> {
    let start = recs.iter().map(|r| r.start_ns).min()?;
    Some((start, recs.iter().map(|r| r.end_ns).max().unwrap_or(start)))
}

impl Clock for MultiKernelRuns<'_> {
    fn next(&mut self, t: &mut Timer) -> BenchResult<f64> {
        while self.readings.is_empty() {
            self.round(t)?;
        }
        self.readings.next().ok_or_else(|| BenchError::Kernel("no run measured".into()))
    }

    fn size_for(&mut self, estimate_s: f64) {
        self.depth = super::cupti::runs_per_round(estimate_s);
    }

    fn set_left(&mut self, n: usize) {
        self.left = n;
    }

    fn drain(&mut self, _t: &Timer) -> BenchResult<Vec<f64>> {
        Ok(self.readings.drain())
    }

    fn clear_side(&mut self) {
        self.readings.side.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::PairSlack;

    #[test]
    fn order_slack_is_each_devices_start_after_the_others_previous_end() {
        // Run 1 ended at 130 (device 0) and 150 (device 1); run 2 starts at
        // 152 on device 0 (2 after device 1's end) and 151 on device 1 (21
        // after device 0's end).
        let prev = [Some((100, 130)), Some((100, 150))];
        let mut s = PairSlack::default();
        s.add(&prev, &[Some((152, 160)), Some((151, 170))]);
        assert_eq!(s.smallest(), Some(2));
        // Device 1's clock minus device 0's lies in [-2, 21].
        assert_eq!(s.skew_vs_first(), vec![(1, -2, 21)]);
        // Device 0 starting before device 1's end: clocks disagree by 5.
        s.add(&prev, &[Some((145, 160)), Some((151, 170))]);
        assert_eq!(s.smallest(), Some(-5));
        assert_eq!(s.skew_vs_first(), vec![(1, 5, 21)]);
        // A stream without operations adds no constraint.
        let mut t = PairSlack::default();
        t.add(&[Some((100, 130)), None], &[Some((152, 160)), None]);
        assert_eq!((t.smallest(), t.skew_vs_first()), (None, vec![]));
    }

    #[test]
    fn a_known_offset_falls_inside_the_bound() {
        // Device 1's clock reads 40 ns ahead of device 0's; each barrier
        // wait takes 10 to 30 ns. Every run's bound must hold +40.
        let (off, mut s) = (40i64, PairSlack::default());
        let mut end = [1_000i64, 1_000i64];
        for k in 0..20i64 {
            let lat = [10 + k % 3 * 10, 30 - k % 3 * 10];
            let latest = end[0].max(end[1]);
            // True starts: after both ends plus the wait's latency.
            let start = [latest + lat[0], latest + lat[1]];
            let stop = [start[0] + 500, start[1] + 480];
            let seen = |t: [i64; 2]| [t[0] as u64, (t[1] + off) as u64];
            let (pe, ns, ne) = (seen(end), seen(start), seen(stop));
            s.add(&[Some((0, pe[0])), Some((0, pe[1]))], &[Some((ns[0], ne[0])), Some((ns[1], ne[1]))]);
            end = stop;
        }
        let (j, lo, hi) = s.skew_vs_first()[0];
        assert_eq!(j, 1);
        assert!(lo <= off && off <= hi, "[{lo}, {hi}] misses {off}");
        assert!(hi - lo < 200, "[{lo}, {hi}] too wide for 10-30 ns waits");
    }
}
