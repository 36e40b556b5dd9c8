//! Streams: FIFO queues of device work, and the timeline every tracked
//! operation is placed on.
//!
//! Each owned stream counts its submissions with tickets drawn from its
//! device's counter; a *point* is (stream, ticket). Another stream or the host
//! waits on a point through a *marker*: a sync-only event recorded on the
//! stream covering every ticket so far, cached and reused while it still
//! covers what is asked. Same-stream work needs no event at all.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::graph::CaptureState;
use crate::release::Held;
use crate::scope::StreamSynced;
use cuda_sys::handle::kind::StreamKind;
use cuda_sys::result as cu;
use cuda_sys::{BorrowedStream, CUevent_flags, CUstream, CUstream_flags, OwnedEvent};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

/// A position on a stream's timeline: everything submitted on `stream` up to
/// and including `ticket`.
#[derive(Clone)]
pub(crate) struct Point {
    pub stream: Arc<StreamInner>,
    pub ticket: u64,
}

impl Point {
    /// Whether a host wait already proved this point complete.
    #[inline]
    pub fn is_complete(&self) -> bool {
        self.ticket <= self.stream.completed.load(Ordering::Acquire)
            || self.ticket <= self.stream.device.inner.completed.load(Ordering::Acquire)
    }

    /// Blocks the host until the point is complete (`cuEventSynchronize` on a
    /// marker covering it).
    pub fn host_wait(&self) -> Result<()> {
        if self.is_complete() {
            return Ok(());
        }
        crate::capture::host_fn::refuse("cuEventSynchronize")?;
        let (marker, covered) = self.stream.marker_covering(self.ticket)?;
        marker.synchronize()?;
        self.stream.completed.fetch_max(covered, Ordering::AcqRel);
        Ok(())
    }
}

/// A sync-only event from a stream's pool, recorded on that stream.
///
/// `Send + Sync` from its parts: an event may be waited on and queried from
/// any thread (cuda-sys argues it once for [`OwnedEvent`]). A marker's event
/// is recorded once, before the marker is shared (see `marker_covering`), and
/// goes back to the pool only when the last `Arc<Marker>` drops, so no thread
/// re-records it while another waits.
pub(crate) struct Marker {
    /// Always `Some` until `Drop` hands it back to the pool.
    ev: Option<OwnedEvent>,
    pool: Arc<EventPool>,
}

impl Marker {
    /// The marker's event.
    #[inline]
    pub fn event(&self) -> Result<&OwnedEvent> {
        self.ev.as_ref().ok_or_else(|| Error::InvalidArgument("a marker used after its release".into()))
    }

    /// `cuEventSynchronize` on the marker.
    pub fn synchronize(&self) -> Result<()> {
        self.pool.device.inner.bind()?;
        let ev = self.event()?;
        call("cuEventSynchronize", || cu::event::synchronize(ev))
    }

    /// `cuEventQuery` on the marker: whether its work has completed.
    pub fn query(&self) -> Result<bool> {
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

/// Sync-only events (`CU_EVENT_DISABLE_TIMING`) kept for a stream's markers.
pub(crate) struct EventPool {
    device: Device,
    free: Mutex<Vec<OwnedEvent>>,
}

const POOL_KEEP: usize = 8;

impl EventPool {
    fn take(&self) -> Result<OwnedEvent> {
        if let Some(ev) = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(ev);
        }
        create_event(&self.device, CUevent_flags::CU_EVENT_DISABLE_TIMING.0)
    }

    fn put(&self, ev: OwnedEvent) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < POOL_KEEP {
            free.push(ev);
        } else {
            drop(free);
            crate::release::release_later(&self.device, ev);
        }
    }
}

impl Drop for EventPool {
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|p| p.into_inner()));
        for ev in free {
            crate::release::release_later(&self.device, ev);
        }
    }
}

