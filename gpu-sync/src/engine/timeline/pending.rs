//! [`Pending`]: the result of asynchronous work, held until a wait that
//! covers the work releases it — its own marker, or a proof (`scope`).

use super::Point;
use super::marker::Marker;
use crate::error::{Error, Result};
use crate::scope::{Proof, WorkPoint};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The result of asynchronous work, held until a wait that covers the work
/// releases it: [`Pending::wait`] (its own event), [`Pending::redeem`] with a
/// proof, or [`Pending::poll`].
///
/// Dropping or forgetting a `Pending` never exposes the value early: dropping
/// drops the value the normal way (a pinned buffer's drop waits for the copy
/// into it first), and forgetting leaks it.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};
/// let device = Device::get(0)?;
/// let (a, b) = (Stream::new(&device)?, Stream::new(&device)?);
/// let data = DeviceBuffer::from_slice(&a, &[5u8; 16])?;
/// let pinned = || PinnedBuffer::<u8>::new(&device, 16, HostAllocFlags::empty());
/// // Its own wait: cuEventSynchronize on an event right after the copy.
/// assert_eq!(a.download(&data, pinned()?)?.wait()?[0], 5);
/// // Or a proof: one stream wait releases everything queued on it before.
/// let (p, q) = (a.download(&data, pinned()?)?, a.download(&data, pinned()?)?);
/// let proof = a.synchronize()?;
/// let (_p, _q) = (p.redeem(&proof).map_err(|e| e.error)?, q.redeem(&proof).map_err(|e| e.error)?);
/// // A proof for stream a does not cover work on stream b: it is handed back.
/// let other = b.download(&data, pinned()?)?;
/// let other = other.redeem(&proof).unwrap_err().pending;
/// assert_eq!(other.wait()?[15], 5);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[must_use = "the value is only available after a wait"]
pub struct Pending<T> {
    value: T,
    point: Point,
    marker: Arc<Marker>,
    covered: u64,
}

/// What [`Pending::poll`] found.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Polled, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let data = DeviceBuffer::from_slice(&stream, &[4u32; 256])?;
/// let mut pending = stream.download(&data, PinnedBuffer::new(&device, 256, HostAllocFlags::empty())?)?;
/// let host = loop {
///     match pending.poll()? {
///         Polled::Ready(host) => break host,
///         Polled::Waiting(p) => pending = p, // do other host work, then ask again
///     }
/// };
/// assert_eq!(host[255], 4);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub enum Polled<T> {
    /// The work completed: here is the value.
    Ready(T),
    /// Not yet: the pending value back.
    Waiting(Pending<T>),
}

/// A proof that does not cover the pending work, with the work handed back.
///
/// [`Pending`]'s example gets one back from a proof of another stream.
pub struct NotCovered<T> {
    /// The pending value, unchanged.
    pub pending: Pending<T>,
    /// Why the proof did not cover it.
    pub error: Error,
}

impl<T> fmt::Debug for NotCovered<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NotCovered({})", self.error)
    }
}
impl<T> fmt::Display for NotCovered<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}
impl<T> std::error::Error for NotCovered<T> {}

impl<T> Pending<T> {
    /// Wraps `value`, released once `point` has completed.
    pub(crate) fn new(value: T, point: Point) -> Result<Pending<T>> {
        let (marker, covered) = point.timeline.marker_covering(point.ticket)?;
        Ok(Pending { value, point, marker, covered })
    }

    /// Where the work sits.
    pub fn work(&self) -> WorkPoint {
        WorkPoint {
            stream: self.point.timeline.id,
            device: self.point.timeline.device.ordinal(),
            ticket: self.point.ticket,
        }
    }

    /// Blocks the host until the work has completed (`cuEventSynchronize` on
    /// an event recorded right after it) and returns the value.
    ///
    /// # Errors
    /// A driver error; the value is then dropped (which waits again, and
    /// leaks it if that fails too).
    pub fn wait(self) -> Result<T> {
        if !self.point.is_complete() {
            self.marker.synchronize()?;
            self.point.timeline.completed.fetch_max(self.covered, Ordering::AcqRel);
        }
        Ok(self.value)
    }

    /// Releases the value with a proof that covers its work, checked in O(1)
    /// and without a driver call.
    ///
    /// # Errors
    /// [`NotCovered`] (holding this `Pending`) when the proof is for another
    /// stream or device, or was taken before the work was submitted.
    pub fn redeem<P: Proof>(self, proof: &P) -> Result<T, NotCovered<T>> {
        let work = self.work();
        if proof.covers(&work) {
            Ok(self.value)
        } else {
            let error = Error::NotCovered { proof: format!("{proof:?}"), work: format!("{work:?}") };
            Err(NotCovered { pending: self, error })
        }
    }

    /// Checks without blocking (`cuEventQuery`): the value if the work has
    /// completed, else this `Pending` back.
    ///
    /// # Errors
    /// A driver error (the value is dropped as in [`Pending::wait`]).
    pub fn poll(self) -> Result<Polled<T>> {
        if self.point.is_complete() || self.marker.query()? {
            self.point.timeline.completed.fetch_max(self.covered, Ordering::AcqRel);
            Ok(Polled::Ready(self.value))
        } else {
            Ok(Polled::Waiting(self))
        }
    }

    /// Whether a host wait already proved the work complete (no driver call).
    pub fn is_known_complete(&self) -> bool {
        self.point.is_complete()
    }
}

impl<T> fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pending({:?})", self.work())
    }
}
