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

use crate::buffer::Allocation;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::stream::{Point, Stream, StreamInner};
use cuda_sys::CUstream;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};

static NEXT_RESOURCE_ID: AtomicU64 = AtomicU64::new(1);

/// How an operation uses a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Only reads it.
    Read,
    /// Writes it (and may read it).
    Write,
}

/// The uses of one resource (a device allocation or a pinned host buffer).
#[derive(Default)]
pub(crate) struct Tracker {
    pub write: Option<Point>,
    pub reads: SmallVec<[Point; 2]>,
}

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
        if let Some(w) = &self.write
            && w.stream.id != stream
        {
            out.push(w.clone());
        }
        if access == Access::Write {
            for p in &self.reads {
                if p.stream.id != stream {
                    out.push(p.clone());
                }
            }
        }
    }

    /// Records a use at `ticket` of `stream`, cloning the stream handle only
    /// when this tracker holds no point of that stream yet (the hot path —
    /// the same stream again — touches no reference count).
    #[inline(always)]
    fn record(&mut self, stream: &Arc<StreamInner>, ticket: u64, access: Access) {
        match access {
            Access::Read => {
                if let Some(r) = self.reads.iter_mut().find(|r| r.stream.id == stream.id) {
                    r.ticket = r.ticket.max(ticket);
                } else {
                    // A new reader stream: drop readers a host wait proved
                    // complete first, so the list stays short.
                    self.reads.retain(|p| !p.is_complete());
                    self.reads.push(Point { stream: stream.clone(), ticket });
                }
            }
            Access::Write => {
                match &mut self.write {
                    Some(w) if w.stream.id == stream.id => w.ticket = ticket,
                    w => *w = Some(Point { stream: stream.clone(), ticket }),
                }
                self.reads.clear();
            }
        }
    }

    /// Every use not yet known complete.
    fn outstanding(&mut self) -> SmallVec<[Point; 4]> {
        self.prune();
        self.write.iter().chain(self.reads.iter()).cloned().collect()
    }
}

/// The trackers of one device: a slab of slots, one per live resource.
#[derive(Default)]
pub(crate) struct Trackers {
    slots: Vec<Tracker>,
    free: Vec<u32>,
}

impl Trackers {
    fn get(&self, slot: u32) -> Option<&Tracker> {
        self.slots.get(slot as usize)
    }
    fn get_mut(&mut self, slot: u32) -> Option<&mut Tracker> {
        self.slots.get_mut(slot as usize)
    }
}

const NO_SLOT: u32 = u32::MAX;

/// A tracked resource (a device allocation or a pinned host buffer): a slot
/// in its device's tracker slab, released when the resource is dropped.
pub(crate) struct Resource {
    /// Process-unique id (keys capture-local bookkeeping).
    pub id: u64,
    slot: u32,
    device: Device,
}

impl Resource {
    /// A new resource of `device` with no uses.
    pub fn new(device: &Device) -> Resource {
        let mut t = device.inner.lock_trackers();
        let slot = match t.free.pop() {
            Some(s) => s,
            None => {
                t.slots.push(Tracker::default());
                (t.slots.len() - 1) as u32
            }
        };
        Resource { id: NEXT_RESOURCE_ID.fetch_add(1, Ordering::Relaxed), slot, device: device.clone() }
    }

    /// A resource with no slot (what a moved-out value leaves behind).
    pub fn empty(device: &Device) -> Resource {
        Resource { id: 0, slot: NO_SLOT, device: device.clone() }
    }

    /// Records a write at `point` (a stream-ordered allocation).
    pub fn set_write(&self, point: Point) {
        if let Some(t) = self.device.inner.lock_trackers().get_mut(self.slot) {
            t.write = Some(point);
        }
    }

    /// Every use not yet known complete.
    pub fn outstanding(&self) -> SmallVec<[Point; 4]> {
        match self.device.inner.lock_trackers().get_mut(self.slot) {
            Some(t) => t.outstanding(),
            None => SmallVec::new(),
        }
    }

