//! record_stream by construction: every tracked operation records, on each
//! resource it touches, which stream used it, how, and at which point of that
//! stream's timeline; and makes the operation wait (device-side) for the
//! conflicting uses on other streams first.
//!
//! Rules (PyTorch's `record_stream` contract, made automatic):
//! - a read waits for the last write if it was on another stream;
//! - a write waits for the last write and for every read since it, each on
//!   other streams; readers are kept **per stream** (one point per stream), so
//!   no reader is lost when several streams read one buffer;
//! - same-stream uses are ordered by the stream's FIFO and cost a counter
//!   write;
//! - uses a host wait proved complete never cause a wait.
//!
//! The trackers of one device live in one slab behind one lock, taken once
//! per operation from before its conflicts are read until its uses are
//! recorded: two operations on one resource can never both miss each other,
//! and no lock order among resources is needed. The price is that tracked
//! submissions to one device are serialized — the driver serializes most
//! submissions to one context anyway.
//!
//! A resource is always looked up in its **own** device's slab (the slab of
//! the device that allocated it), whatever the stream: a pinned buffer of
//! device 0 used on a stream of device 1 is tracked in device 0's slab. An
//! operation whose resources span devices locks each of their slabs, in
//! ordinal order. Debug builds assert that no resource is ever looked up in
//! another device's slab.
//!
//! No slab lock is held while a driver call waits for other work: host
//! waits run unlocked, and the operations that block in the driver (copies
//! to or from pageable memory) first wait, unlocked, until their stream and
//! every use they depend on are complete, then run on the idle stream
//! ([`run_tracked_idle`]), where the call waits for nothing but its own
//! transfer.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::memory::buffer::Allocation;
use crate::stream::{Point, Stream, StreamInner};
use cuda_sys::BorrowedStream;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

static NEXT_RESOURCE_ID: AtomicU64 = AtomicU64::new(1);

/// How an operation uses a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Only reads it.
    Read,
    /// Writes it (and may read it).
    Write,
}

/// A use's position on a stream, as the conflict rules see it.
pub(crate) trait OnStream {
    /// The stream it is on.
    fn stream_id(&self) -> u64;
    /// Whether a host wait proved it complete (then it orders nothing).
    fn is_complete(&self) -> bool;
    /// Moves it forward to a later use on the same stream.
    fn advance(&mut self, to: u64);
}

impl OnStream for Point {
    #[inline(always)]
    fn stream_id(&self) -> u64 {
        self.stream.id
    }
    #[inline(always)]
    fn is_complete(&self) -> bool {
        Point::is_complete(self)
    }
    #[inline(always)]
    fn advance(&mut self, to: u64) {
        self.ticket = self.ticket.max(to);
    }
}

/// The conflict rules, written once: the last write of a resource and its
/// reads since, one position per stream. An access on a stream must be
/// ordered after the last write on another stream and, if it writes, after
/// every read on another stream; a write then supersedes them all, a read
/// joins the readers. Used with stream points by eager submission (one
/// `Tracker` per resource, in its device's slab) and with capture sequence
/// numbers by captured submission (`graph.rs`, where orderings become graph
/// edges).
pub(crate) struct Conflicts<P> {
    pub write: Option<P>,
    pub reads: SmallVec<[P; 2]>,
}

impl<P> Default for Conflicts<P> {
    fn default() -> Self {
        Conflicts { write: None, reads: SmallVec::new() }
    }
}

impl<P: OnStream> Conflicts<P> {
    /// Each position on another stream that an `access` on `stream` must be
    /// ordered after, given to `out`.
    #[inline(always)]
    pub(crate) fn deps(&self, stream: u64, access: Access, mut out: impl FnMut(&P)) {
        if let Some(w) = &self.write
            && w.stream_id() != stream
        {
            out(w);
        }
        if access == Access::Write {
            for p in &self.reads {
                if p.stream_id() != stream {
                    out(p);
                }
            }
        }
    }

