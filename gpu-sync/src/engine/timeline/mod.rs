//! The timeline: where every submitted operation sits, and how other
//! streams and the host wait for it. The bottom of gpu-sync's tracking.
//!
//! - [`Timeline`]: one per stream — the driver stream, its id, what host
//!   waits proved complete, its marker pool, and a slot in its device's
//!   book;
//! - [`Point`]: (timeline, ticket), a position of submitted work. Each
//!   submission takes the next ticket of its device;
//! - `marker`: sync-only events recorded on a stream covering every ticket
//!   so far, kept and reused while they still cover what is asked, and the
//!   one way gpu-sync creates events;
//! - `book`: the per-device lock over the trackers of the device's
//!   resources and the states of its streams (last ticket, markers, device
//!   waits already made, capture);
//! - `conflicts`: the conflict rules, once.
//!
//! Same-stream work needs no event at all: the stream's FIFO orders it.

pub(crate) mod book;
pub(crate) mod conflicts;
pub(crate) mod event;
pub(crate) mod marker;
pub(crate) mod pending;

use crate::device::Device;
use crate::engine::release::Held;
use crate::error::{Error, Result};
use crate::ffi::call;
use book::{BookList, BookSet, DeviceBook, book_in};
use cuda_sys::BorrowedStream;
use cuda_sys::handle::kind::StreamKind;
use cuda_sys::result as cu;
use marker::{EventPool, Marker};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A position on a stream's timeline: everything submitted on `timeline` up
/// to and including `ticket`.
#[derive(Clone)]
pub(crate) struct Point {
    pub(in crate::engine) timeline: Arc<Timeline>,
    pub(in crate::engine) ticket: u64,
}

impl Point {
    /// The point `ticket` of `timeline` (a ticket it drew).
    #[inline]
    pub(crate) fn new(timeline: Arc<Timeline>, ticket: u64) -> Point {
        Point { timeline, ticket }
    }

    /// The stream's id.
    #[inline]
    pub(crate) fn stream_id(&self) -> u64 {
        self.timeline.id
    }

    /// The ticket.
    #[inline]
    pub(crate) fn ticket(&self) -> u64 {
        self.ticket
    }

    /// Notes that a host wait proved this point complete.
    #[inline]
    pub(crate) fn prove(&self) {
        self.timeline.prove(self.ticket);
    }

    /// Whether a host wait already proved this point complete.
    #[inline]
    pub fn is_complete(&self) -> bool {
        self.ticket <= self.timeline.completed.load(Ordering::Acquire)
            || self.ticket <= self.timeline.device.inner.completed.load(Ordering::Acquire)
    }

    /// Blocks the host until the point is complete (`cuEventSynchronize` on a
    /// marker covering it).
    pub fn host_wait(&self) -> Result<()> {
        if self.is_complete() {
            return Ok(());
        }
        crate::ffi::refuse("cuEventSynchronize")?;
        let (marker, covered) = self.timeline.marker_covering(self.ticket)?;
        marker.synchronize()?;
        self.timeline.completed.fetch_max(covered, Ordering::AcqRel);
        Ok(())
    }
}

/// The state of a stream, kept in its device's book.
#[derive(Default)]
pub(crate) struct StreamState {
    /// Ticket of the last operation submitted on this stream (0: none yet).
    pub(in crate::engine) last_ticket: u64,
    /// The newest markers and the tickets they cover (at most
    /// [`MARKERS_KEEP`]): a wait takes the earliest that covers its point,
    /// so it never waits for work queued after that point when an exact
    /// marker exists (a prefetcher's upload *i* while upload *i + 1* is
    /// queued behind it, for example). A ring: nothing moves when the
    /// oldest is recycled as the newest.
    markers: MarkerRing,
    /// Device-side waits already made: for stream id, every ticket up to this
    /// one is ordered before any later work here.
    known: Vec<(u64, u64)>,
    /// The graph capture this stream takes part in.
    pub(in crate::engine) capture: Option<Arc<crate::engine::flavor::captured::CaptureState>>,
}