/// The one way gpu-sync creates events (`cuEventCreate` with `flags`, the
/// device's context current): markers, graph edges and the public event
/// types all come from here.
pub(crate) fn create_event(device: &Device, flags: u32) -> Result<OwnedEvent> {
    let dev = &device.inner;
    dev.bind()?;
    call("cuEventCreate", || cu::event::create(dev.drv, flags))
}

pub(crate) struct StreamState {
    /// Ticket of the last operation submitted on this stream (0: none yet).
    pub last_ticket: u64,
    /// The newest markers and the tickets they cover, oldest first (at most
    /// [`MARKERS_KEEP`]): a wait takes the earliest that covers its point,
    /// so it never waits for work queued after that point when an exact
    /// marker exists (a prefetcher's upload *i* while upload *i + 1* is
    /// queued behind it, for example).
    markers: smallvec::SmallVec<[(Arc<Marker>, u64); MARKERS_KEEP]>,
    /// Device-side waits already made: for stream id, every ticket up to this
    /// one is ordered before any later work here.
    known: Vec<(u64, u64)>,
    /// The graph capture this stream takes part in.
    pub capture: Option<Arc<CaptureState>>,
}

const KNOWN_KEEP: usize = 32;

/// Recent markers kept per stream.
const MARKERS_KEEP: usize = 4;

impl StreamState {
    /// Whether the stream takes part in a graph capture: the check every
    /// submission makes under the stream's lock (the lock-free hint is
    /// `StreamInner::capturing`, set and cleared under the same lock).
    #[inline(always)]
    pub(crate) fn is_capturing(&self) -> bool {
        self.capture.is_some()
    }

    /// [`Error::Capturing`] naming `op` if the stream is capturing.
    #[inline(always)]
    pub(crate) fn refuse_if_capturing(&self, op: &'static str) -> Result<()> {
        if self.is_capturing() { Err(Error::Capturing { op }) } else { Ok(()) }
    }

    fn known_for(&self, stream: u64) -> u64 {
        self.known.iter().find(|(s, _)| *s == stream).map_or(0, |(_, t)| *t)
    }

    /// The earliest kept marker covering `ticket`.
    fn marker_for(&self, ticket: u64) -> Option<(Arc<Marker>, u64)> {
        self.markers.iter().find(|(_, c)| *c >= ticket).map(|(m, c)| (m.clone(), *c))
    }

    /// Whether the newest marker covers everything submitted so far.
    fn tail_marked(&self) -> bool {
        self.markers.last().is_some_and(|(_, c)| *c >= self.last_ticket)
    }

    /// Keeps `marker`, covering `ticket` (the newest), dropping the oldest
    /// beyond [`MARKERS_KEEP`].
    fn keep_marker(&mut self, marker: Arc<Marker>, ticket: u64) {
        if self.markers.len() >= MARKERS_KEEP {
            self.markers.remove(0);
        }
        self.markers.push((marker, ticket));
    }

    /// The oldest kept marker, taken out of the list, when the list is full
    /// and nothing but it holds the marker (no host wait, proof or pending
    /// device wait uses it): its event can be recorded again in place.
    fn recyclable_marker(&mut self) -> Option<Arc<Marker>> {
        if self.markers.len() < MARKERS_KEEP {
            return None;
        }
        let (oldest, _) = self.markers.first_mut()?;
        Arc::get_mut(oldest)?;
        Some(self.markers.remove(0).0)
    }

    pub(crate) fn set_known(&mut self, stream: u64, ticket: u64) {
        if let Some(e) = self.known.iter_mut().find(|(s, _)| *s == stream) {
            e.1 = e.1.max(ticket);
        } else {
            if self.known.len() >= KNOWN_KEEP {
                self.known.remove(0);
            }
            self.known.push((stream, ticket));
        }
    }
}

