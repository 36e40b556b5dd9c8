//! The state behind the public event types: the driver event and where it
//! was last recorded, under one lock, so that a re-record never slips
//! between reading where the event was recorded and a wait or proof based
//! on it. Every entry point refuses inside a host function before taking
//! that lock.

use super::{Point, Timeline};
use crate::device::Device;
use crate::engine::release::Held;
use crate::engine::{Kind, NO_USES, Op};
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::scope::EventSynced;
use cuda_sys::handle::kind::EventKind;
use cuda_sys::result as cu;
use cuda_sys::{BorrowedStream, OwnedEvent};
use std::sync::{Arc, Mutex, MutexGuard};

/// Where an event was last recorded.
struct Recorded {
    /// The stream point it covers; `None` on a default stream (untracked).
    point: Option<Point>,
    /// Counts the event's records, so a host wait made without the lock can
    /// tell whether the record it waited for is still the latest.
    generation: u64,
}

/// An event's handle and record state (reachable only inside the crate).
///
/// `Send + Sync` from its parts (cuda-sys argues the event's). The event is
/// recorded, queried, synchronized and waited on with the `record` lock
/// held (a host wait releases it while it blocks). `TimingEvent::elapsed`
/// reads two events without that lock: a concurrent re-record can only make
/// the driver report another interval or `CUDA_ERROR_NOT_READY` (an error),
/// never touch memory.
pub struct EventInner {
    ev: Held<EventKind>,
    device: Device,
    record: Mutex<Option<Recorded>>,
}

impl EventInner {
    /// A new event of `device` with `flags` (`cuEventCreate`).
    ///
    /// # Errors
    /// A driver error.
    pub(crate) fn create(device: &Device, flags: u32) -> Result<EventInner> {
        let ev = super::marker::create_event(device, flags)?;
        Ok(EventInner { ev: Held::new(device, ev), device: device.clone(), record: Mutex::new(None) })
    }

    /// The driver event.
    #[inline]
    pub(crate) fn event(&self) -> &OwnedEvent {
        self.ev.get()
    }

    /// The event's device.
    pub(crate) fn device(&self) -> &Device {
        &self.device
    }

    /// Whether the event has been recorded at least once.
    pub(crate) fn is_recorded(&self) -> bool {
        self.lock_record().is_some()
    }

    fn lock_record(&self) -> MutexGuard<'_, Option<Recorded>> {
        self.record.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the event on `raw`, a stream of `device`: `tracked` when it
    /// is a gpu-sync stream (the record then covers its last ticket, under
    /// its book), else a default stream (untracked).
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function (before any lock);
    /// [`Error::DeviceMismatch`]; [`Error::Capturing`]; a driver error.
    pub(crate) fn record(
        &self,
        raw: BorrowedStream<'_>,
        device: &Device,
        tracked: Option<&Arc<Timeline>>,
    ) -> Result<()> {
        crate::ffi::refuse("cuEventRecord")?;
        let mut rec = self.lock_record();
        if !device.same(&self.device) {
            return Err(Error::DeviceMismatch {
                what: "the event",
                expected: device.ordinal(),
                found: self.device.ordinal(),
            });
        }
        let point = match tracked {
            Some(s) => Some(s.record_event(self.event())?),
            None => {
                // A default-stream handle is valid in the device's context.
                self.device.inner.call("cuEventRecord", || cu::event::record(self.event(), raw))?;
                None
            }
        };
        let generation = rec.as_ref().map_or(0, |r| r.generation).wrapping_add(1);
        *rec = Some(Recorded { point, generation });
        Ok(())
    }

    fn proof(&self, rec: &Option<Recorded>) -> EventSynced {
        match rec.as_ref().and_then(|r| r.point.as_ref()) {
            Some(p) => {
                p.prove();
                EventSynced { stream: Some(p.stream_id()), device: self.device.ordinal(), ticket: p.ticket() }
            }
            None => EventSynced { stream: None, device: self.device.ordinal(), ticket: 0 },
        }
    }

    /// `cuEventQuery`: `Some(proof)` when the recorded work has completed.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function; a driver error.
    pub(crate) fn query(&self) -> Result<Option<EventSynced>> {
        crate::ffi::refuse("cuEventQuery")?;
        let rec = self.lock_record();
        let done = self.device.inner.call("cuEventQuery", || cu::event::query(self.event()))?;
        Ok(done.then(|| self.proof(&rec)))
    }

    /// `cuEventSynchronize`, without holding the record lock while it waits
    /// (a wait on the event by another thread, or a host function, must not
    /// queue behind it). If the event was re-recorded meanwhile, which
    /// record the wait covered is unknown, so it waits again.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function; a driver error.
    pub(crate) fn synchronize(&self) -> Result<EventSynced> {
        crate::ffi::refuse("cuEventSynchronize")?;
        let generation = |r: &Option<Recorded>| r.as_ref().map(|r| r.generation);
        loop {
            let before = generation(&self.lock_record());
            self.device.inner.call("cuEventSynchronize", || cu::event::synchronize(self.event()))?;
            let rec = self.lock_record();
            if generation(&rec) == before {
                let proof = self.proof(&rec);
                drop(rec);
                crate::engine::drain();
                return Ok(proof);
            }
        }
    }

    /// Makes stream `s` wait, device-side, for the event's latest record
    /// (`Stream::wait`) through the one funnel (`engine::submit`,
    /// `Kind::WaitEvent`), the record lock held so no re-record slips
    /// between reading its point and the wait. The funnel's refusal is made
    /// once more before that lock, which a host function must never wait
    /// for. The deferred work the funnel drains runs under the record lock:
    /// it frees memory and releases handles (books, markers, driver calls),
    /// never taking a user event's record lock.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function (before any lock);
    /// [`Error::Capturing`]; a driver error.
    pub(crate) fn wait_on(&self, s: &Arc<Timeline>) -> Result<()> {
        crate::ffi::refuse("Stream::wait")?;
        let rec = self.lock_record();
        let point = rec.as_ref().and_then(|r| r.point.as_ref());
        let op = Op::new("Stream::wait", Kind::WaitEvent(point), NO_USES);
        let ev = self.event();
        crate::engine::submit(s, op, |raw| call("cuStreamWaitEvent", || cu::stream::wait_event(raw, ev, 0)))
            .map(drop)
    }

    /// Makes a default stream (`raw`, of `device`) wait for the event's
    /// latest record (untracked interop).
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function; a driver error.
    pub(crate) fn wait_on_default(&self, device: &Device, raw: BorrowedStream<'_>) -> Result<()> {
        crate::ffi::refuse("cuStreamWaitEvent")?;
        let _record = self.lock_record();
        device.inner.call("cuStreamWaitEvent", || cu::stream::wait_event(raw, self.event(), 0))
    }
}
