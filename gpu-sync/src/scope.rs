//! Wait scopes as types: each host wait returns a proof of what it covers,
//! and a [`Pending`] value is released only by a wait that covers its work.
//!
//! Three sizes, smallest first: an event's (`cuEventSynchronize`), a stream's
//! (`cuStreamSynchronize`), a device's (`cuCtxSynchronize`). A proof is a fact
//! about the past ("every ticket up to T on stream S has completed"), so it
//! stays true; checking it against a point is O(1).

use crate::error::{Error, Result};
use crate::stream::{Marker, Point};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A position of some submitted work: its stream, device and ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkPoint {
    /// Id of the stream ([`crate::Stream::id`]).
    pub stream: u64,
    /// Device ordinal.
    pub device: i32,
    /// The work's ticket on its device.
    pub ticket: u64,
}

mod sealed {
    pub trait Sealed {}
}

/// What a host wait proved. Sealed: proofs come only from real waits.
pub trait Proof: sealed::Sealed + fmt::Debug {
    /// Whether this wait covers `work`.
    fn covers(&self, work: &WorkPoint) -> bool;
}

/// Proof of an event wait: its stream completed up to the event's record.
/// A never-recorded event's proof covers nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSynced {
    pub(crate) stream: Option<u64>,
    pub(crate) device: i32,
    pub(crate) ticket: u64,
}

/// Proof of a stream wait: the stream completed all work submitted before it.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Proof, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let data = DeviceBuffer::from_slice(&stream, &[1u8; 8])?;
/// let pending = stream.download(&data, PinnedBuffer::new(&device, 8, HostAllocFlags::empty())?)?;
/// let work = pending.work();
/// let proof = stream.synchronize()?; // cuStreamSynchronize
/// assert!(proof.covers(&work)); // O(1): same stream, ticket not past the proof's
/// let later = stream.download(&data, PinnedBuffer::new(&device, 8, HostAllocFlags::empty())?)?;
/// assert!(!proof.covers(&later.work()));
/// # let _ = (pending.redeem(&proof).map_err(|e| e.error)?, later.wait()?);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSynced {
    pub(crate) stream: u64,
    pub(crate) device: i32,
    pub(crate) ticket: u64,
}

/// Proof of a device wait: every stream of the device completed all work
/// submitted before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSynced {
    pub(crate) device: i32,
    pub(crate) ticket: u64,
}

impl sealed::Sealed for EventSynced {}
impl sealed::Sealed for StreamSynced {}
impl sealed::Sealed for DeviceSynced {}

impl Proof for EventSynced {
    fn covers(&self, w: &WorkPoint) -> bool {
        self.stream == Some(w.stream) && self.device == w.device && w.ticket <= self.ticket
    }
}
impl Proof for StreamSynced {
    fn covers(&self, w: &WorkPoint) -> bool {
        self.stream == w.stream && self.device == w.device && w.ticket <= self.ticket
    }
}
impl Proof for DeviceSynced {
    fn covers(&self, w: &WorkPoint) -> bool {
        self.device == w.device && w.ticket <= self.ticket
    }
}

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
pub enum Polled<T> {
    /// The work completed: here is the value.
    Ready(T),
    /// Not yet: the pending value back.
    Waiting(Pending<T>),
}

/// A proof that does not cover the pending work, with the work handed back.
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
        let (marker, covered) = point.stream.marker_covering(point.ticket)?;
        Ok(Pending { value, point, marker, covered })
    }

    /// Where the work sits.
    pub fn work(&self) -> WorkPoint {
        WorkPoint {
            stream: self.point.stream.id,
            device: self.point.stream.device.ordinal(),
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
            self.point.stream.completed.fetch_max(self.covered, Ordering::AcqRel);
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
            self.point.stream.completed.fetch_max(self.covered, Ordering::AcqRel);
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

impl WorkPoint {
    /// Describes the point for messages.
    pub fn describe(&self) -> String {
        format!("ticket {} of stream #{} on device {}", self.ticket, self.stream, self.device)
    }
}
