//! record_stream by construction: every tracked operation records, on each
//! resource it touches, which stream used it, how, and at which point of that
//! stream's timeline; and makes the operation wait (device-side) for the
//! conflicting uses on other streams first (the rules: `timeline::conflicts`).
//!
//! - eager submission (this file): the trackers live in the book of the
//!   resource's device, locked once per operation together with the
//!   stream's state (see `timeline::book`);
//! - captured submission (`captured`): inside a graph capture, the same
//!   rules over the capture's own sequence numbers, orderings becoming graph
//!   edges;
//! - [`run_tracked`] chooses between them, atomically with the end of a
//!   capture (`capture::capture_gate`).
//!
//! A resource is always looked up in its **own** device's book, whatever the
//! stream: a pinned buffer of device 0 used on a stream of device 1 is
//! tracked in device 0's book. An operation whose resources, or whose waits,
//! span devices locks each of their books, in ordinal order.
//!
//! No book lock is held while a driver call waits for other work: host waits
//! run unlocked, and the operations that block in the driver (copies to or
//! from pageable memory) first wait, unlocked, until their stream and every
//! use they depend on are complete, then run on the idle stream
//! ([`run_tracked_idle`]), where the call waits for nothing but its own
//! transfer.

mod alloc;
pub(crate) mod captured;

use crate::device::Device;
use crate::engine::timeline::book::{BookList, BookSet, Books, DeviceBook, NO_SLOT, book_in, book_of};
use crate::engine::timeline::conflicts::Access;
use crate::engine::timeline::{Point, Timeline};
use crate::error::{Error, Result};
use cuda_sys::{BorrowedStream, CUdeviceptr};
use smallvec::SmallVec;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) use captured::KeepAlive;

static NEXT_RESOURCE_ID: AtomicU64 = AtomicU64::new(1);

/// A tracked resource (a device allocation or a pinned host buffer): a slot
/// in its device's book, released when the resource is dropped.
pub(crate) struct Resource {
    /// Process-unique id (keys capture-local bookkeeping).
    pub id: u64,
    slot: u32,
    book: Arc<DeviceBook>,
}

impl Resource {
    /// A new resource of `device` with no uses.
    pub fn new(device: &Device) -> Resource {
        let book = book_of(device);
        let slot = book.lock().new_tracker();
        Resource { id: NEXT_RESOURCE_ID.fetch_add(1, Ordering::Relaxed), slot, book }
    }

    /// A resource with no slot (what a moved-out value leaves behind), of
    /// the same book as `self`.
    pub fn empty_like(&self) -> Resource {
        Resource { id: 0, slot: NO_SLOT, book: self.book.clone() }
    }

    /// Whether this resource is tracked in `book`.
    #[inline(always)]
    pub fn is_in(&self, book: &Arc<DeviceBook>) -> bool {
        Arc::ptr_eq(&self.book, book)
    }

    /// Records a write at `point` (a stream-ordered allocation).
    pub fn set_write(&self, point: Point) {
        let old = self.book.lock().tracker_mut(self.slot).and_then(|t| t.write.replace(point));
        // Dropped with the book unlocked.
        drop(old);
    }

    /// Every use not yet known complete.
    pub fn outstanding(&self) -> SmallVec<[Point; 4]> {
        match self.book.lock().tracker_mut(self.slot) {
            Some(t) => t.outstanding(),
            None => SmallVec::new(),
        }
    }

    /// Blocks the host until every recorded use has completed (the book is
    /// not locked while waiting).
    pub fn host_wait_all(&self) -> Result<()> {
        crate::ffi::refuse("cuEventSynchronize")?;
        for p in &self.outstanding() {
            p.host_wait()?;
        }
        Ok(())
    }
}

