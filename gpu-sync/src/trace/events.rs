//! The event backend: pooled timing events, and the calibrations that map
//! a device's event clock to the host clock ([`super::now_ns`]).
//!
//! A calibration is an event recorded at a known host time: `t0` read, the
//! event recorded, its completion seen (`cuEventQuery` polled, or
//! `cuEventSynchronize`), `t1` read. The device reached the event between
//! `t0` and `t1`, so it is given the host time `(t0 + t1) / 2`, within
//! `± (t1 - t0) / 2`. An operation's events are then placed at that time
//! plus their event time since the calibration event
//! (`cuEventElapsedTime`). Event times are one clock per device, so the
//! recorder's own reference (an event on an idle stream of its own, at
//! `Device::record` and at each take) serves a stream that was busy when
//! it was first seen.

use super::Calibration;
use super::sink::{DeviceFacts, Sink, State};
use crate::error::{Error, Result};
use crate::ffi::call;
use cuda_sys::result as cu;
use cuda_sys::{BorrowedStream, OwnedEvent, OwnedStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A calibration and its event.
pub(crate) struct Cal {
    pub info: Calibration,
    event: OwnedEvent,
}

/// How long a stream's calibration polls for its event before the stream
/// is taken as busy (the reference then serves it). An idle stream's event
/// completes in a few µs (about 7 on an H100).
const POLL: Duration = Duration::from_micros(50);
/// Queries made at least, however long they take (a thread descheduled
/// during the poll still sees an idle stream's event complete: its bracket
/// is then wide, and says so).
const POLL_AT_LEAST: u32 = 64;
/// Brackets tried for the reference; the tightest is kept.
const REFERENCE_ROUNDS: usize = 3;
/// Events created when recording starts.
const PREALLOCATED: usize = 64;

/// The event backend of a sink: the recorder's own stream and the current
/// reference calibration.
pub(crate) struct Events {
    stream: Option<OwnedStream>,
    reference: Mutex<Arc<Cal>>,
}

/// What a sink's drop must release (or leak).
pub(crate) type Leftovers = (Option<OwnedStream>, Option<Arc<Cal>>);

fn timing_event(facts: &DeviceFacts) -> Result<OwnedEvent> {
    // Default flags: a timing event (`elapsed` works), blocking-sync off.
    call("cuEventCreate", || cu::event::create(facts.drv, 0))
}

impl Events {
    /// Creates the recorder's stream and the first reference calibration,
    /// with the device's context current; the pool is `spare` (events of
    /// earlier recorders) topped up to [`PREALLOCATED`].
    pub(crate) fn new(facts: DeviceFacts, spare: Vec<OwnedEvent>) -> Result<(Events, Vec<OwnedEvent>)> {
        let flags = cuda_sys::CUstream_flags::CU_STREAM_NON_BLOCKING.0;
        let stream =
            call("cuStreamCreateWithPriority", || cu::stream::create_with_priority(facts.drv, flags, 0))?;
        let cal = reference(&facts, &stream)?;
        let mut pool = spare;
        while pool.len() < PREALLOCATED {
            pool.push(timing_event(&facts)?);
        }
        Ok((Events { stream: Some(stream), reference: Mutex::new(Arc::new(cal)) }, pool))
    }

    /// The current reference calibration.
    pub(crate) fn reference(&self) -> Arc<Cal> {
        self.reference.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Two timing events: pooled, else new (context current: the funnel
    /// bound it).
    pub(crate) fn pair(&self, sink: &Sink) -> Result<(OwnedEvent, OwnedEvent)> {
        {
            let mut st = sink.lock();
            if st.pool.len() >= 2
                && let (Some(a), Some(b)) = (st.pool.pop(), st.pool.pop())
            {
                return Ok((a, b));
            }
        }
        sink.facts.bind()?;
        Ok((timing_event(&sink.facts)?, timing_event(&sink.facts)?))
    }

    /// Puts events back in the pool.
    pub(crate) fn give_back(&self, sink: &Sink, events: impl IntoIterator<Item = OwnedEvent>) {
        self.give_back_locked(&mut sink.lock(), events);
    }

    /// Puts events back in the pool, its lock held.
    pub(crate) fn give_back_locked(&self, st: &mut State, events: impl IntoIterator<Item = OwnedEvent>) {
        st.pool.extend(events);
    }

    /// A calibration of stream `id` (`raw`, context current), or the
    /// reference when the stream is busy (`cuStreamQuery`, asked first, so
    /// a busy stream costs one query) or its event does not complete within
    /// [`POLL`].
    pub(crate) fn calibrate_stream(&self, sink: &Sink, id: u64, raw: BorrowedStream<'_>) -> Arc<Cal> {
        let bracket = (|| -> Result<Option<Cal>> {
            if !call("cuStreamQuery", || cu::stream::query(raw))? {
                return Ok(None);
            }
            let event = timing_event(&sink.facts)?;
            let t0 = super::now_ns();
            call("cuEventRecord", || cu::event::record(&event, raw))?;
            let deadline = Instant::now() + POLL;
            for n in 1.. {
                if call("cuEventQuery", || cu::event::query(&event))? {
                    let t1 = super::now_ns();
                    return Ok(Some(Cal { info: bracketed(sink.facts.ordinal, id, t0, t1), event }));
                }
                if n >= POLL_AT_LEAST && Instant::now() >= deadline {
                    break;
                }
                std::hint::spin_loop();
            }
            Ok(None)
        })();
        match bracket {
            Ok(Some(cal)) => Arc::new(cal),
            Ok(None) => self.reference(),
            Err(e) => {
                log::debug!("trace: calibrating stream {id}: {e}");
                self.reference()
            }
        }
    }

    /// A new reference calibration (at each take); its record, or `None`
    /// when it failed (the old one stays).
    pub(crate) fn recalibrate(&self, sink: &Sink) -> Option<Calibration> {
        let stream = self.stream.as_ref()?;
        match reference(&sink.facts, stream) {
            Ok(cal) => {
                let info = cal.info;
                *self.reference.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(cal);
                Some(info)
            }
            Err(e) => {
                log::debug!("trace: recalibrating: {e}");
                None
            }
        }
    }

    /// The stream and reference, for the sink's drop.
    pub(crate) fn drain(&mut self) -> Leftovers {
        let cal = self.reference.get_mut().unwrap_or_else(|p| p.into_inner()).clone();
        (self.stream.take(), Some(cal))
    }
}

fn bracketed(device: i32, stream: u64, t0: u64, t1: u64) -> Calibration {
    let t1 = t1.max(t0);
    Calibration { device, stream, host_ns: t0 + (t1 - t0) / 2, uncertainty_ns: t1 - t0 }
}

/// The reference: an event on the recorder's own idle stream, bracketed
/// [`REFERENCE_ROUNDS`] times (record, `cuEventSynchronize`); the tightest
/// bracket is kept.
fn reference(facts: &DeviceFacts, stream: &OwnedStream) -> Result<Cal> {
    let mut best: Option<Cal> = None;
    for _ in 0..REFERENCE_ROUNDS {
        let event = timing_event(facts)?;
        let t0 = super::now_ns();
        call("cuEventRecord", || cu::event::record(&event, stream))?;
        call("cuEventSynchronize", || cu::event::synchronize(&event))?;
        let t1 = super::now_ns();
        let cal = Cal { info: bracketed(facts.ordinal, 0, t0, t1), event };
        if best.as_ref().is_none_or(|b| cal.info.uncertainty_ns < b.info.uncertainty_ns) {
            best = Some(cal);
        }
    }
    best.ok_or_else(|| Error::Internal("no reference calibration round ran".into()))
}

/// The span of an operation whose events are `start` and `end`, read
/// against `cal`: waits for `end` (`cuEventSynchronize`; `start` precedes
/// it on the stream). `None` when the span would fall before the host
/// clock's origin.
///
/// # Errors
/// The driver's errors of the wait and of `cuEventElapsedTime`.
pub(crate) fn resolve(start: &OwnedEvent, end: &OwnedEvent, cal: &Cal) -> Result<Option<(u64, u64)>> {
    call("cuEventSynchronize", || cu::event::synchronize(end))?;
    let a = call("cuEventElapsedTime", || cu::event::elapsed_time(&cal.event, start))?;
    let b = call("cuEventElapsedTime", || cu::event::elapsed_time(&cal.event, end))?;
    let at = |ms: f32| -> Option<u64> {
        let ns = cal.info.host_ns as f64 + f64::from(ms) * 1e6;
        (ns.is_finite() && ns >= 0.0).then(|| ns.round() as u64)
    };
    Ok(match (at(a), at(b)) {
        (Some(s), Some(e)) => Some((s, e.max(s))),
        _ => None,
    })
}