    /// Records an `access` on `stream` at position `at` (a ticket or a
    /// sequence number), making a new position with `new` only when none of
    /// that stream is held (the hot path — the same stream again — moves a
    /// number and touches no reference count).
    #[inline(always)]
    pub(crate) fn record(&mut self, stream: u64, at: u64, access: Access, new: impl FnOnce() -> P) {
        match access {
            Access::Read => {
                if let Some(r) = self.reads.iter_mut().find(|r| r.stream_id() == stream) {
                    r.advance(at);
                } else {
                    // A new reader stream: drop readers a host wait proved
                    // complete first, so the list stays short.
                    self.reads.retain(|p| !p.is_complete());
                    self.reads.push(new());
                }
            }
            Access::Write => {
                match &mut self.write {
                    Some(w) if w.stream_id() == stream => w.advance(at),
                    w => *w = Some(new()),
                }
                self.reads.clear();
            }
        }
    }
}

/// The uses of one resource (a device allocation or a pinned host buffer).
pub(crate) type Tracker = Conflicts<Point>;

impl Tracker {
    /// Drops uses a host wait proved complete. Not needed for correctness on
    /// the hot path (complete points never cause a wait); used before a free.
    fn prune(&mut self) {
        if self.write.as_ref().is_some_and(Point::is_complete) {
            self.write = None;
        }
        self.reads.retain(|p| !p.is_complete());
    }

    /// Points on other streams that an `access` on `stream` must wait for.
    #[inline(always)]
    fn deps_into(&self, stream: u64, access: Access, out: &mut SmallVec<[Point; 4]>) {
        self.deps(stream, access, |p| out.push(p.clone()));
    }

    /// Records a use at `ticket` of `stream`.
    #[inline(always)]
    fn record_use(&mut self, stream: &Arc<StreamInner>, ticket: u64, access: Access) {
        self.record(stream.id, ticket, access, || Point { stream: stream.clone(), ticket });
    }

    /// Every use not yet known complete.
    fn outstanding(&mut self) -> SmallVec<[Point; 4]> {
        self.prune();
        self.write.iter().chain(self.reads.iter()).cloned().collect()
    }
}

/// The tracker slab of one device, shared by its resources and streams (a
/// resource holds its slab, not its device; the device knows nothing of
/// tracking).
pub(crate) struct Slab {
    /// The device whose resources these are (the lock order of slabs).
    ordinal: i32,
    trackers: Mutex<Trackers>,
}

impl Slab {
    /// Locks the slab.
    #[inline(always)]
    pub(crate) fn lock(&self) -> MutexGuard<'_, Trackers> {
        self.trackers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The slab of `device`'s resources: one per device for the life of the
/// process (as the device's state is), made on first use.
pub(crate) fn slab_of(device: &Device) -> Arc<Slab> {
    static SLABS: std::sync::OnceLock<Mutex<HashMap<i32, Arc<Slab>>>> = std::sync::OnceLock::new();
    let ordinal = device.ordinal();
    let mut map = SLABS.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap_or_else(|p| p.into_inner());
    map.entry(ordinal)
        .or_insert_with(|| Arc::new(Slab { ordinal, trackers: Mutex::new(Trackers::new(ordinal)) }))
        .clone()
}

/// The trackers of one device: a slab of slots, one per live resource of
/// that device.
pub(crate) struct Trackers {
    /// The device whose resources these are.
    ordinal: i32,
    slots: Vec<Tracker>,
    free: Vec<u32>,
}

impl Trackers {
    /// The empty slab of device `ordinal`.
    fn new(ordinal: i32) -> Trackers {
        Trackers { ordinal, slots: Vec::new(), free: Vec::new() }
    }

    /// Debug builds: `r` must be a resource of this slab's device.
    #[inline(always)]
    fn assert_own(&self, r: &Resource) {
        debug_assert!(
            r.slot == NO_SLOT || r.slab.ordinal == self.ordinal,
            "a resource of device {} was looked up in the tracker slab of device {}",
            r.slab.ordinal,
            self.ordinal
        );
    }

