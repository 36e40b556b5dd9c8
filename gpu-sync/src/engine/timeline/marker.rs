//! Markers: sync-only events recorded on a stream so that another stream or
//! the host can wait for a point of it; the pool they come from; and the one
//! way gpu-sync creates events.

use super::Timeline;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::ffi::call;
use cuda_sys::result as cu;
use cuda_sys::{CUevent_flags, OwnedEvent};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// A sync-only event from a stream's pool, recorded on that stream.
///
/// `Send + Sync` from its parts: an event may be waited on and queried from
/// any thread (cuda-sys argues it once for [`OwnedEvent`]). A marker's event
/// is recorded before the marker is shared (see `Timeline::record_marker`),
/// and goes back to the pool only when the last `Arc<Marker>` drops, so no
/// thread re-records it while another waits.
pub(in crate::engine) struct Marker {
    /// Always `Some` until `Drop` hands it back to the pool.
    ev: Option<OwnedEvent>,
    pool: Arc<EventPool>,
}

impl Marker {
    /// The marker's event.
    #[inline]
    pub(in crate::engine) fn event(&self) -> Result<&OwnedEvent> {
        self.ev.as_ref().ok_or_else(|| Error::Internal("a marker used after its release".into()))
    }

    /// `cuEventSynchronize` on the marker.
    pub(in crate::engine) fn synchronize(&self) -> Result<()> {
        self.pool.device.inner.bind()?;
        let ev = self.event()?;
        call("cuEventSynchronize", || cu::event::synchronize(ev))
    }

    /// `cuEventQuery` on the marker: whether its work has completed.
    pub(in crate::engine) fn query(&self) -> Result<bool> {
        self.pool.device.inner.bind()?;
        let ev = self.event()?;
        call("cuEventQuery", || cu::event::query(ev))
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        if let Some(ev) = self.ev.take() {
            self.pool.put(ev);
        }
    }
}

/// Everything submitted on a stream up to a ticket, held as a marker
/// covering it, not as the stream: host-waitable after the stream's last
/// handle is gone. The driver destroys a stream with work queued at once
/// and lets the work complete; an event recorded there stays valid, and the
/// marker holds the stream's event pool, never its timeline.
pub(crate) struct TailMark {
    marker: Arc<Marker>,
}

impl TailMark {
    /// Whether the work has completed (`cuEventQuery`).
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function; a driver error.
    pub(crate) fn is_complete(&self) -> Result<bool> {
        crate::ffi::refuse("cuEventQuery")?;
        self.marker.query()
    }

    /// Blocks the host until the work has completed (`cuEventSynchronize`).
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function; a driver error.
    pub(crate) fn host_wait(&self) -> Result<()> {
        crate::ffi::refuse("cuEventSynchronize")?;
        self.marker.synchronize()
    }
}

impl Timeline {
    /// A [`TailMark`] covering everything submitted on this stream so far
    /// (a kept marker if one covers it, else one recorded now, under the
    /// book); `None` when nothing was submitted or a host wait proved all of
    /// it complete.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function (before any lock);
    /// [`Error::Capturing`] when a marker would have to be recorded on a
    /// capturing stream; a driver error.
    pub(crate) fn tail_mark(&self) -> Result<Option<TailMark>> {
        crate::ffi::refuse("cuEventRecord")?;
        let ticket = self.lock().stream(self).last_ticket;
        let complete = ticket <= self.completed.load(Ordering::Acquire)
            || ticket <= self.device.inner.completed.load(Ordering::Acquire);
        if complete {
            return Ok(None);
        }
        let (marker, _) = self.marker_covering(ticket)?;
        Ok(Some(TailMark { marker }))
    }
}

/// Sync-only events (`CU_EVENT_DISABLE_TIMING`) kept for a stream's markers.
pub(in crate::engine) struct EventPool {
    device: Device,
    free: Mutex<Vec<OwnedEvent>>,
}

const POOL_KEEP: usize = 8;

impl EventPool {
    /// An empty pool of `device`.
    pub(in crate::engine) fn new(device: &Device) -> Arc<EventPool> {
        Arc::new(EventPool { device: device.clone(), free: Mutex::new(Vec::new()) })
    }

    /// A marker with an event from the pool (or a new one), not yet
    /// recorded.
    pub(in crate::engine) fn marker(self: &Arc<Self>) -> Result<Marker> {
        let ev = match self.free.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            Some(ev) => ev,
            None => create_event(&self.device, CUevent_flags::CU_EVENT_DISABLE_TIMING.0)?,
        };
        Ok(Marker { ev: Some(ev), pool: self.clone() })
    }

    fn put(&self, ev: OwnedEvent) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < POOL_KEEP {
            free.push(ev);
        } else {
            drop(free);
            crate::engine::release::release_later(&self.device, ev);
        }
    }
}

impl Drop for EventPool {
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|p| p.into_inner()));
        for ev in free {
            crate::engine::release::release_later(&self.device, ev);
        }
    }
}

/// The one way gpu-sync creates events (`cuEventCreate` with `flags`, the
/// device's context current): markers, graph edges and the public event
/// types all come from here.
pub(in crate::engine) fn create_event(device: &Device, flags: u32) -> Result<OwnedEvent> {
    let dev = &device.inner;
    dev.bind()?;
    call("cuEventCreate", || cu::event::create(dev.drv, flags))
}
