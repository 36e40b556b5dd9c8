//! Wait scopes as types: each host wait returns a proof of what it covers,
//! and a `Pending` value (`engine/timeline/pending.rs`) is released only by a wait
//! that covers its work.
//!
//! Three sizes, smallest first: an event's (`cuEventSynchronize`), a stream's
//! (`cuStreamSynchronize`), a device's (`cuCtxSynchronize`). A proof is a fact
//! about the past ("every ticket up to T on stream S has completed"), so it
//! stays true; checking it against a point is O(1).

use std::fmt;

/// A position of some submitted work: its stream, device and ticket.
///
/// Received from [`Pending::work`](crate::Pending::work) and checked with
/// [`Proof::covers`]: [`StreamSynced`]'s example shows both.
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
///
/// Implemented by [`EventSynced`], [`StreamSynced`] and [`DeviceSynced`]
/// (each has an example); taken by [`Pending::redeem`](crate::Pending::redeem).
pub trait Proof: sealed::Sealed + fmt::Debug {
    /// Whether this wait covers `work`.
    fn covers(&self, work: &WorkPoint) -> bool;
}

/// Proof of an event wait: its stream completed up to the event's record.
/// A never-recorded event's proof covers nothing.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Proof, Stream, SyncEvent};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let data = DeviceBuffer::from_slice(&stream, &[9u8; 4])?;
/// let early = stream.download(&data, PinnedBuffer::new(&device, 4, HostAllocFlags::empty())?)?;
/// let mark = SyncEvent::new(&device)?;
/// mark.record(&stream)?;
/// let late = stream.download(&data, PinnedBuffer::new(&device, 4, HostAllocFlags::empty())?)?;
/// let proof = mark.synchronize()?; // covers the stream up to the record only
/// assert!(proof.covers(&early.work()) && !proof.covers(&late.work()));
/// assert_eq!(early.redeem(&proof).map_err(|e| e.error)?[0], 9);
/// # let _ = late.wait()?;
/// # Ok::<(), gpu_sync::Error>(())
/// ```
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
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};
/// let device = Device::get(0)?;
/// let (a, b) = (Stream::new(&device)?, Stream::new(&device)?);
/// let data = DeviceBuffer::from_slice(&a, &[3u16; 4])?;
/// let on_a = a.download(&data, PinnedBuffer::new(&device, 4, HostAllocFlags::empty())?)?;
/// let on_b = b.download(&data, PinnedBuffer::new(&device, 4, HostAllocFlags::empty())?)?;
/// let proof = device.synchronize()?; // cuCtxSynchronize: every stream of the device
/// let (x, y) = (on_a.redeem(&proof).map_err(|e| e.error)?, on_b.redeem(&proof).map_err(|e| e.error)?);
/// assert_eq!((x[0], y[3]), (3, 3));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
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

impl WorkPoint {
    /// Describes the point for messages.
    pub fn describe(&self) -> String {
        format!("ticket {} of stream #{} on device {}", self.ticket, self.stream, self.device)
    }
}
