//! Streams: FIFO queues of device work, and the timeline every tracked
//! operation is placed on.
//!
//! Each owned stream counts its submissions with tickets drawn from its
//! device's counter; a *point* is (stream, ticket). Another stream or the host
//! waits on a point through a *marker*: a sync-only event recorded on the
//! stream covering every ticket so far, cached and reused while it still
//! covers what is asked. Same-stream work needs no event at all.

use crate::device::Device;
use crate::engine::Timeline;
use crate::engine::{self, Held, Kind, NO_USES, Op};
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::scope::{DeviceSynced, StreamSynced};
use cuda_sys::result as cu;
use cuda_sys::{BorrowedStream, CUstream, CUstream_flags};
use std::marker::PhantomData;
use std::sync::Arc;

/// A stream of the device: a FIFO queue of work, non-blocking (it never
/// synchronizes implicitly with the legacy default stream).
///
/// Cheap to clone (a shared handle) and `Send + Sync`: the driver accepts
/// submissions to one stream from any thread, and gpu-sync serializes them
/// per stream so its timeline matches the driver's order. The driver stream
/// is destroyed (`cuStreamDestroy`) when the last handle, and the last buffer
/// use recorded on it, are gone.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let (a, b) = (Stream::new(&device)?, Stream::new(&device)?);
/// let mut x = DeviceBuffer::<u32>::zeroed(&a, 4)?; // written on stream a
/// a.fill_u32(&mut x, 7)?;
/// // Read on stream b: gpu-sync makes b wait for a's write device-side.
/// assert_eq!(b.to_vec(&x)?, [7; 4]);
/// b.synchronize()?; // cuStreamSynchronize: a StreamSynced proof
/// # Ok::<(), gpu_sync::Error>(())
/// ```
///
/// # The methods, by job
/// `Stream`'s methods live beside the types they work on (five `impl`
/// blocks in five files); this is the index.
///
/// | job | methods | file |
/// |---|---|---|
/// | create, inspect, close | [`new`](Stream::new), [`with_priority`](Stream::with_priority), [`device`](Stream::device), [`priority`](Stream::priority), [`id`](Stream::id), [`as_raw`](Stream::as_raw), [`is_capturing`](Stream::is_capturing), [`close`](Stream::close) | `stream.rs` |
/// | wait and order | [`query`](Stream::query), [`synchronize`](Stream::synchronize) (host), [`wait`](Stream::wait) (an event, device-side), [`wait_stream`](Stream::wait_stream) (device-side) | `stream.rs`, `event.rs` |
/// | host functions | [`launch_host_fn`](Stream::launch_host_fn) | `stream.rs` |
/// | copies and fills | [`upload`](Stream::upload), [`upload_range`](Stream::upload_range), [`download`](Stream::download), [`download_range`](Stream::download_range) (pinned, asynchronous); [`upload_pageable`](Stream::upload_pageable), [`download_pageable`](Stream::download_pageable), [`to_vec`](Stream::to_vec) (pageable, synchronous); [`copy`](Stream::copy) (device to device, also across devices); [`fill_bytes`](Stream::fill_bytes), [`fill_u32`](Stream::fill_u32) | `memory/copy.rs` |
/// | kernels | [`Kernel::launch`](crate::Kernel::launch) and [`RawKernel::launch`](crate::RawKernel::launch) take the stream; another library's call through [`launch_foreign`](Stream::launch_foreign) | `launch/` |
/// | graphs | [`capture`](Stream::capture) | `graph.rs` |
/// | events | [`TimingEvent::record`](crate::TimingEvent::record), [`SyncEvent::record`](crate::SyncEvent::record) take the stream | `event.rs` |
#[derive(Clone)]
pub struct Stream {
    pub(crate) inner: Arc<Timeline>,
}

impl Stream {
    /// A new non-blocking stream at the default (least) priority
    /// (`cuStreamCreateWithPriority` with `CU_STREAM_NON_BLOCKING`).
    ///
    /// # Errors
    /// A driver error.
    pub fn new(device: &Device) -> Result<Stream> {
        Self::with_priority(device, device.stream_priority_range().0)
    }

