//! Events: timestamps and fences on a stream. A [`TimingEvent`] can measure
//! time between two records; a [`SyncEvent`] (`CU_EVENT_DISABLE_TIMING`) is
//! cheaper and only orders and waits. `elapsed` exists only on the first.

use crate::device::Device;
use crate::engine::EventInner;
use crate::error::{Error, Result};
use crate::scope::EventSynced;
use crate::stream::{LegacyStream, PerThreadStream, Stream};
use cuda_sys::result as cu;
use cuda_sys::{BorrowedStream, CUevent, CUevent_flags, CUresult};
use std::time::Duration;

/// Seals of the public event traits: public traits in a module outside
/// code cannot name, so only this crate implements them.
pub(crate) mod sealed {
    use super::*;

    /// Seal of [`super::AsEvent`].
    pub trait EventSeal {
        /// The event's handle and record state.
        fn event_inner(&self) -> &EventInner;
    }

    /// Seal of [`super::RecordTarget`].
    pub trait RecordSeal {
        /// The raw stream, its device, and the tracked stream if it is one.
        fn target(&self) -> (BorrowedStream<'_>, &Device, Option<&Stream>);
    }
}
pub(crate) use sealed::EventSeal;
use sealed::RecordSeal;

/// The two event types, for functions that take either
/// ([`Stream::wait`]). Sealed.
///
/// Implemented by [`SyncEvent`] and [`TimingEvent`]: [`SyncEvent`]'s
/// example passes one to [`Stream::wait`].
pub trait AsEvent: sealed::EventSeal {}

/// What an event can be recorded on: a [`Stream`], the [`LegacyStream`] or a
/// [`PerThreadStream`]. Sealed.
///
/// [`PerThreadStream`]'s and [`LegacyStream`]'s examples record events on
/// them; [`TimingEvent`]'s on a [`Stream`].
pub trait RecordTarget: sealed::RecordSeal {}

impl RecordSeal for Stream {
    fn target(&self) -> (BorrowedStream<'_>, &Device, Option<&Stream>) {
        (self.inner.raw(), self.device(), Some(self))
    }
}
impl RecordTarget for Stream {}
impl RecordSeal for LegacyStream {
    fn target(&self) -> (BorrowedStream<'_>, &Device, Option<&Stream>) {
        (BorrowedStream::legacy(self.device.inner.drv), &self.device, None)
    }
}
impl RecordTarget for LegacyStream {}
impl RecordSeal for PerThreadStream {
    fn target(&self) -> (BorrowedStream<'_>, &Device, Option<&Stream>) {
        (BorrowedStream::per_thread(self.device.inner.drv), &self.device, None)
    }
}
impl RecordTarget for PerThreadStream {}

macro_rules! event_common {
    ($ty:ident) => {
        impl EventSeal for $ty {
            fn event_inner(&self) -> &EventInner {
                &self.inner
            }
        }
        impl AsEvent for $ty {}

        impl $ty {
            /// Records the event on `stream` (`cuEventRecord`): it completes
            /// when all work submitted there before this call has completed.
            /// Re-recording supersedes the earlier record.
            ///
            /// # Errors
            /// [`Error::DeviceMismatch`] for a stream of another device;
            /// [`Error::Capturing`] on a capturing stream; a driver error.
            pub fn record<S: RecordTarget>(&self, stream: &S) -> Result<()> {
                let (raw, device, tracked) = stream.target();
                self.inner.record(raw, device, tracked.map(|s| &s.inner))
            }

            /// Whether the recorded work has completed (`cuEventQuery`),
            /// without blocking; `Some(proof)` when it has. A never-recorded
            /// event counts as complete and its proof covers nothing.
            ///
            /// # Errors
            /// A driver error (asynchronous failures surface here).
            pub fn query(&self) -> Result<Option<EventSynced>> {
                self.inner.query()
            }

            /// Blocks the host until the recorded work has completed
            /// (`cuEventSynchronize`) — the narrowest host wait. The proof
            /// covers the recorded stream up to the record.
            ///
            /// # Errors
            /// A driver error.
            pub fn synchronize(&self) -> Result<EventSynced> {
                self.inner.synchronize()
            }

            /// The raw handle, for interop.
            pub fn as_raw(&self) -> CUevent {
                self.inner.event().as_raw()
            }

            /// The event's device.
            pub fn device(&self) -> &Device {
                self.inner.device()
            }

            /// Whether the event has been recorded at least once.
            pub fn is_recorded(&self) -> bool {
                self.inner.is_recorded()
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($ty), "(device {})"), self.inner.device().ordinal())
            }
        }
    };
}

/// An event that records a timestamp: [`TimingEvent::elapsed`] measures the
/// device time between two of them (`cuEventCreate` with `CU_EVENT_DEFAULT`,
/// or `CU_EVENT_BLOCKING_SYNC` from [`TimingEvent::blocking`]).
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, Stream, TimingEvent};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let (start, end) = (TimingEvent::new(&device)?, TimingEvent::new(&device)?);
/// let mut buf = DeviceBuffer::<u8>::alloc(&stream, 1 << 20)?;
/// start.record(&stream)?;
/// stream.fill_bytes(&mut buf, 0)?;
/// end.record(&stream)?;
/// end.synchronize()?;
/// println!("memset took {:?} of device time", start.elapsed(&end)?);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct TimingEvent {
    inner: EventInner,
}

