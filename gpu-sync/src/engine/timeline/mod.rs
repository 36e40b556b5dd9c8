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
//! - `conflicts`: the conflict rules, once;
//! - `state`: a stream's state in the book; `ring`: its kept markers;
//!   `wait`: device-side and host waits; `submit`: the submission paths
//!   under the book and the one place tickets are drawn.
//!
//! Same-stream work needs no event at all: the stream's FIFO orders it.

pub(in crate::engine) mod book;
pub(in crate::engine) mod conflicts;
pub(in crate::engine) mod event;
pub(in crate::engine) mod marker;
pub(in crate::engine) mod pending;
mod ring;
mod state;
mod submit;
mod wait;

pub(in crate::engine) use state::StreamState;
#[cfg(all(test, feature = "sim"))]
use {
    marker::Marker,
    ring::{MARKERS_KEEP, MarkerRing},
};

use crate::device::Device;
use crate::engine::release::Held;
use crate::error::{Error, Result};
use book::DeviceBook;
use cuda_sys::BorrowedStream;
use cuda_sys::handle::kind::StreamKind;
use marker::EventPool;
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
    pub(in crate::engine) fn stream_id(&self) -> u64 {
        self.timeline.id
    }

    /// The ticket.
    #[inline]
    pub(in crate::engine) fn ticket(&self) -> u64 {
        self.ticket
    }

    /// Notes that a host wait proved this point complete.
    #[inline]
    pub(in crate::engine) fn prove(&self) {
        self.timeline.prove(self.ticket);
    }

    /// Whether a host wait already proved this point complete.
    #[inline]
    pub(in crate::engine) fn is_complete(&self) -> bool {
        self.ticket <= self.timeline.completed.load(Ordering::Acquire)
            || self.ticket <= self.timeline.device.inner.completed.load(Ordering::Acquire)
    }

    /// Blocks the host until the point is complete (`cuEventSynchronize` on a
    /// marker covering it).
    pub(crate) fn host_wait(&self) -> Result<()> {
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
    pub(in crate::engine) fn last_ticket(&self) -> u64 {
        self.lock().stream(self).last_ticket
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
    pub(in crate::engine) fn is_capturing(&self) -> bool {
        self.capturing.load(Ordering::Relaxed)
    }

    /// [`Error::Capturing`] naming `op` if the stream captures (exact: the
    /// caller holds the book; see [`Timeline::is_capturing`]).
    #[inline(always)]
    pub(in crate::engine) fn refuse_if_capturing(&self, op: &'static str) -> Result<()> {
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
    pub(in crate::engine) fn lock_blocking(&self) -> std::sync::MutexGuard<'_, ()> {
        self.blocking.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks the stream's device book (this stream's state is
    /// `book.stream(self)`).
    #[inline(always)]
    pub(in crate::engine) fn lock(&self) -> book::BookGuard<'_> {
        self.book.lock()
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
