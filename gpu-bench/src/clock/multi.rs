//! Runs over several streams (and devices): one start/end event pair per
//! stream around each run ([`DeviceSpans`]); a sample is the longest
//! stream's span, and every stream's span is kept beside it.
//!
//! Samples come in rounds. With instruments (on the first stream's device),
//! a round is gated: the spin gate holds the first timing stream, every
//! other timing stream waits for it on the device (a cross-device stream
//! wait), the round's samples are queued on all of them, and the gate opens
//! — no host gap falls inside any device's span. Without instruments, the
//! round is queued as it comes (its first sample may carry the host's
//! submission). Batch: a sample is one gated round of `runs` runs between
//! one pair per stream, each span divided by `runs`.

use super::Clock;
use crate::error::Result as BenchResult;
use crate::spans::{DeviceSpans, SpanReading};
use crate::timer::{PIPELINE_AHEAD_S, PIPELINE_RING, Timer};
use gpu_sync::{Result, Stream};
use std::collections::VecDeque;

/// What each sample holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    /// One run (hot).
    Hot,
    /// An L2 flush on every stream's device (outside the events), then one
    /// run; the salt of the last flush.
    Cold(u8),
    /// `runs` runs back to back behind the gate (batch).
    Batch(usize),
}

/// The work: the caller's closure over every timing stream.
pub(crate) type MultiWork<'f> = &'f mut dyn FnMut(&[Stream]) -> Result<()>;

/// The samples of a several-stream clock: those measured and not yet handed
/// out, each with its per-stream reading, and the readings of the samples
/// handed out since the last `clear_side` (event and CUPTI clocks alike).
#[derive(Default)]
pub(crate) struct Readings {
    ready: VecDeque<(f64, SpanReading)>,
    /// The readings of the samples handed out since the last `clear_side`.
    pub(crate) side: Vec<SpanReading>,
}

impl Readings {
    /// Whether no measured sample waits to be handed out.
    pub(crate) fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// Queues measured samples.
    pub(crate) fn extend(&mut self, samples: impl IntoIterator<Item = (f64, SpanReading)>) {
        self.ready.extend(samples);
    }

    /// The next sample, its reading kept aside; `None` when none waits.
    pub(crate) fn next(&mut self) -> Option<f64> {
        let (s, r) = self.ready.pop_front()?;
        self.side.push(r);
        Some(s)
    }

    /// Every waiting sample, their readings kept aside.
    pub(crate) fn drain(&mut self) -> Vec<f64> {
        let side = &mut self.side;
        self.ready
            .drain(..)
            .map(|(s, r)| {
                side.push(r);
                s
            })
            .collect()
    }
}

/// Samples over several timers' streams (see the module docs): `first` is
/// the sampling loop's timer, `others` the rest, in the caller's order.
pub(crate) struct MultiRuns<'f> {
    pub(crate) others: &'f mut [Timer],
    pub(crate) f: MultiWork<'f>,
    pub(crate) kind: Kind,
    /// Every timing stream, the first timer's first.
    streams: Vec<Stream>,
    /// The round's pairs, grown on demand up to [`PIPELINE_RING`].
    ring: Vec<DeviceSpans>,
    pub(crate) readings: Readings,
    depth: usize,
    left: usize,
    /// Whether rounds are still gated (cleared when a gate timed out before
    /// the host had queued its round).
    gated: bool,
    /// Batch samples whose gate timed out before their runs were queued.
    pub(crate) gate_timeouts: usize,
}

impl<'f> MultiRuns<'f> {
    pub(crate) fn new(first: &Timer, others: &'f mut [Timer], f: MultiWork<'f>, kind: Kind) -> MultiRuns<'f> {
        let streams =
            std::iter::once(first.stream.clone()).chain(others.iter().map(|t| t.stream.clone())).collect();
        MultiRuns {
            others,
            f,
            kind,
            streams,
            ring: Vec::new(),
            readings: Readings::default(),
            depth: 1,
            left: 0,
            gated: true,
            gate_timeouts: 0,
        }
    }

    /// One sample on its own (an estimate before sizing batches), seconds.
    pub(crate) fn one(&mut self, t: &mut Timer) -> BenchResult<f64> {
        self.left = 1;
        self.next(t)
    }

    /// Queues `n` samples (each start pairs, the work, end pairs) on every
    /// stream, the other streams first waiting for the first: behind the
    /// gate when `gate`. Returns whether the gate (if any) opened in time.
    fn round(&mut self, t: &mut Timer, n: usize, gate: bool) -> Result<bool> {
        while self.ring.len() < n {
            self.ring.push(DeviceSpans::new(&self.streams)?);
        }
        let kind = &mut self.kind;
        let (others, f, streams, ring) = (&mut *self.others, &mut *self.f, &self.streams, &self.ring);
        let mut body = |t: &mut Timer| -> Result<()> {
            for o in others.iter() {
                o.stream.wait_stream(&t.stream)?;
            }
            for spans in ring.iter().take(n) {
                let runs = match kind {
                    Kind::Cold(salt) => {
                        *salt = salt.wrapping_add(1);
                        t.flush_l2(*salt)?;
                        for o in others.iter_mut() {
                            o.flush_l2(*salt)?;
                        }
                        1
                    }
                    Kind::Hot => 1,
                    Kind::Batch(runs) => *runs,
                };
                spans.start_all(streams)?;
                for _ in 0..runs {
                    f(streams)?;
                }
                spans.end_all(streams)?;
            }
            Ok(())
        };
        if gate { t.gated(&mut body) } else { body(t).map(|()| true) }
    }

    /// Runs one round and keeps its samples (dropping a gated hot or cold
    /// round whose gate timed out, and going on ungated).
    fn fill(&mut self, t: &mut Timer) -> Result<()> {
        let runs = match self.kind {
            Kind::Batch(runs) => runs.max(1),
            _ => 1,
        };
        let n = if runs > 1 { 1 } else { self.depth.min(self.left.max(1)).min(PIPELINE_RING) };
        let gate = t.instruments.is_some() && (self.gated || runs > 1);
        let opened = self.round(t, n, gate)?;
        let mut round = Vec::with_capacity(n);
        for spans in self.ring.iter().take(n) {
            let mut r = spans.read()?;
            r.spans_s.iter_mut().for_each(|s| *s /= runs as f64);
            round.push((r.longest(), r));
        }
        if !opened && runs == 1 {
            t.dropped_rounds += 1;
            self.gated = false;
            return self.fill(t);
        }
        self.gate_timeouts += usize::from(!opened);
        self.left = self.left.saturating_sub(n);
        self.readings.extend(round);
        Ok(())
    }
}

impl Clock for MultiRuns<'_> {
    fn next(&mut self, t: &mut Timer) -> BenchResult<f64> {
        if self.readings.is_empty() {
            self.fill(t)?;
        }
        let Some(s) = self.readings.next() else {
            return Err(gpu_sync::Error::InvalidArgument("no multi-stream sample ready".into()).into());
        };
        Ok(s)
    }

    fn size_for(&mut self, estimate_s: f64) {
        let n = if estimate_s > 0.0 { (PIPELINE_AHEAD_S / estimate_s).ceil() } else { PIPELINE_RING as f64 };
        self.depth = (n.min(PIPELINE_RING as f64) as usize).max(2);
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