/// An event for ordering and waiting only (`CU_EVENT_DISABLE_TIMING`): cheaper
/// to record and wait on than a [`TimingEvent`]; has no `elapsed`.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, Stream, SyncEvent};
/// let device = Device::get(0)?;
/// let (producer, consumer) = (Stream::new(&device)?, Stream::new(&device)?);
/// let ready = SyncEvent::new(&device)?;
/// ready.record(&producer)?; // cuEventRecord
/// consumer.wait(&ready)?; // cuStreamWaitEvent: the host does not block
/// let proof = ready.synchronize()?; // cuEventSynchronize: an EventSynced proof
/// # let _ = proof;
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct SyncEvent {
    inner: EventInner,
}

event_common!(TimingEvent);
event_common!(SyncEvent);

impl TimingEvent {
    /// A timing event whose host waits spin (`CU_EVENT_DEFAULT`).
    ///
    /// # Errors
    /// A driver error.
    pub fn new(device: &Device) -> Result<TimingEvent> {
        Ok(TimingEvent { inner: EventInner::create(device, CUevent_flags::CU_EVENT_DEFAULT.0)? })
    }

    /// A timing event whose host waits block the thread instead of spinning
    /// (`CU_EVENT_BLOCKING_SYNC`).
    ///
    /// # Errors
    /// A driver error.
    pub fn blocking(device: &Device) -> Result<TimingEvent> {
        Ok(TimingEvent { inner: EventInner::create(device, CUevent_flags::CU_EVENT_BLOCKING_SYNC.0)? })
    }

    /// Device time from this event's record to `end`'s
    /// (`cuEventElapsedTime`, resolution about 0.5 µs).
    ///
    /// # Errors
    /// [`Error::EventNotRecorded`] if either was never recorded;
    /// [`Error::DeviceMismatch`] for events of two devices;
    /// [`Error::EventNotComplete`] if either's work has not completed (never a
    /// garbage value); [`Error::InvalidArgument`] if `end` completed before
    /// this one; a driver error.
    pub fn elapsed(&self, end: &TimingEvent) -> Result<Duration> {
        if !self.is_recorded() || !end.is_recorded() {
            return Err(Error::EventNotRecorded);
        }
        if !self.inner.device().same(end.inner.device()) {
            return Err(Error::DeviceMismatch {
                what: "the end event",
                expected: self.inner.device().ordinal(),
                found: end.inner.device().ordinal(),
            });
        }
        if self.query()?.is_none() || end.query()?.is_none() {
            return Err(Error::EventNotComplete);
        }
        let dev = &self.inner.device().inner;
        let r =
            dev.call("cuEventElapsedTime", || cu::event::elapsed_time(self.inner.event(), end.inner.event()));
        let ms = match r {
            Err(Error::Driver { error, .. }) if error.0 == CUresult::CUDA_ERROR_NOT_READY => {
                return Err(Error::EventNotComplete);
            }
            other => other?,
        };
        if ms.is_nan() || ms < 0.0 {
            return Err(Error::InvalidArgument(format!(
                "the end event completed {:.3} ms before the start event",
                -ms
            )));
        }
        Ok(Duration::from_secs_f64(f64::from(ms) / 1e3))
    }
}

impl SyncEvent {
    /// A sync-only event (`CU_EVENT_DISABLE_TIMING`) whose host waits spin.
    ///
    /// # Errors
    /// A driver error.
    pub fn new(device: &Device) -> Result<SyncEvent> {
        Ok(SyncEvent { inner: EventInner::create(device, CUevent_flags::CU_EVENT_DISABLE_TIMING.0)? })
    }

    /// A sync-only event whose host waits block the thread
    /// (`CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC`).
    ///
    /// # Errors
    /// A driver error.
    pub fn blocking(device: &Device) -> Result<SyncEvent> {
        let flags = CUevent_flags::CU_EVENT_DISABLE_TIMING.0 | CUevent_flags::CU_EVENT_BLOCKING_SYNC.0;
        Ok(SyncEvent { inner: EventInner::create(device, flags)? })
    }
}

/// Waits on events: methods of the stream types, defined here, above
/// streams, so that streams need not know events.
impl Stream {
    /// Makes later work on this stream wait, on the device, for the event's
    /// most recent record (`cuStreamWaitEvent`). Never blocks the host. A
    /// never-recorded event is no wait at all.
    ///
    /// # Errors
    /// [`Error::Capturing`] during a capture (use the capture's own streams);
    /// a driver error.
    pub fn wait<E: AsEvent>(&self, event: &E) -> Result<()> {
        event.event_inner().wait_on(&self.inner)
    }
}

macro_rules! default_stream_wait {
    ($ty:ty, $handle:expr, $name:literal) => {
        impl $ty {
            #[doc = concat!("Makes later work on the ", $name, " wait for the event's last record (`cuStreamWaitEvent`).")]
            ///
            /// # Errors
            /// A driver error.
            pub fn wait<E: AsEvent>(&self, event: &E) -> Result<()> {
                // The special handle is valid in the device's context.
                event.event_inner().wait_on_default(&self.device, $handle(self.device.inner.drv))
            }
        }
    };
}
default_stream_wait!(LegacyStream, BorrowedStream::legacy, "legacy default stream");
default_stream_wait!(PerThreadStream, BorrowedStream::per_thread, "per-thread default stream");