    /// The tracker of `r` (which must belong to this slab's device).
    #[inline(always)]
    fn of(&self, r: &Resource) -> Option<&Tracker> {
        self.assert_own(r);
        self.slots.get(r.slot as usize)
    }

    /// The tracker of `r`, for recording (see [`Trackers::of`]).
    #[inline(always)]
    fn of_mut(&mut self, r: &Resource) -> Option<&mut Tracker> {
        self.assert_own(r);
        self.slots.get_mut(r.slot as usize)
    }
}

const NO_SLOT: u32 = u32::MAX;

/// A tracked resource (a device allocation or a pinned host buffer): a slot
/// in its device's tracker slab, released when the resource is dropped.
pub(crate) struct Resource {
    /// Process-unique id (keys capture-local bookkeeping).
    pub id: u64,
    slot: u32,
    slab: Arc<Slab>,
}

impl Resource {
    /// A new resource of `device` with no uses.
    pub fn new(device: &Device) -> Resource {
        let slab = slab_of(device);
        let mut t = slab.lock();
        let slot = match t.free.pop() {
            Some(s) => s,
            None => {
                t.slots.push(Tracker::default());
                (t.slots.len() - 1) as u32
            }
        };
        drop(t);
        Resource { id: NEXT_RESOURCE_ID.fetch_add(1, Ordering::Relaxed), slot, slab }
    }

    /// A resource with no slot (what a moved-out value leaves behind), of
    /// the same slab as `self`.
    pub fn empty_like(&self) -> Resource {
        Resource { id: 0, slot: NO_SLOT, slab: self.slab.clone() }
    }

    /// Whether this resource is tracked in `slab`.
    #[inline(always)]
    pub fn is_in(&self, slab: &Arc<Slab>) -> bool {
        Arc::ptr_eq(&self.slab, slab)
    }

    /// Records a write at `point` (a stream-ordered allocation).
    pub fn set_write(&self, point: Point) {
        let old = match self.slab.lock().of_mut(self) {
            Some(t) => t.write.replace(point),
            None => None,
        };
        // Dropped with the slab unlocked (it may be a stream's last handle).
        drop(old);
    }

    /// Every use not yet known complete.
    pub fn outstanding(&self) -> SmallVec<[Point; 4]> {
        match self.slab.lock().of_mut(self) {
            Some(t) => t.outstanding(),
            None => SmallVec::new(),
        }
    }