impl Drop for Resource {
    fn drop(&mut self) {
        if self.slot == NO_SLOT {
            return;
        }
        if crate::ffi::calls_refused() {
            // Inside a host function: the book may be locked by the thread
            // the callback blocks; release the slot later, elsewhere.
            let (slot, book) = (std::mem::replace(&mut self.slot, NO_SLOT), self.book.clone());
            crate::engine::capture::host_fn::defer(Box::new(move || drop(Resource { id: 0, slot, book })));
            return;
        }
        let old = self.book.lock().free_tracker(self.slot);
        // The old uses (stream handles) go with the book unlocked.
        drop(old);
    }
}

/// One device allocation (reachable only inside the crate; allocated and
/// freed by `memory::buffer`).
pub struct Allocation {
    ptr: CUdeviceptr,
    bytes: usize,
    device: Device,
    /// The stream it was allocated on (`None`: `cuMemAlloc`, or zero bytes).
    stream: Option<Arc<Timeline>>,
    res: Resource,
}

/// A resource an operation touches.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    /// Device memory (can be captured into a graph).
    Device(&'a Arc<Allocation>),
    /// A pinned host buffer (never captured).
    Host(&'a Resource),
}

impl Target<'_> {
    #[inline(always)]
    fn res(&self) -> &Resource {
        match self {
            Target::Device(a) => &a.res,
            Target::Host(r) => r,
        }
    }
}

/// One use of a resource by an operation.
pub(crate) type Use<'a> = (Target<'a>, Access);