pub(crate) struct StreamInner {
    /// The driver stream, destroyed (context bound, deferred inside host
    /// functions) when the last handle and the last recorded use are gone.
    pub stream: Held<StreamKind>,
    pub device: Device,
    /// The tracker slab of the device's resources (locked by each tracked
    /// submission on this stream).
    pub slab: Arc<crate::tracker::Slab>,
    pub id: u64,
    pub priority: i32,
    pub state: Mutex<StreamState>,
    /// Every ticket up to this one is known complete (host waits).
    pub completed: AtomicU64,
    /// Mirrors `state.capture.is_some()` for a lock-free fast path.
    pub capturing: AtomicBool,
    pool: Arc<EventPool>,
}

impl StreamInner {
    /// Whether the stream captures, read without its lock: a hint for fast
    /// paths (exact only under the lock, `StreamState::is_capturing`).
    #[inline(always)]
    pub(crate) fn capture_hint(&self) -> bool {
        self.capturing.load(Ordering::Acquire)
    }

    /// The driver stream, borrowed.
    #[inline(always)]
    pub(crate) fn raw(&self) -> BorrowedStream<'_> {
        self.stream.get().as_borrowed()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, StreamState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A marker covering `ticket` (which must already be submitted): the
    /// cached one if it covers it, else a new one recorded now.
    pub(crate) fn marker_covering(&self, ticket: u64) -> Result<(Arc<Marker>, u64)> {
        let mut st = self.lock();
        if let Some(found) = st.marker_for(ticket) {
            return Ok(found);
        }
        st.refuse_if_capturing("a wait on work submitted during the capture")?;
        self.record_marker(&mut st)
    }

    /// Records a marker now, covering every ticket so far, with the state
    /// lock held (so the record's position agrees with `last_ticket`), and
    /// keeps it as the newest. Once the stream keeps [`MARKERS_KEEP`]
    /// markers and nothing but the stream state holds the oldest (no host
    /// wait, proof or pending device wait uses it), that one's event is
    /// recorded again in place: the hot path of a cross-stream handoff then
    /// allocates nothing and leaves the pool alone. That is sound because a
    /// `cuStreamWaitEvent` already issued on the event took the record it saw
    /// at call time, and any other user would hold a clone of the `Arc`.
    fn record_marker(&self, st: &mut StreamState) -> Result<(Arc<Marker>, u64)> {
        let covered = st.last_ticket;
        self.device.inner.bind()?;
        if let Some(m) = st.recyclable_marker() {
            let r = m.event().and_then(|ev| call("cuEventRecord", || cu::event::record(ev, self.raw())));
            // On failure the marker is dropped (its event back to the pool):
            // it no longer covers the point it was kept for.
            r?;
            st.keep_marker(m.clone(), covered);
            return Ok((m, covered));
        }
        let ev = self.pool.take()?;
        let r = call("cuEventRecord", || cu::event::record(&ev, self.raw()));
        let marker = Arc::new(Marker { ev: Some(ev), pool: self.pool.clone() });
        r?;
        st.keep_marker(marker.clone(), covered);
        Ok((marker, covered))
    }

    /// Submits `op` as the next operation of this stream, after making the
    /// stream wait (device-side, `cuStreamWaitEvent`) for every point of
    /// `deps` on other streams that is neither known complete nor already
    /// waited for. Returns `op`'s result and the ticket it got.
    pub(crate) fn submit<R>(
        &self,
        op_name: &'static str,
        deps: &[Point],
        op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    ) -> Result<(R, u64)> {
        let dev = &self.device.inner;
        dev.bind()?;
        let mut st = self.lock_after_waits(op_name, deps)?;
        let r = op(self.raw())?;
        let ticket = dev.next_ticket();
        st.last_ticket = ticket;
        Ok((r, ticket))
    }

    /// Device-side waits for `deps` with no operation after them. The waits
    /// take a ticket like an operation, so a marker covering the stream's
    /// last ticket also covers what the stream waited for.
    pub(crate) fn submit_waits_only(&self, op_name: &'static str, deps: &[Point]) -> Result<()> {
        crate::capture::host_fn::refuse(op_name)?;
        self.device.inner.bind()?;
        let mut st = self.lock_after_waits(op_name, deps)?;
        st.last_ticket = self.device.inner.next_ticket();
        Ok(())
    }