    /// A new non-blocking stream with `priority`, which must lie in
    /// [`Device::stream_priority_range`] (numerically lower is higher
    /// priority; on current GPUs the range is `0` to `-5`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a priority outside the range (it is not
    /// clamped); a driver error.
    pub fn with_priority(device: &Device, priority: i32) -> Result<Stream> {
        let (least, greatest) = device.stream_priority_range();
        let (lo, hi) = (least.min(greatest), least.max(greatest));
        if priority < lo || priority > hi {
            return Err(Error::InvalidArgument(format!(
                "stream priority {priority} is outside the device's range {least} (least) to {greatest} (greatest)"
            )));
        }
        let dev = &device.inner;
        let flags = CUstream_flags::CU_STREAM_NON_BLOCKING.0;
        let raw = dev.call("cuStreamCreateWithPriority", || {
            cu::stream::create_with_priority(dev.drv, flags, priority)
        })?;
        Ok(Stream { inner: Arc::new(Timeline::new(device, Held::new(device, raw), priority)) })
    }

    /// The stream's device.
    pub fn device(&self) -> &Device {
        self.inner.device()
    }

    /// Drops this handle and, if it was the last one (no other handle, and
    /// no buffer use recorded on the stream still pending), destroys the
    /// stream now (`cuStreamDestroy`), reporting a failure instead of logging
    /// it as `Drop` does. Queued work still completes.
    ///
    /// # Errors
    /// The driver error of `cuStreamDestroy` (the stream is then leaked).
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.inner) {
            // The last handle: destroyed once, here; queued work finishes.
            Ok(inner) => inner.close(),
            Err(_shared) => Ok(()),
        }
    }

    /// The priority the stream was created with.
    pub fn priority(&self) -> i32 {
        self.inner.priority()
    }

    /// The raw handle, for interop with foreign code. Work submitted on it
    /// behind gpu-sync's back is not tracked.
    pub fn as_raw(&self) -> CUstream {
        self.inner.raw().as_raw()
    }

    /// A process-unique id of the stream.
    pub fn id(&self) -> u64 {
        self.inner.id()
    }

    /// Whether the stream is capturing a graph ([`Stream::capture`]) — a
    /// hint, read without a lock: another thread may begin or end a capture
    /// on the stream right after it answers. Operations never rely on it:
    /// each decides under the stream's lock (joining the capture, or
    /// returning [`Error::Capturing`]).
    pub fn is_capturing(&self) -> bool {
        self.inner.capture_hint()
    }

    /// Whether all work submitted so far has completed (`cuStreamQuery`),
    /// without blocking. `Some(proof)` when it has.
    ///
    /// # Errors
    /// [`Error::Capturing`] during a capture; a driver error (an asynchronous
    /// failure of earlier work surfaces here).
    pub fn query(&self) -> Result<Option<StreamSynced>> {
        let ticket = self.inner.prepare_host_wait("Stream::query")?;
        let done = call("cuStreamQuery", || cu::stream::query(self.inner.raw()))?;
        Ok(done.then(|| self.proved(ticket)))
    }

    /// Blocks the host until all work submitted so far on this stream has
    /// completed (`cuStreamSynchronize`). The proof covers every point of this
    /// stream submitted before the call.
    ///
    /// # Errors
    /// [`Error::Capturing`] during a capture; a driver error.
    pub fn synchronize(&self) -> Result<StreamSynced> {
        let ticket = self.inner.synchronize("Stream::synchronize")?;
        Ok(self.proved(ticket))
    }

    fn proved(&self, ticket: u64) -> StreamSynced {
        self.inner.prove(ticket);
        StreamSynced { stream: self.inner.id(), device: self.inner.device().ordinal(), ticket }
    }

    /// Makes later work on this stream wait, on the device, for all work
    /// submitted so far on `other` (`cuEventRecord` of a cached marker on
    /// `other`, then `cuStreamWaitEvent`). Never blocks the host.
    ///
    /// # Errors
    /// [`Error::Capturing`] when one stream is capturing and the other is not
    /// part of the same capture; a driver error.
    pub fn wait_stream(&self, other: &Stream) -> Result<()> {
        engine::wait_stream(&self.inner, &other.inner)
    }

    /// Queues `f` to run on a driver thread once all earlier work on this
    /// stream has completed (`cuLaunchHostFunc`); later work waits for it.
    ///
    /// `f` must not call CUDA (the driver forbids it): a gpu-sync call inside
    /// `f` fails with `CUDA_ERROR_NOT_PERMITTED` without reaching the driver.
    /// `f` may own gpu-sync objects: what it drops (buffers, pinned buffers,
    /// streams, events) is released later on an ordinary thread — by the
    /// next tracked operation, pageable copy, or stream or device
    /// synchronization — never on the driver's callback thread. A panic in
    /// `f` is caught and logged: it cannot unwind into the driver.
    ///
    /// # Errors
    /// [`Error::Capturing`] during a capture; a driver error (then `f` is
    /// dropped without running).
    pub fn launch_host_fn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<()> {
        let f: engine::HostFn = Box::new(f);
        let op = Op::new("Stream::launch_host_fn", Kind::HostFn, NO_USES);
        engine::submit(&self.inner, op, |raw| engine::launch_host_fn(raw, f))?;
        Ok(())
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream(#{} on device {})", self.inner.id(), self.inner.device().ordinal())
    }
}