/// The resources one operation touches: a slice of [`Use`]s, or a launch's
/// argument list (whose buffers are its uses).
pub(crate) trait Uses {
    /// Calls `f` with each use.
    fn each(&self, f: impl FnMut(Target<'_>, Access));
}

impl Uses for [Use<'_>] {
    #[inline]
    fn each(&self, mut f: impl FnMut(Target<'_>, Access)) {
        for (t, a) in self {
            f(*t, *a);
        }
    }
}

impl<const N: usize> Uses for [Use<'_>; N] {
    #[inline]
    fn each(&self, f: impl FnMut(Target<'_>, Access)) {
        self.as_slice().each(f);
    }
}

/// Runs `op` on `stream` as a tracked operation over `uses`: waits for
/// conflicting uses on other streams, submits, and records the new uses.
/// Returns `op`'s result and the operation's ticket (0 when it was captured
/// into a graph instead: on a capturing stream the operation joins the
/// capture, `keep` kept alive by the graph).
#[inline(always)]
pub(crate) fn run_tracked<R, U: Uses + ?Sized>(
    stream: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    keep: Option<&KeepAlive>,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    // The guards before any lock (host function, deferred work) are the
    // facade's (`engine::submit`): the capture routing below reads the
    // stream's capture under its book lock, which the thread waiting for a
    // host function may hold.
    // Joins the stream's capture under its gate, or (no capture, or it
    // ended first) runs as ordinary work: see `capture_gate`.
    crate::engine::capture::capture_gate::submit(
        &**stream,
        op,
        |cap, inner, op| captured::run_captured(stream, op_name, uses, keep, cap, inner, op).map(|r| (r, 0)),
        |op| run_tracked_admitted(stream, op_name, uses, op),
    )
}

/// [`run_tracked`] for an operation that never joins a capture: on a
/// capturing stream it is refused with [`Error::Capturing`] without running
/// `op` (decided under the book lock, so a capture beginning meanwhile is
/// seen).
///
/// The hot path: every resource and every conflicting use on this device,
/// one lock. Otherwise the operation locks the books of every device
/// involved ([`run_tracked_across`]).
#[inline(always)]
pub(crate) fn run_tracked_uncaptured<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    run_tracked_admitted(s, op_name, uses, op)
}

/// [`run_tracked_uncaptured`] once the facade's guards (`engine::submit`) have passed.
#[inline(always)]
fn run_tracked_admitted<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    // The stream's context, before its waits and its call (a wait on another
    // device's stream binds it back).
    s.device.inner.bind()?;
    let mut book = s.lock();
    // One pass: whether any use conflicts (the hot path — the same stream
    // again — finds none and collects nothing), and whether a resource or a
    // conflicting use belongs to another device.
    let (mut conflicts, mut foreign) = (false, false);
    uses.each(|t, a| {
        let r = t.res();
        if !r.is_in(&s.book) {
            foreign = true;
        } else if let Some(tr) = book.tracker(r.slot) {
            tr.deps(s.id, a, |p| {
                conflicts = true;
                foreign |= !Arc::ptr_eq(&p.timeline.book, &s.book);
            });
        }
    });
    if foreign {
        drop(book);
        return run_tracked_across(s, op_name, uses, op);
    }
    if conflicts {
        // Refused before any wait is made; then each wait made in place, as
        // a second pass over the trackers finds it (no point cloned).
        s.refuse_if_capturing(op_name)?;
        let (trackers, streams) = book.split();
        // The first error is kept; assigned only on that cold path, so the
        // hot path never drops a `Result` (an out-of-line call per wait).
        let mut waited: Option<Error> = None;
        uses.each(|t, a| {
            if let Some(tr) = trackers.get(t.res().slot as usize) {
                tr.0.deps(s.id, a, |p| {
                    if waited.is_none()
                        && let Err(e) = s.wait_same_device(streams, p)
                    {
                        waited = Some(e);
                    }
                });
            }
        });
        if let Some(e) = waited {
            return Err(e);
        }
    }
    let (r, ticket) = s.submit_in(&mut *book, op_name, &[], op)?;
    uses.each(|t, a| {
        if let Some(tr) = book.tracker_mut(t.res().slot) {
            tr.record_use(s, ticket, a);
        }
    });
    Ok((r, ticket))
}

/// The books an operation of `stream` over `uses` needs at least: the
/// stream's and each resource's.
fn books_of<U: Uses + ?Sized>(stream: &Timeline, uses: &U) -> BookList {
    let mut list = BookList::default();
    list.add(&stream.book);
    uses.each(|t, _| list.add(&t.res().book));
    list
}

/// Conflicting points of `uses` for an operation on stream `stream`, each
/// resource read from its own device's book; `Err(list)` when a conflicting
/// use is on a stream whose device's book is not locked (`list` then names
/// every book needed so far).
fn deps_in<U: Uses + ?Sized>(
    books: &mut Books<'_>,
    stream: u64,
    uses: &U,
) -> Result<SmallVec<[Point; 4]>, Vec<Arc<DeviceBook>>> {
    let mut deps: SmallVec<[Point; 4]> = SmallVec::new();
    let mut missing: Vec<Arc<DeviceBook>> = Vec::new();
    uses.each(|t, a| {
        let r = t.res();
        if let Some(tr) = books.book(r.book.ordinal).and_then(|b| b.tracker(r.slot)) {
            tr.deps(stream, a, |p| deps.push(p.clone()));
        }
    });
    for p in &deps {
        if !books.has(p.timeline.book.ordinal) {
            missing.push(p.timeline.book.clone());
        }
    }
    if missing.is_empty() { Ok(deps) } else { Err(missing) }
}

/// Records the uses at `ticket` of `stream`, each in its own device's book.
fn record_in<U: Uses + ?Sized>(books: &mut impl BookSet, stream: &Arc<Timeline>, ticket: u64, uses: &U) {
    uses.each(|t, a| {
        let r = t.res();
        if let Some(tr) = books.book(r.book.ordinal).and_then(|b| b.tracker_mut(r.slot)) {
            tr.record_use(stream, ticket, a);
        }
    });
}

/// [`run_tracked`] for an operation whose resources, or the uses it must
/// wait for, belong to several devices (a peer copy; a pinned buffer of one
/// device used on a stream of another): the books of every device involved
/// are locked, in ordinal order (found by locking what is known, reading the
/// conflicts, and locking again with any device they add). Refused on a
/// capturing stream.
fn run_tracked_across<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    if s.capture_hint() {
        return Err(Error::Capturing { op: op_name });
    }
    let mut list = books_of(s, uses);
    loop {
        let mut books = list.lock();
        match deps_in(&mut books, s.id, uses) {
            Ok(deps) => {
                s.device.inner.bind()?;
                let (out, ticket) = s.submit_in(&mut books, op_name, &deps, op)?;
                record_in(&mut books, s, ticket, uses);
                return Ok((out, ticket));
            }
            Err(missing) => {
                drop(books);
                for b in &missing {
                    list.add(b);
                }
            }
        }
    }
}

/// Runs `op`, a driver call that blocks the host until its own transfer is
/// done (a copy to or from pageable memory), as a tracked operation on
/// `stream`, holding no book while the driver blocks.
///
/// First, with no lock held, it host-waits for everything the operation
/// would wait for: all work queued on `stream` (`cuStreamSynchronize`) and
/// every conflicting use on other streams (their markers). Then it locks the
/// books and checks that nothing new arrived meanwhile (else it waits
/// again): the stream is idle and no device-side wait is needed. When
/// nothing but the caller's borrow reaches the memory ([`only_borrowed`]:
/// the buffer is not held by a graph), it then **unlocks the books** and
/// makes the blocking call, holding only the stream's `blocking` lock (which
/// keeps a capture from beginning on the stream meanwhile, and which nothing
/// inside a host function takes), and relocks them to draw the ticket and
/// record the uses: another thread's submission to any stream of the device
/// never waits for this transfer. Otherwise (a graph that may be replayed
/// meanwhile holds the memory) the books stay locked across the call, so a
/// replay is ordered after it; a host function the driver runs during the
/// call still never waits (it refuses before any lock).
///
/// Why the gap is sound:
/// - the ticket is drawn after the call returned, as for every operation,
///   so it never names work the driver has not been given, and a marker
///   recorded on the stream meanwhile covers at most earlier tickets (it
///   may cover more work than it claims: conservative);
/// - work another thread queues on the stream meanwhile runs before or
///   after the copy in the stream's FIFO; if before, the blocking call also
///   waits for it (no lock held but `blocking`, which that work cannot
///   need: host functions refuse before any lock);
/// - the memory the copy touches cannot gain a conflicting use meanwhile:
///   the caller borrows the device view for the whole call (`&` for a
///   download, `&mut` for an upload) and no other handle to the allocation
///   exists ([`only_borrowed`]), so another use in the gap is a read of a
///   download's source, which does not conflict;
/// - the host memory is borrowed for the whole call, which returns only
///   once the copy is complete (`wait_for_borrowed`).
///
/// # Errors
/// [`Error::Capturing`]; `CUDA_ERROR_NOT_PERMITTED` inside a host function;
/// the driver error of a wait or of `op`.
fn run_tracked_idle<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    crate::ffi::refuse(op_name)?;
    if s.capture_hint() {
        return Err(Error::Capturing { op: op_name });
    }
    let mut list = books_of(s, uses);
    let dev = &s.device.inner;
    // Lock order: `blocking`, then books; held across the driver call.
    let _blocking = s.lock_blocking();
    loop {
        crate::engine::capture::host_fn::drain();
        // Unlocked: the stream's queue, then the uses on other streams.
        s.synchronize(op_name)?;
        let found = deps_in(&mut list.lock(), s.id, uses);
        let pending = match found {
            Ok(deps) => deps,
            Err(missing) => {
                for b in &missing {
                    list.add(b);
                }
                continue;
            }
        };
        for p in &pending {
            p.host_wait()?;
        }
        let mut books = list.lock();
        match deps_in(&mut books, s.id, uses) {
            Ok(deps) if deps.iter().all(Point::is_complete) => {}
            // A use arrived meanwhile: wait for it, unlocked.
            _ => continue,
        }
        let st = book_in(&mut books, s.book.ordinal)?.stream(s);
        s.refuse_if_capturing(op_name)?;
        let idle = Point { timeline: s.clone(), ticket: st.last_ticket };
        if st.last_ticket != 0 && !idle.is_complete() {
            // Work was queued on the stream meanwhile: wait for it, unlocked.
            continue;
        }
        // The blocking call holds no book when nothing but the caller's
        // borrow can reach the memory (see above); else it keeps the books.
        let held = if only_borrowed(uses) {
            drop(books);
            None
        } else {
            Some(books)
        };
        dev.bind()?;
        let r = op(s.raw())?;
        let mut books = match held {
            Some(books) => books,
            None => list.lock(),
        };
        let ticket = s.draw_ticket(book_in(&mut books, s.book.ordinal)?.stream(s));
        record_in(&mut books, s, ticket, uses);
        return Ok((r, ticket));
    }
}

