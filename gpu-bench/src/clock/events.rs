//! Event pairs around each run (hot, cold, graph): in gated rounds behind
//! the spin gate when the timer has instruments, else enqueued ahead on the
//! timer's ring of event pairs, primed by a spin whenever the queue ran
//! empty. See [`Pipeline::next`].

use super::Clock;
use crate::error::Result as BenchResult;
use crate::timer::{PIPELINE_AHEAD_S, PIPELINE_RING, Timer};
use gpu_sync::{Error, Result, Stream};
use std::collections::VecDeque;

/// What one pipelined sample enqueues between its events.
pub(crate) enum Work<'f> {
    /// The caller's closure, on the timing stream.
    Run(&'f mut dyn FnMut(&Stream) -> Result<()>),
    /// An L2 flush (outside the events), then the caller's closure.
    Cold(&'f mut dyn FnMut(&Stream) -> Result<()>, u8),
}

/// Samples enqueued ahead on the timer's ring of event pairs (see the
/// module docs): `next` returns the oldest completed sample, keeping up to
/// `depth` in flight; `drain` reads the rest.
pub(crate) struct Pipeline<'f> {
    work: Work<'f>,
    /// Ring slots in flight, oldest first.
    in_flight: std::collections::VecDeque<usize>,
    next_slot: usize,
    depth: usize,
    /// Runs it may still enqueue (the sample cap).
    left: usize,
    /// Runs enqueued so far.
    runs: usize,
    /// Whether the GPU may have gone idle since the last enqueue (the next
    /// sample is then primed).
    idle: bool,
    /// Samples of the last gated round not yet handed out, oldest first.
    ready: VecDeque<f64>,
    /// Whether samples are still taken in gated rounds (cleared when a
    /// round's gate times out: work that blocks the host, such as a
    /// pageable copy, cannot be queued behind a closed gate).
    gated: bool,
}

impl<'f> Pipeline<'f> {
    pub(crate) fn new(work: Work<'f>) -> Pipeline<'f> {
        Pipeline {
            work,
            in_flight: Default::default(),
            next_slot: 0,
            depth: 2,
            left: 0,
            runs: 0,
            idle: true,
            ready: VecDeque::new(),
            gated: true,
        }
    }

    /// Sizes the queue for samples of about `estimate_s`: [`PIPELINE_AHEAD_S`]
    /// of work, at least 2 and at most [`PIPELINE_RING`] samples.
    fn size_for(&mut self, estimate_s: f64) {
        let n = if estimate_s > 0.0 { (PIPELINE_AHEAD_S / estimate_s).ceil() } else { PIPELINE_RING as f64 };
        self.depth = (n.min(PIPELINE_RING as f64) as usize).max(2);
    }

    fn enqueue(&mut self, t: &mut Timer, gated: bool) -> Result<()> {
        t.ensure_ring()?;
        if !gated && (self.idle || self.in_flight.is_empty()) {
            t.prime()?;
            self.idle = false;
        }
        let slot = self.next_slot;
        if let Work::Cold(_, salt) = &mut self.work {
            *salt = salt.wrapping_add(1);
            let s = *salt;
            t.flush_l2(s)?;
        }
        let Some((a, b)) = t.ring.get(slot) else {
            return Err(Error::InvalidArgument("sample ring slot out of range".into()));
        };
        a.record(&t.stream)?;
        match &mut self.work {
            Work::Run(f) | Work::Cold(f, _) => f(&t.stream)?,
        }
        b.record(&t.stream)?;
        self.in_flight.push_back(slot);
        self.next_slot = (slot + 1) % PIPELINE_RING;
        self.left = self.left.saturating_sub(1);
        self.runs += 1;
        Ok(())
    }

    /// Waits for the oldest sample in flight and reads it: seconds.
    fn read_oldest(&mut self, t: &Timer) -> Result<f64> {
        let slot = self.in_flight.pop_front();
        let Some((a, b)) = slot.and_then(|s| t.ring.get(s)) else {
            return Err(Error::InvalidArgument("no sample in flight".into()));
        };
        b.synchronize()?;
        Ok(a.elapsed(b)?.as_secs_f64())
    }

    /// The next sample. With instruments, samples come in gated rounds:
    /// up to `depth` samples (within the cap) are queued behind the closed
    /// spin gate, then the gate opens and the GPU runs start event → work →
    /// end event of every sample back to back, with no host gap inside any
    /// timed region. A round whose gate timed out before the host had queued
    /// it is dropped (counted in [`Timer::dropped_rounds`]) and run again.
    /// Without instruments, samples are enqueued ahead on the ring, the
    /// queue primed by a spin whenever it ran empty.
    fn next_sample(&mut self, t: &mut Timer) -> Result<f64> {
        if self.ready.is_empty() && (t.instruments.is_none() || !self.gated) {
            while self.in_flight.len() < self.depth && self.left > 0 {
                self.enqueue(t, false)?;
            }
            return self.read_oldest(t);
        }
        while self.ready.is_empty() {
            let n = self.depth.min(self.left.max(1)).min(PIPELINE_RING);
            let opened = t.gated(&mut |t| {
                for _ in 0..n {
                    self.enqueue(t, true)?;
                }
                Ok(())
            })?;
            let mut round = Vec::with_capacity(n);
            while !self.in_flight.is_empty() {
                round.push(self.read_oldest(t)?);
            }
            if opened {
                self.ready.extend(round);
            } else {
                // The host could not queue the round before the gate's
                // timeout (work that blocks the host): the round's samples
                // are dropped, and the mode goes on ungated.
                t.dropped_rounds += 1;
                self.gated = false;
                // The dropped runs do not count against the cap.
                self.left += round.len();
                self.runs = self.runs.saturating_sub(round.len());
                return self.next_sample(t);
            }
        }
        self.ready.pop_front().ok_or_else(|| Error::InvalidArgument("no sample ready".into()))
    }

    /// Reads every sample still in flight, in order.
    fn drain_all(&mut self, t: &Timer) -> Result<Vec<f64>> {
        let mut v: Vec<f64> = self.ready.drain(..).collect();
        while !self.in_flight.is_empty() {
            v.push(self.read_oldest(t)?);
        }
        Ok(v)
    }
}

impl Clock for Pipeline<'_> {
    fn next(&mut self, t: &mut Timer) -> BenchResult<f64> {
        Ok(self.next_sample(t)?)
    }

    fn size_for(&mut self, estimate_s: f64) {
        Pipeline::size_for(self, estimate_s);
    }

    fn set_idle(&mut self) {
        self.idle = true;
    }

    fn set_left(&mut self, n: usize) {
        self.left = n;
    }

    fn drain(&mut self, t: &Timer) -> BenchResult<Vec<f64>> {
        Ok(self.drain_all(t)?)
    }
}