    /// Blocks the host until every recorded use has completed (the tracker
    /// lock is not held while waiting).
    pub fn host_wait_all(&self) -> Result<()> {
        crate::capture::host_fn::refuse("cuEventSynchronize")?;
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
        if crate::capture::host_fn::active() {
            // Inside a host function: the slab may be locked by the thread
            // the callback blocks; release the slot later, elsewhere.
            let (slot, slab) = (std::mem::replace(&mut self.slot, NO_SLOT), self.slab.clone());
            crate::capture::host_fn::defer(Box::new(move || drop(Resource { id: 0, slot, slab })));
            return;
        }
        let mut t = self.slab.lock();
        let old = t.of_mut(self).map(std::mem::take);
        if old.is_some() {
            t.free.push(self.slot);
        }
        drop(t);
        // The old uses (stream handles) go with the slab unlocked: a stream's
        // last handle destroys it.
        drop(old);
    }
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
    #[inline]
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
/// capture). Each resource is tracked in its own device's slab; when one
/// lives on another device than the stream (a pinned buffer used on another
/// device's stream, a peer copy), every slab involved is locked.
pub(crate) fn run_tracked<R, U: Uses + ?Sized>(
    stream: &Stream,
    op_name: &'static str,
    uses: &U,
    keep: Option<&crate::graph::KeepAlive>,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    // Joins the stream's capture under its gate, or (no capture, or it
    // ended first) runs as ordinary work: see `capture_gate`.
    crate::capture::capture_gate::submit(
        &*stream.inner,
        op,
        |cap, inner, op| {
            crate::graph::run_captured(stream, op_name, uses, keep, cap, inner, op).map(|r| (r, 0))
        },
        |op| run_tracked_uncaptured(stream, op_name, uses, op),
    )
}

/// What every eager tracked submission does first: refuse inside a host
/// function (before any lock is taken), then run the work host functions
/// deferred (no gpu-sync lock is held here).
#[inline]
fn admit(op_name: &'static str) -> Result<()> {
    crate::capture::host_fn::refuse(op_name)?;
    crate::capture::host_fn::drain();
    Ok(())
}

/// [`run_tracked`] for an operation that never joins a capture: on a
/// capturing stream it is refused with [`Error::Capturing`] without running
/// `op` (decided under the stream's lock, so a capture beginning meanwhile is
/// seen).
pub(crate) fn run_tracked_uncaptured<R, U: Uses + ?Sized>(
    stream: &Stream,
    op_name: &'static str,
    uses: &U,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    let s = &stream.inner;
    // `submit` checks the stream's capture state under its lock and refuses
    // (`Error::Capturing`) without running `op`.
    admit(op_name)?;
    let mut slab = s.slab.lock();
    // One pass: the conflicts of every use, or the first resource of another
    // device (then the operation takes the path that locks every slab).
    let mut deps: SmallVec<[Point; 4]> = SmallVec::new();
    let mut foreign = false;
    uses.each(|t, a| {
        let r = t.res();
        if !r.is_in(&s.slab) {
            foreign = true;
        } else if let Some(tr) = slab.of(r) {
            tr.deps_into(s.id, a, &mut deps);
        }
    });
    if foreign {
        drop(slab);
        return run_tracked_across(stream, op_name, uses, op);
    }
    let (r, ticket) = s.submit(op_name, &deps, op)?;
    uses.each(|t, a| {
        if let Some(tr) = slab.of_mut(t.res()) {
            tr.record_use(s, ticket, a);
        }
    });
    Ok((r, ticket))
}

/// The slabs an operation over `uses` needs, in ordinal order (the lock
/// order of slabs).
fn slabs_of<U: Uses + ?Sized>(uses: &U) -> SmallVec<[Arc<Slab>; 2]> {
    let mut slabs: SmallVec<[Arc<Slab>; 2]> = SmallVec::new();
    uses.each(|t, _| {
        let r = t.res();
        if !slabs.iter().any(|x| r.is_in(x)) {
            slabs.push(r.slab.clone());
        }
    });
    slabs.sort_by_key(|s| s.ordinal);
    slabs
}

/// Locked slabs of several devices.
type Slabs<'a> = SmallVec<[MutexGuard<'a, Trackers>; 2]>;

fn lock_all(slabs: &[Arc<Slab>]) -> Slabs<'_> {
    slabs.iter().map(|s| s.lock()).collect()
}

/// Conflicting points of `uses` for an operation on stream `stream`, each
/// resource read from its own device's slab.
fn deps_in<U: Uses + ?Sized>(slabs: &Slabs<'_>, stream: u64, uses: &U) -> SmallVec<[Point; 4]> {
    let mut deps: SmallVec<[Point; 4]> = SmallVec::new();
    uses.each(|t, a| {
        let r = t.res();
        if let Some(tr) = slabs.iter().find(|g| g.ordinal == r.slab.ordinal).and_then(|g| g.of(r)) {
            tr.deps_into(stream, a, &mut deps);
        }
    });
    deps
}

/// Records the uses at `ticket` of `stream`, each in its own device's slab.
fn record_in<U: Uses + ?Sized>(slabs: &mut Slabs<'_>, stream: &Arc<StreamInner>, ticket: u64, uses: &U) {
    uses.each(|t, a| {
        let r = t.res();
        if let Some(tr) = slabs.iter_mut().find(|g| g.ordinal == r.slab.ordinal).and_then(|g| g.of_mut(r)) {
            tr.record_use(stream, ticket, a);
        }
    });
}