const KNOWN_KEEP: usize = 32;

/// Recent markers kept per stream (a power of two: ring slots wrap with a
/// mask).
const MARKERS_KEEP: usize = 4;

/// A stream's kept markers, each with the ticket it covers: a ring of
/// [`MARKERS_KEEP`] slots, `len` of them filled from `head` (the oldest)
/// on. Covers grow from oldest to newest (each marker is recorded at the
/// stream's tail, after the one before it).
#[derive(Default)]
struct MarkerRing {
    slots: [Option<(Arc<Marker>, u64)>; MARKERS_KEEP],
    /// The slot of the oldest marker.
    head: usize,
    /// How many slots are filled.
    len: usize,
}

const _: () = assert!(MARKERS_KEEP.is_power_of_two());

impl MarkerRing {
    /// The slot of the `i`-th oldest marker (masked: never out of bounds,
    /// so no bounds check is made).
    #[inline(always)]
    fn slot(&self, i: usize) -> usize {
        (self.head + i) & (MARKERS_KEEP - 1)
    }

    /// The marker in `slot` and the ticket it covers (`None`: an empty
    /// slot).
    #[inline(always)]
    fn get(&self, slot: usize) -> Option<(&Arc<Marker>, u64)> {
        self.slots[slot & (MARKERS_KEEP - 1)].as_ref().map(|(m, c)| (m, *c))
    }

    /// The slot of the earliest marker covering `ticket`. The newest is
    /// looked at first: covers grow towards it, so when it does not cover
    /// `ticket` (a handoff's hot path: the point is newer than every
    /// marker) none does, and nothing else is read.
    #[inline(always)]
    fn earliest_covering(&self, ticket: u64) -> Option<usize> {
        if self.newest().is_none_or(|(_, c)| c < ticket) {
            return None;
        }
        (0..self.len)
            .map(|i| self.slot(i))
            .find(|&k| self.slots[k].as_ref().is_some_and(|(_, c)| *c >= ticket))
    }

    /// The newest marker and the ticket it covers.
    #[inline(always)]
    fn newest(&self) -> Option<(&Arc<Marker>, u64)> {
        if self.len == 0 { None } else { self.get(self.slot(self.len - 1)) }
    }

    /// The oldest marker, when every slot is filled.
    #[inline(always)]
    fn oldest_if_full(&self) -> Option<&Arc<Marker>> {
        if self.len < MARKERS_KEEP { None } else { self.slots[self.slot(0)].as_ref().map(|(m, _)| m) }
    }

    /// Keeps `marker`, covering `ticket`, as the newest, dropping the oldest
    /// when every slot is filled; returns its slot.
    fn push(&mut self, marker: Arc<Marker>, ticket: u64) -> usize {
        if self.len == MARKERS_KEEP {
            let k = self.slot(0);
            self.slots[k] = Some((marker, ticket));
            self.head = self.slot(1);
            k
        } else {
            let k = self.slot(self.len);
            self.slots[k] = Some((marker, ticket));
            self.len += 1;
            k
        }
    }

    /// The oldest marker, re-recorded to cover `ticket`, becomes the newest
    /// (the ring is full): only the head moves. Returns its slot.
    #[inline(always)]
    fn recycle_oldest(&mut self, ticket: u64) -> usize {
        let k = self.slot(0);
        if let Some((_, c)) = &mut self.slots[k] {
            *c = ticket;
        }
        self.head = self.slot(1);
        k
    }

    /// Drops the oldest marker (its event back to the pool).
    fn drop_oldest(&mut self) {
        if self.len > 0 {
            let k = self.slot(0);
            self.slots[k] = None;
            self.head = self.slot(1);
            self.len -= 1;
        }
    }
}

impl StreamState {
    /// The index of stream `stream`'s entry among the waits made here.
    #[inline(always)]
    fn known_entry(&self, stream: u64) -> Option<usize> {
        self.known.iter().position(|(s, _)| *s == stream)
    }