    /// Blocks the host until every recorded use has completed (the tracker
    /// lock is not held while waiting).
    pub fn host_wait_all(&self) -> Result<()> {
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
        let mut t = self.device.inner.lock_trackers();
        if let Some(tr) = t.get_mut(self.slot) {
            *tr = Tracker::default();
            t.free.push(self.slot);
        }
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
/// capture). Every resource must belong to the stream's device, except for
/// [`run_tracked_across`].
pub(crate) fn run_tracked<R, U: Uses + ?Sized>(
    stream: &Stream,
    op_name: &'static str,
    uses: &U,
    keep: Option<&crate::graph::KeepAlive>,
    op: impl FnOnce(CUstream) -> Result<R>,
) -> Result<(R, u64)> {
    // Joins the stream's capture under its gate, or (no capture, or it
    // ended first) runs as ordinary work: see `capture_gate`.
    crate::capture_gate::submit(
        &*stream.inner,
        op,
        |cap, inner, op| {
            crate::graph::run_captured(stream, op_name, uses, keep, cap, inner, op).map(|r| (r, 0))
        },
        |op| run_tracked_uncaptured(stream, op_name, uses, op),
    )
}

/// [`run_tracked`] for an operation that never joins a capture: on a
/// capturing stream it is refused with [`Error::Capturing`] without running
/// `op` (decided under the stream's lock, so a capture beginning meanwhile is
/// seen).
pub(crate) fn run_tracked_uncaptured<R, U: Uses + ?Sized>(
    stream: &Stream,
    op_name: &'static str,
    uses: &U,
    op: impl FnOnce(CUstream) -> Result<R>,
) -> Result<(R, u64)> {
    let s = &stream.inner;
    // `submit` checks the stream's capture state under its lock and refuses
    // (`Error::Capturing`) without running `op`.
    let mut slab = s.device.inner.lock_trackers();
    let mut deps: SmallVec<[Point; 4]> = SmallVec::new();
    uses.each(|t, a| {
        if let Some(tr) = slab.get(t.res().slot) {
            tr.deps_into(s.id, a, &mut deps);
        }
    });
    let (r, ticket) = s.submit(op_name, &deps, op)?;
    uses.each(|t, a| {
        if let Some(tr) = slab.get_mut(t.res().slot) {
            tr.record(s, ticket, a);
        }
    });
    Ok((r, ticket))
}

/// [`run_tracked`] for an operation whose resources belong to two devices (a
/// peer copy): both devices' trackers are locked, in ordinal order.
pub(crate) fn run_tracked_across<R>(
    stream: &Stream,
    op_name: &'static str,
    uses: &[Use<'_>],
    op: impl FnOnce(CUstream) -> Result<R>,
) -> Result<(R, u64)> {
    let s = &stream.inner;
    if s.capturing.load(Ordering::Acquire) {
        return Err(Error::Capturing { op: op_name });
    }
    let mut devices: SmallVec<[&Device; 2]> = SmallVec::new();
    for (t, _) in uses {
        let d = &t.res().device;
        if !devices.iter().any(|x| x.same(d)) {
            devices.push(d);
        }
    }
    devices.sort_by_key(|d| d.ordinal());
    let mut slabs: SmallVec<[(i32, MutexGuard<'_, Trackers>); 2]> =
        devices.iter().map(|d| (d.ordinal(), d.inner.lock_trackers())).collect();
    let mut deps: SmallVec<[Point; 4]> = SmallVec::new();
    for (t, a) in uses {
        let r = t.res();
        if let Some((_, slab)) = slabs.iter().find(|(o, _)| *o == r.device.ordinal())
            && let Some(tr) = slab.get(r.slot)
        {
            tr.deps_into(s.id, *a, &mut deps);
        }
    }
    let (out, ticket) = s.submit(op_name, &deps, op)?;
    for (t, a) in uses {
        let r = t.res();
        if let Some((_, slab)) = slabs.iter_mut().find(|(o, _)| *o == r.device.ordinal())
            && let Some(tr) = slab.get_mut(r.slot)
        {
            tr.record(s, ticket, *a);
        }
    }
    Ok((out, ticket))
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