/// [`run_tracked`] for an operation whose resources belong to several
/// devices (a peer copy; a pinned buffer of one device used on a stream of
/// another): every device's slab is locked, in ordinal order. Refused on a
/// capturing stream.
pub(crate) fn run_tracked_across<R, U: Uses + ?Sized>(
    stream: &Stream,
    op_name: &'static str,
    uses: &U,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    let s = &stream.inner;
    if s.capture_hint() {
        return Err(Error::Capturing { op: op_name });
    }
    admit(op_name)?;
    let devices = slabs_of(uses);
    let mut slabs = lock_all(&devices);
    let deps = deps_in(&slabs, s.id, uses);
    let (out, ticket) = s.submit(op_name, &deps, op)?;
    record_in(&mut slabs, s, ticket, uses);
    Ok((out, ticket))
}

/// Runs `op`, a driver call that blocks the host until its own transfer is
/// done (a copy to or from pageable memory), as a tracked operation on
/// `stream` without holding any lock while it waits for other work.
///
/// First, with no lock held, it host-waits for everything the operation
/// would wait for: all work queued on `stream` (`cuStreamSynchronize`) and
/// every conflicting use on other streams (their markers). Then it locks the
/// slabs and the stream and submits only if nothing new arrived meanwhile
/// (else it waits again): the stream is idle and no device-side wait is
/// needed, so the blocking call waits for its own transfer alone — which
/// needs no host progress. A host function queued earlier (which may drop
/// gpu-sync objects) has therefore run before any lock is taken.
///
/// # Errors
/// [`Error::Capturing`]; [`crate::capture::host_fn::refuse`]'s error inside a host
/// function; the driver error of a wait or of `op`.
pub(crate) fn run_tracked_idle<R>(
    stream: &Stream,
    op_name: &'static str,
    uses: &[Use<'_>],
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    let s = &stream.inner;
    if s.capture_hint() {
        return Err(Error::Capturing { op: op_name });
    }
    crate::capture::host_fn::refuse(op_name)?;
    let devices = slabs_of(uses);
    let dev = &s.device.inner;
    let (mut slabs, mut st) = loop {
        crate::capture::host_fn::drain();
        // Unlocked: the stream's queue, then the uses on other streams.
        stream.synchronize()?;
        let pending = deps_in(&lock_all(&devices), s.id, uses);
        for p in &pending {
            p.host_wait()?;
        }
        let slabs = lock_all(&devices);
        if deps_in(&slabs, s.id, uses).iter().any(|p| !p.is_complete()) {
            continue; // a use arrived meanwhile: wait for it, unlocked
        }
        dev.bind()?;
        let st = s.lock();
        st.refuse_if_capturing(op_name)?;
        let idle = Point { stream: s.clone(), ticket: st.last_ticket };
        if st.last_ticket == 0 || idle.is_complete() {
            break (slabs, st);
        }
        // Work was queued on the stream meanwhile: wait for it, unlocked.
    };
    let r = op(s.raw())?;
    let ticket = dev.next_ticket();
    st.last_ticket = ticket;
    drop(st);
    record_in(&mut slabs, s, ticket, uses);
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
pub(crate) fn wait_for_borrowed(stream: &Stream, ticket: u64) -> Result<()> {
    let first = match stream.synchronize() {
        Ok(_) => return Ok(()),
        Err(e @ Error::ContextLost { .. }) => return Err(e),
        Err(e) => e,
    };
    let point = Point { stream: stream.inner.clone(), ticket };
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
pub(crate) fn same_device(stream: &Stream, alloc: &Allocation, what: &'static str) -> Result<()> {
    if alloc.device.same(stream.device()) {
        Ok(())
    } else {
        Err(Error::DeviceMismatch {
            what,
            expected: stream.device().ordinal(),
            found: alloc.device.ordinal(),
        })
    }
}