    #[inline(always)]
    pub(in crate::engine) fn known_for(&self, stream: u64) -> u64 {
        self.known.iter().find(|(s, _)| *s == stream).map_or(0, |(_, t)| *t)
    }

    /// The slot of the earliest kept marker covering `ticket`.
    #[inline(always)]
    fn marker_for(&self, ticket: u64) -> Option<usize> {
        self.markers.earliest_covering(ticket)
    }

    /// Whether the newest marker covers everything submitted so far.
    fn tail_marked(&self) -> bool {
        self.markers.newest().is_some_and(|(_, c)| c >= self.last_ticket)
    }

    /// The oldest marker, if the ring is full and nothing but it holds that
    /// marker (no host wait, proof or pending device wait uses it): its
    /// event can then be recorded again in place.
    ///
    /// A count of one is proof enough, read without a read-modify-write:
    /// kept markers are cloned only under the book lock (held here), nothing
    /// makes a `Weak` of one, and other holders only drop theirs; the fence
    /// orders their last use (a wait on the event) before the re-record.
    #[inline(always)]
    fn oldest_recyclable(&self) -> Option<&Arc<Marker>> {
        let m = self.markers.oldest_if_full().filter(|m| Arc::strong_count(m) == 1)?;
        std::sync::atomic::fence(Ordering::Acquire);
        Some(m)
    }

    /// Notes a device-side wait made here for every ticket up to `ticket`
    /// of stream `stream`.
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

static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

/// The timeline of one stream.
///
/// `repr(C)`, the fields a submission reads first: they share one cache
/// line, which a real driver's launch path has evicted by the next launch.
#[repr(C)]
pub(crate) struct Timeline {
    /// The driver stream, destroyed (context bound, deferred inside host
    /// functions) when the last handle and the last recorded use are gone.
    pub(in crate::engine) stream: Held<StreamKind>,
    /// The book of the device: this stream's state, and the trackers of the
    /// device's resources.
    pub(in crate::engine) book: Arc<DeviceBook>,
    pub(in crate::engine) id: u64,
    /// This stream's slot in the book.
    pub(in crate::engine) slot: u32,
    /// Mirrors `StreamState::capture.is_some()`: set and cleared under the
    /// book lock, so exact under it ([`Timeline::is_capturing`]) and a
    /// lock-free hint without it ([`Timeline::capture_hint`]).
    pub(in crate::engine) capturing: AtomicBool,
    /// Every ticket up to this one is known complete (host waits).
    pub(in crate::engine) completed: AtomicU64,
    pub(in crate::engine) device: Device,
    pub(in crate::engine) priority: i32,
    pool: Arc<EventPool>,
    /// Held by a blocking operation (a pageable copy) across its driver
    /// call, which it makes without the book, and by `Stream::capture`
    /// while it begins a capture: a capture never begins on the stream
    /// under a blocking call (which would capture a host-visible copy).
    /// Lock order: this, then the book. Never taken inside a host function
    /// (both refuse first).
    pub(in crate::engine) blocking: std::sync::Mutex<()>,
    _retire: Retire,
}

impl Timeline {
    /// The timeline of a new driver stream `stream` of `device`.
    pub(crate) fn new(device: &Device, stream: Held<StreamKind>, priority: i32) -> Timeline {
        let book = book::book_of(device);
        let slot = book.new_stream();
        Timeline {
            stream,
            device: device.clone(),
            book: book.clone(),
            slot,
            id: NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed),
            priority,
            completed: AtomicU64::new(0),
            capturing: AtomicBool::new(false),
            pool: EventPool::new(device),
            blocking: std::sync::Mutex::new(()),
            _retire: Retire { book: book.clone(), slot },
        }
    }

    /// The stream's process-unique id.
    #[inline(always)]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The stream's device.
    #[inline(always)]
    pub(crate) fn device(&self) -> &Device {
        &self.device
    }

    /// The priority the stream was created with.
    pub(crate) fn priority(&self) -> i32 {
        self.priority
    }