/// The legacy default stream (`CU_STREAM_LEGACY`), for interop with code that
/// submits to it. It synchronizes implicitly with every blocking stream of the
/// context (gpu-sync's own streams are non-blocking and unaffected).
///
/// Tracked work (buffers, launches) goes on [`Stream`]s; this handle offers
/// what interop needs: record an event on it, make it wait for one, and
/// synchronize it.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, Stream, SyncEvent};
/// let device = Device::get(0)?;
/// let legacy = device.legacy_stream();
/// // Another library's work on the legacy stream, then ours after it:
/// let done = SyncEvent::new(&device)?;
/// done.record(&legacy)?;
/// let stream = Stream::new(&device)?;
/// stream.wait(&done)?; // device-side; the host does not block
/// legacy.synchronize()?;
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct LegacyStream {
    pub(crate) device: Device,
}

/// The calling thread's per-thread default stream (`CU_STREAM_PER_THREAD`).
///
/// The handle means "this thread's default stream", so it is neither `Send`
/// nor `Sync`: moved to another thread it would name a different stream.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, Stream, TimingEvent};
/// let device = Device::get(0)?;
/// let mine = device.per_thread_stream(); // this thread's default stream
/// let (start, end) = (TimingEvent::new(&device)?, TimingEvent::new(&device)?);
/// start.record(&mine)?;
/// end.record(&mine)?;
/// mine.synchronize()?;
/// assert!(start.elapsed(&end)? >= std::time::Duration::ZERO);
/// Stream::new(&device)?.wait(&end)?; // a gpu-sync stream ordered after it
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug)]
pub struct PerThreadStream {
    pub(crate) device: Device,
    _not_send: PhantomData<*const ()>,
}

impl Device {
    /// Blocks the host until every stream of this device has finished all
    /// work submitted before the call (`cuCtxSynchronize`) — the widest host
    /// wait, after an event's and a stream's.
    ///
    /// Returns a proof covering every point submitted on any stream of the
    /// device before the call.
    ///
    /// # Errors
    /// [`Error::Capturing`] on a thread that is capturing a graph; a driver
    /// error; [`Error::ContextLost`] if asynchronous work failed with a sticky
    /// error.
    pub fn synchronize(&self) -> Result<DeviceSynced> {
        let ticket = engine::host_wait_device(self)?;
        Ok(DeviceSynced { device: self.ordinal(), ticket })
    }

    /// The legacy default stream, asked for by name.
    pub fn legacy_stream(&self) -> LegacyStream {
        LegacyStream { device: self.clone() }
    }

    /// The calling thread's per-thread default stream, asked for by name.
    pub fn per_thread_stream(&self) -> PerThreadStream {
        PerThreadStream { device: self.clone(), _not_send: PhantomData }
    }
}

macro_rules! default_stream_impl {
    ($ty:ty, $handle:expr, $name:literal) => {
        impl $ty {
            /// The raw handle.
            pub fn as_raw(&self) -> CUstream {
                $handle(self.device.inner.drv).as_raw()
            }

            #[doc = concat!("Blocks the host until all work on the ", $name, " has completed (`cuStreamSynchronize`).")]
            ///
            /// # Errors
            /// A driver error.
            pub fn synchronize(&self) -> Result<()> {
                let dev = &self.device.inner;
                // The special handle is valid in the device's context.
                dev.call("cuStreamSynchronize", || cu::stream::synchronize($handle(dev.drv)))
            }

        }
    };
}
default_stream_impl!(LegacyStream, BorrowedStream::legacy, "legacy default stream");
default_stream_impl!(PerThreadStream, BorrowedStream::per_thread, "per-thread default stream");