/// Whether every resource of `uses` is a device allocation held by one
/// handle only (its buffer, which the caller of a blocking copy borrows):
/// then no other thread can submit a conflicting use while the copy runs
/// unlocked. A graph holding the allocation (it may be replayed, writing it,
/// at any time) makes the count larger. Read with the books locked; a count
/// of one cannot grow meanwhile (a new handle would be cloned from the one
/// the caller borrows).
fn only_borrowed<U: Uses + ?Sized>(uses: &U) -> bool {
    let mut only = true;
    uses.each(|t, _| only &= matches!(t, Target::Device(a) if Arc::strong_count(a) == 1));
    if only {
        // Orders the other holders' last use (a graph dropped on another
        // thread) before the copy, as for a recycled marker.
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
    }
    only
}

/// The blocking flavor: [`run_tracked_idle`], then [`wait_for_borrowed`]:
/// returns once the blocking call's transfer is complete (or the context
/// lost).
pub(crate) fn run_blocking<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    let (r, ticket) = run_tracked_idle(s, op_name, uses, op)?;
    wait_for_borrowed(s, ticket)?;
    Ok((r, ticket))
}

/// Blocks the host until the operation at `ticket` of `stream` has
/// completed (`cuStreamSynchronize`), or the context is lost.
///
/// For operations whose host memory is only borrowed (the pageable-copy
/// APIs, which the caller may give pinned memory that the driver then
/// copies asynchronously): if the stream wait fails, the copy may still be
/// queued, so it waits on the copy's own marker (`cuEventSynchronize`),
/// retrying with a growing pause while that fails too. It returns only when
/// the copy is known complete (reporting the first failure) or the context
/// is lost (a lost context runs no more work).
///
/// # Errors
/// The first wait's error once the copy is complete; [`Error::ContextLost`].
fn wait_for_borrowed(stream: &Arc<Timeline>, ticket: u64) -> Result<()> {
    let first = match stream.synchronize("Stream::synchronize") {
        Ok(_) => return Ok(()),
        Err(e @ Error::ContextLost { .. }) => return Err(e),
        Err(e) => e,
    };
    let point = Point { timeline: stream.clone(), ticket };
    let mut pause = std::time::Duration::from_micros(50);
    let mut logged = false;
    loop {
        match point.host_wait() {
            Ok(()) => return Err(first),
            Err(e @ Error::ContextLost { .. }) => return Err(e),
            Err(e) => {
                if !logged {
                    log::error!(
                        "{first}; waiting for the copy into borrowed host memory also failed ({e}): \
                         retrying until it completes"
                    );
                    logged = true;
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(20));
            }
        }
    }
}

/// Checks that a device allocation lives on `stream`'s device.
pub(crate) fn same_device(stream: &Timeline, alloc: &Allocation, what: &'static str) -> Result<()> {
    if alloc.device.same(&stream.device) {
        Ok(())
    } else {
        Err(Error::DeviceMismatch { what, expected: stream.device.ordinal(), found: alloc.device.ordinal() })
    }
}