    /// Destroys the driver stream now (`cuStreamDestroy`, context bound),
    /// the timeline being the last of its handles; queued work still
    /// completes.
    ///
    /// # Errors
    /// As `Held::close`.
    pub(crate) fn close(self) -> Result<()> {
        let Timeline { stream, .. } = self;
        stream.close("cuStreamDestroy")
    }

    /// Notes that a host wait proved every ticket up to `ticket` of this
    /// stream complete.
    #[inline]
    pub(crate) fn prove(&self, ticket: u64) {
        self.completed.fetch_max(ticket, Ordering::AcqRel);
    }

    /// The last ticket submitted on this stream (0: none), read under the
    /// book lock.
    pub(crate) fn last_ticket(&self) -> u64 {
        self.lock().stream(self).last_ticket
    }

    /// Records `ev` on this stream (`cuEventRecord`) under the book lock, so
    /// the record's position agrees with the last ticket; returns the point
    /// it covers. Refused inside a host function (before any lock) and on a
    /// capturing stream.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED`; [`Error::Capturing`]; a driver error.
    pub(crate) fn record_event(self: &Arc<Self>, ev: &cuda_sys::OwnedEvent) -> Result<Point> {
        crate::ffi::refuse("cuEventRecord")?;
        self.device.inner.bind()?;
        let mut book = self.lock();
        self.refuse_if_capturing("Event::record")?;
        let st = book.stream(self);
        call("cuEventRecord", || cu::event::record(ev, self.raw()))?;
        Ok(Point { timeline: self.clone(), ticket: st.last_ticket })
    }

    /// The flavor of `Kind::WaitEvent` (`engine::submit` made the guards
    /// before any lock): `call` makes this stream wait, device-side, for a
    /// user event's latest record (`cuStreamWaitEvent`), which covers
    /// `recorded` if it is a point of a tracked stream; the wait takes a
    /// ticket, so markers covering it cover the event, and the stream then
    /// counts `recorded` as waited for. The caller holds the event's record
    /// lock. Refused on a capturing stream.
    ///
    /// # Errors
    /// [`Error::Capturing`]; `call`'s error.
    pub(in crate::engine) fn submit_event_wait<R>(
        &self,
        op_name: &'static str,
        recorded: Option<&Point>,
        call: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    ) -> Result<(R, u64)> {
        self.device.inner.bind()?;
        let mut book = self.lock();
        self.refuse_if_capturing(op_name)?;
        let st = book.stream(self);
        let r = call(self.raw())?;
        if let Some(p) = recorded
            && p.timeline.id != self.id
        {
            st.set_known(p.timeline.id, p.ticket);
        }
        let ticket = self.draw_ticket(st);
        Ok((r, ticket))
    }

    /// Draws the next ticket of the device for an operation on this stream
    /// whose driver call has returned, and makes it the stream's last: the
    /// one place tickets are drawn. `st` is this stream's state, so the
    /// caller holds the device's book, which orders every draw (see
    /// `DeviceInner::next_ticket`).
    #[inline(always)]
    pub(in crate::engine) fn draw_ticket(&self, st: &mut StreamState) -> u64 {
        let ticket = self.device.inner.next_ticket();
        st.last_ticket = ticket;
        ticket
    }

    /// Whether the stream captures, read without its lock: a hint for fast
    /// paths (exact only under the book lock, [`Timeline::is_capturing`]).
    #[inline(always)]
    pub(crate) fn capture_hint(&self) -> bool {
        self.capturing.load(Ordering::Acquire)
    }

    /// Whether the stream takes part in a graph capture: the one exact
    /// answer, for callers that hold its device's book (every submission
    /// does), under which the flag is set and cleared together with the
    /// stream state's capture. Reads the timeline, not the stream state: one
    /// cache line fewer on the hot path. Without the book,
    /// [`Timeline::capture_hint`].
    #[inline(always)]
    pub(crate) fn is_capturing(&self) -> bool {
        self.capturing.load(Ordering::Relaxed)
    }