    /// Locks the stream's state after issuing `cuStreamWaitEvent` for every
    /// point of `deps` that needs one (see [`StreamInner::submit`]).
    fn lock_after_waits(&self, op_name: &'static str, deps: &[Point]) -> Result<MutexGuard<'_, StreamState>> {
        let st = self.lock();
        st.refuse_if_capturing(op_name)?;
        if !deps.iter().any(|p| self.needs_wait(&st, p)) {
            return Ok(st);
        }
        // Markers are taken with this stream unlocked: taking one locks the
        // other stream, and two threads doing so in opposite directions must
        // not deadlock.
        drop(st);
        let mut waits: smallvec::SmallVec<[(u64, Arc<Marker>, u64); 4]> = smallvec::SmallVec::new();
        for p in deps {
            if p.stream.id != self.id && !p.is_complete() {
                let (m, c) = p.stream.marker_covering(p.ticket)?;
                waits.push((p.stream.id, m, c));
            }
        }
        // Taking a marker of another device's stream made that device's
        // context current on this thread: this stream's calls need its own.
        self.device.inner.bind()?;
        let mut st = self.lock();
        st.refuse_if_capturing(op_name)?;
        for (sid, m, c) in waits {
            if st.known_for(sid) >= c {
                continue;
            }
            let ev = m.event()?;
            call("cuStreamWaitEvent", || cu::stream::wait_event(self.raw(), ev, 0))?;
            st.set_known(sid, c);
        }
        Ok(st)
    }

    fn needs_wait(&self, st: &StreamState, p: &Point) -> bool {
        p.stream.id != self.id && !p.is_complete() && st.known_for(p.stream.id) < p.ticket
    }

    /// Records a marker at the stream's current tail unless one already
    /// covers it (`cuEventRecord`), so that a later host wait on the last
    /// operation waits for exactly that operation, not for work queued after
    /// it (markers are otherwise recorded lazily, at the tail, when a wait
    /// needs one).
    pub(crate) fn mark_tail(&self) -> Result<()> {
        crate::capture::host_fn::refuse("cuEventRecord")?;
        let mut st = self.lock();
        if st.capture.is_some() {
            return Ok(());
        }
        self.seal_marker(&mut st)
    }

    /// Records a marker covering everything submitted so far (before a
    /// capture starts, so waits on earlier points never need a new record).
    pub(crate) fn seal_marker(&self, st: &mut StreamState) -> Result<()> {
        let covered = st.last_ticket;
        if covered == 0 || st.tail_marked() {
            return Ok(());
        }
        self.record_marker(st).map(drop)
    }
}

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
#[derive(Clone)]
pub struct Stream {
    pub(crate) inner: Arc<StreamInner>,
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
        dev.bind()?;
        let flags = CUstream_flags::CU_STREAM_NON_BLOCKING.0;
        let raw = call("cuStreamCreateWithPriority", || {
            cu::stream::create_with_priority(dev.drv, flags, priority)
        })?;
        let pool = Arc::new(EventPool { device: device.clone(), free: Mutex::new(Vec::new()) });
        Ok(Stream {
            inner: Arc::new(StreamInner {
                stream: Held::new(device, raw),
                device: device.clone(),
                slab: crate::tracker::slab_of(device),
                id: NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed),
                priority,
                state: Mutex::new(StreamState {
                    last_ticket: 0,
                    markers: smallvec::SmallVec::new(),
                    known: Vec::new(),
                    capture: None,
                }),
                completed: AtomicU64::new(0),
                capturing: AtomicBool::new(false),
                pool,
            }),
        })
    }

    /// The stream's device.
    pub fn device(&self) -> &Device {
        &self.inner.device
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
            Ok(inner) => inner.stream.close("cuStreamDestroy"),
            Err(_shared) => Ok(()),
        }
    }

    /// The priority the stream was created with.
    pub fn priority(&self) -> i32 {
        self.inner.priority
    }

    /// The raw handle, for interop with foreign code. Work submitted on it
    /// behind gpu-sync's back is not tracked.
    pub fn as_raw(&self) -> CUstream {
        self.inner.raw().as_raw()
    }

    /// A process-unique id of the stream.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Whether the stream is capturing a graph ([`Stream::capture`]).
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
        let ticket = self.prepare_host_wait("Stream::query")?;
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
        let ticket = self.prepare_host_wait("Stream::synchronize")?;
        call("cuStreamSynchronize", || cu::stream::synchronize(self.inner.raw()))?;
        // Frees that host functions which ran meanwhile had to put off.
        crate::capture::host_fn::drain();
        Ok(self.proved(ticket))
    }

    fn prepare_host_wait(&self, op: &'static str) -> Result<u64> {
        crate::capture::host_fn::refuse(op)?;
        let st = self.inner.lock();
        st.refuse_if_capturing(op)?;
        let ticket = st.last_ticket;
        drop(st);
        self.inner.device.inner.bind()?;
        Ok(ticket)
    }

    fn proved(&self, ticket: u64) -> StreamSynced {
        self.inner.completed.fetch_max(ticket, Ordering::AcqRel);
        StreamSynced { stream: self.inner.id, device: self.inner.device.ordinal(), ticket }
    }

    /// Makes later work on this stream wait, on the device, for all work
    /// submitted so far on `other` (`cuEventRecord` of a cached marker on
    /// `other`, then `cuStreamWaitEvent`). Never blocks the host.
    ///
    /// # Errors
    /// [`Error::Capturing`] when one stream is capturing and the other is not
    /// part of the same capture; a driver error.
    pub fn wait_stream(&self, other: &Stream) -> Result<()> {
        if Arc::ptr_eq(&self.inner, &other.inner) {
            return Ok(());
        }
        if (self.is_capturing() || other.is_capturing())
            && crate::graph::join_in_capture(&self.inner, &other.inner)?
        {
            return Ok(());
        }
        let ticket = other.inner.lock().last_ticket;
        if ticket == 0 {
            return Ok(());
        }
        let dep = Point { stream: other.inner.clone(), ticket };
        self.inner.submit_waits_only("Stream::wait_stream", &[dep])
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
        let f: crate::capture::host_fn::HostFn = Box::new(f);
        self.inner.submit("Stream::launch_host_fn", &[], |raw| crate::capture::host_fn::launch(raw, f))?;
        Ok(())
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream(#{} on device {})", self.inner.id, self.inner.device.ordinal())
    }
}

/// The legacy default stream (`CU_STREAM_LEGACY`), for interop with code that
/// submits to it. It synchronizes implicitly with every blocking stream of the
/// context (gpu-sync's own streams are non-blocking and unaffected).
///
/// Tracked work (buffers, launches) goes on [`Stream`]s; this handle offers
/// what interop needs: record an event on it, make it wait for one, and
/// synchronize it.
#[derive(Clone, Debug)]
pub struct LegacyStream {
    pub(crate) device: Device,
}

/// The calling thread's per-thread default stream (`CU_STREAM_PER_THREAD`).
///
/// The handle means "this thread's default stream", so it is neither `Send`
/// nor `Sync`: moved to another thread it would name a different stream.
#[derive(Debug)]
pub struct PerThreadStream {
    pub(crate) device: Device,
    _not_send: PhantomData<*const ()>,
}

impl Device {
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
                dev.bind()?;
                // The special handle is valid in the current context.
                call("cuStreamSynchronize", || cu::stream::synchronize($handle(dev.drv)))
            }

        }
    };
}
default_stream_impl!(LegacyStream, BorrowedStream::legacy, "legacy default stream");
default_stream_impl!(PerThreadStream, BorrowedStream::per_thread, "per-thread default stream");