    /// [`Error::Capturing`] naming `op` if the stream captures (exact: the
    /// caller holds the book; see [`Timeline::is_capturing`]).
    #[inline(always)]
    pub(crate) fn refuse_if_capturing(&self, op: &'static str) -> Result<()> {
        if self.is_capturing() { Err(Error::Capturing { op }) } else { Ok(()) }
    }

    /// The driver stream, borrowed.
    #[inline(always)]
    pub(crate) fn raw(&self) -> BorrowedStream<'_> {
        self.stream.get().as_borrowed()
    }

    /// Excludes blocking operations and capture begins on this stream (see
    /// [`Timeline::blocking`]).
    #[inline]
    pub(crate) fn lock_blocking(&self) -> std::sync::MutexGuard<'_, ()> {
        self.blocking.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks the stream's device book (this stream's state is
    /// `book.stream(self)`).
    #[inline(always)]
    pub(crate) fn lock(&self) -> book::BookGuard<'_> {
        self.book.lock()
    }

    /// A marker covering `ticket` (which must already be submitted): the
    /// kept one if it covers it, else a new one recorded now.
    pub(crate) fn marker_covering(&self, ticket: u64) -> Result<(Arc<Marker>, u64)> {
        let mut book = self.lock();
        let st = book.stream(self);
        let k = self.cover_in(st, ticket)?;
        let (m, c) = st.markers.get(k).ok_or_else(empty_slot)?;
        Ok((m.clone(), c))
    }

    /// Makes sure a kept marker covers `ticket`, with the book locked (`st`
    /// is this stream's state): the slot of the earliest that does, recorded
    /// now if none did.
    #[inline]
    fn cover_in(&self, st: &mut StreamState, ticket: u64) -> Result<usize> {
        if let Some(i) = st.marker_for(ticket) {
            return Ok(i);
        }
        self.refuse_if_capturing("a wait on work submitted during the capture")?;
        self.record_marker(st)
    }

    /// Records a marker now, covering every ticket so far, with the book
    /// locked (so the record's position agrees with `last_ticket`), and
    /// keeps it as the newest. Once the stream keeps [`MARKERS_KEEP`]
    /// markers and nothing but the stream state holds the oldest (no host
    /// wait, proof or pending device wait uses it), that one's event is
    /// recorded again in place: the hot path of a cross-stream handoff then
    /// allocates nothing and leaves the pool alone. That is sound because a
    /// `cuStreamWaitEvent` already issued on the event took the record it saw
    /// at call time, and any other user would hold a clone of the `Arc`.
    ///
    /// Returns the new marker's slot in `st.markers` (the newest).
    fn record_marker(&self, st: &mut StreamState) -> Result<usize> {
        let covered = st.last_ticket;
        self.device.inner.bind()?;
        if let Some(m) = st.oldest_recyclable() {
            let r = m.event().and_then(|ev| call("cuEventRecord", || cu::event::record(ev, self.raw())));
            if let Err(e) = r {
                // The marker no longer covers the point it was kept for:
                // dropped (its event back to the pool).
                st.markers.drop_oldest();
                return Err(e);
            }
            // Oldest becomes newest, in place: the ring's head moves, no
            // marker does and no reference count is touched.
            return Ok(st.markers.recycle_oldest(covered));
        }
        let marker = self.pool.marker()?;
        marker.event().and_then(|ev| call("cuEventRecord", || cu::event::record(ev, self.raw())))?;
        Ok(st.markers.push(Arc::new(marker), covered))
    }

    /// Records a marker covering everything submitted so far, unless one
    /// already does (before a capture starts, so waits on earlier points
    /// never need a new record; after a prefetcher's upload, so a wait on it
    /// waits for exactly that upload).
    pub(crate) fn seal_marker(&self, st: &mut StreamState) -> Result<()> {
        if st.last_ticket == 0 || st.tail_marked() {
            return Ok(());
        }
        self.record_marker(st).map(drop)
    }

    /// Makes this stream wait (device-side, `cuStreamWaitEvent` on a marker
    /// of the other stream, recorded now if none covers it) for `p`, a point
    /// of a stream of the same device, unless it is complete or already
    /// waited for; `streams` are the device's stream states (book locked).
    /// Clones no reference: the marker is used in place.
    #[inline]
    pub(crate) fn wait_same_device(&self, streams: &mut book::Streams, p: &Point) -> Result<()> {
        if p.timeline.id == self.id || p.is_complete() {
            return Ok(());
        }
        // The entry of `p`'s stream among the waits made here, found once:
        // read now, updated after the wait (which changes only the other
        // stream's state).
        let entry = streams.get(self).known_entry(p.timeline.id);
        let st = streams.get(self);
        if entry.and_then(|k| st.known.get(k)).map_or(0, |(_, t)| *t) >= p.ticket {
            return Ok(());
        }
        let covered = self.wait_on_marker(streams.get(&p.timeline), p)?;
        let st = streams.get(self);
        match entry.and_then(|k| st.known.get_mut(k)) {
            Some(e) => e.1 = e.1.max(covered),
            None => st.set_known(p.timeline.id, covered),
        }
        Ok(())
    }

    /// The wait itself, given the state of `p`'s stream (its book locked):
    /// a kept marker covering `p` (recorded now if none does), then
    /// `cuStreamWaitEvent` on this stream with this stream's context current
    /// (recording on another device's stream made that one current).
    /// Returns the ticket the marker covers.
    #[inline]
    fn wait_on_marker(&self, other: &mut StreamState, p: &Point) -> Result<u64> {
        let k = p.timeline.cover_in(other, p.ticket)?;
        let (m, covered) = other.markers.get(k).ok_or_else(empty_slot)?;
        let ev = m.event()?;
        // A record just made on another device's stream made that device's
        // context current; on this device it is current already.
        if !Arc::ptr_eq(&p.timeline.device.inner, &self.device.inner) {
            self.device.inner.bind()?;
        }
        call("cuStreamWaitEvent", || cu::stream::wait_event(self.raw(), ev, 0))?;
        Ok(covered)
    }

    /// Records a marker at the stream's current tail unless one already
    /// covers it (`cuEventRecord`), so that a later host wait on the last
    /// operation waits for exactly that operation, not for work queued after
    /// it (markers are otherwise recorded lazily, at the tail, when a wait
    /// needs one).
    pub(crate) fn mark_tail(&self) -> Result<()> {
        crate::ffi::refuse("cuEventRecord")?;
        let mut book = self.lock();
        if self.is_capturing() {
            return Ok(());
        }
        self.seal_marker(book.stream(self))
    }

    /// The last ticket submitted, read under the book lock, with the
    /// stream's context made current: what a host wait beginning now covers.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function; [`Error::Capturing`]
    /// during a capture (naming `op`).
    pub(crate) fn prepare_host_wait(&self, op: &'static str) -> Result<u64> {
        crate::ffi::refuse(op)?;
        let ticket = {
            let mut book = self.lock();
            self.refuse_if_capturing(op)?;
            book.stream(self).last_ticket
        };
        self.device.inner.bind()?;
        Ok(ticket)
    }

    /// Blocks the host until everything submitted on this stream so far has
    /// completed, waiting on a marker covering the last ticket
    /// (`cuEventSynchronize`; nothing when a host wait proved it already).
    /// No lock is held while waiting.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function (naming `op`); a
    /// driver error.
    pub(crate) fn host_wait_all_so_far(self: &Arc<Self>, op: &'static str) -> Result<()> {
        crate::ffi::refuse(op)?;
        let ticket = self.lock().stream(self).last_ticket;
        if ticket == 0 {
            return Ok(());
        }
        Point { timeline: self.clone(), ticket }.host_wait()
    }

    /// Blocks the host until all work submitted so far has completed
    /// (`cuStreamSynchronize`); returns the ticket that proves.
    ///
    /// # Errors
    /// As [`Timeline::prepare_host_wait`]; a driver error.
    pub(crate) fn synchronize(&self, op: &'static str) -> Result<u64> {
        let ticket = self.prepare_host_wait(op)?;
        call("cuStreamSynchronize", || cu::stream::synchronize(self.raw()))?;
        self.completed.fetch_max(ticket, Ordering::AcqRel);
        // Frees that host functions which ran meanwhile had to put off.
        crate::engine::capture::host_fn::drain();
        Ok(ticket)
    }

    /// Whether `p` needs a device-side wait before work on this stream.
    #[inline(always)]
    fn needs_wait(&self, st: &StreamState, p: &Point) -> bool {
        p.timeline.id != self.id && !p.is_complete() && st.known_for(p.timeline.id) < p.ticket
    }

    /// Submits `op` as the next operation of this stream, with the books of
    /// this stream's device and of every stream in `deps` locked (`books`),
    /// after making the stream wait (device-side, `cuStreamWaitEvent` on a
    /// marker of the other stream) for every point of `deps` that is neither
    /// known complete nor already waited for. Refused
    /// ([`Error::Capturing`]) on a capturing stream, before anything is
    /// submitted. Returns `op`'s result and the ticket it got.
    #[inline(always)]
    pub(crate) fn submit_in<R>(
        &self,
        books: &mut impl BookSet,
        op_name: &'static str,
        deps: &[Point],
        op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    ) -> Result<(R, u64)> {
        // The caller bound this stream's context (waits on another device's
        // stream bind it back).
        let own = self.book.ordinal;
        {
            let book = book_in(books, own)?;
            self.refuse_if_capturing(op_name)?;
            if !deps.is_empty() && deps.iter().any(|p| self.needs_wait(book.stream(self), p)) {
                self.wait_for(books, deps)?;
            }
        }
        let st = book_in(books, own)?.stream(self);
        let r = op(self.raw())?;
        let ticket = self.draw_ticket(st);
        Ok((r, ticket))
    }

    /// The device-side waits of [`Timeline::submit_in`].
    #[cold]
    fn wait_for(&self, books: &mut impl BookSet, deps: &[Point]) -> Result<()> {
        let own = self.book.ordinal;
        for p in deps {
            if !self.needs_wait(book_in(books, own)?.stream(self), p) {
                continue;
            }
            let other = &p.timeline;
            let covered = self.wait_on_marker(book_in(books, other.book.ordinal)?.stream(other), p)?;
            book_in(books, own)?.stream(self).set_known(other.id, covered);
        }
        Ok(())
    }

    /// Submits `op` on this stream with no tracked resources, after
    /// device-side waits for `deps` (which may be on other devices' streams):
    /// every book involved is locked, in ordinal order.
    pub(crate) fn submit<R>(
        &self,
        op_name: &'static str,
        deps: &[Point],
        op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    ) -> Result<(R, u64)> {
        crate::ffi::refuse(op_name)?;
        self.device.inner.bind()?;
        if deps.iter().all(|p| Arc::ptr_eq(&p.timeline.book, &self.book)) {
            let mut book = self.lock();
            return self.submit_in(&mut *book, op_name, deps, op);
        }
        let mut list = BookList::default();
        list.add(&self.book);
        for p in deps {
            list.add(&p.timeline.book);
        }
        let mut books = list.lock();
        self.submit_in(&mut books, op_name, deps, op)
    }
}

/// The error for a marker slot found empty where one was just kept (a
/// broken invariant, reported rather than panicked on).
#[cold]
#[inline(never)]
fn empty_slot() -> Error {
    Error::Internal("a stream's marker slot was empty where a marker was kept".into())
}

/// Retires a stream's slot in its book when its timeline goes.
struct Retire {
    book: Arc<DeviceBook>,
    slot: u32,
}

impl Drop for Retire {
    /// Frees the slot without waiting for the book (see
    /// [`DeviceBook::retire_stream`]).
    fn drop(&mut self) {
        self.book.retire_stream(self.slot);
    }
}

// The ring's tests use the simulator (above the engine), so they sit in
// their own file, which the layer test does not scan.
#[cfg(all(test, feature = "sim"))]
mod tests;
