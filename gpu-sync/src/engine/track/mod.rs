//! What the engine tracks: resources (device allocations, pinned host
//! buffers), each a slot in its device's book, and the uses an operation
//! declares ([`Uses`]). record_stream by construction: every tracked
//! operation records, on each resource it touches, which stream used it,
//! how, and at which point of that stream's timeline; and waits
//! (device-side) for the conflicting uses on other streams first (the
//! rules: `timeline::conflicts`; the submission itself: `flavor`).
//!
//! A resource is always looked up in its **own** device's book, whatever the
//! stream: a pinned buffer of device 0 used on a stream of device 1 is
//! tracked in device 0's book.

mod alloc;

use crate::device::Device;
use crate::engine::timeline::book::{DeviceBook, NO_SLOT, book_of};
use crate::engine::timeline::conflicts::Access;
use crate::engine::timeline::{Point, Timeline};
use crate::error::Result;
use cuda_sys::CUdeviceptr;
use smallvec::SmallVec;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_RESOURCE_ID: AtomicU64 = AtomicU64::new(1);

/// A tracked resource (a device allocation or a pinned host buffer): a slot
/// in its device's book, released when the resource is dropped.
pub(crate) struct Resource {
    /// Process-unique id (keys capture-local bookkeeping).
    pub id: u64,
    pub(in crate::engine) slot: u32,
    pub(in crate::engine) book: Arc<DeviceBook>,
}

impl Resource {
    /// A new resource of `device` with no uses.
    pub(crate) fn new(device: &Device) -> Resource {
        let book = book_of(device);
        let slot = book.lock().new_tracker();
        Resource { id: NEXT_RESOURCE_ID.fetch_add(1, Ordering::Relaxed), slot, book }
    }

    /// A resource with no slot (what a moved-out value leaves behind), of
    /// the same book as `self`.
    pub(crate) fn empty_like(&self) -> Resource {
        Resource { id: 0, slot: NO_SLOT, book: self.book.clone() }
    }

    /// Whether this resource is tracked in `book`.
    #[inline(always)]
    pub(in crate::engine) fn is_in(&self, book: &Arc<DeviceBook>) -> bool {
        Arc::ptr_eq(&self.book, book)
    }

    /// Records a write at `point` (a stream-ordered allocation).
    pub(in crate::engine) fn set_write(&self, point: Point) {
        let old = self.book.lock().tracker_mut(self.slot).and_then(|t| t.write.replace(point));
        // Dropped with the book unlocked.
        drop(old);
    }

    /// Every use not yet known complete.
    pub(in crate::engine) fn outstanding(&self) -> SmallVec<[Point; 4]> {
        match self.book.lock().tracker_mut(self.slot) {
            Some(t) => t.outstanding(),
            None => SmallVec::new(),
        }
    }

    /// Blocks the host until every recorded use has completed (the book is
    /// not locked while waiting).
    pub(crate) fn host_wait_all(&self) -> Result<()> {
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
    pub(in crate::engine) res: Resource,
}

/// A resource an operation touches.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    /// Device memory (can be captured into a graph).
    Device(&'a Arc<Allocation>),
    /// A pinned host buffer (never captured).
    Host(&'a Resource),
}

impl<'a> Target<'a> {
    #[inline(always)]
    pub(in crate::engine) fn res(&self) -> &Resource {
        self.resource()
    }

    /// The resource, borrowed for as long as the target's own borrow.
    #[inline(always)]
    pub(in crate::engine) fn resource(self) -> &'a Resource {
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
    /// Its uses, in order.
    fn iter(&self) -> impl Iterator<Item = (Target<'_>, Access)>;

    /// Calls `f` with each use (the eager flavor's passes). A type whose
    /// [`Uses::iter`] filters (a launch's arguments) writes it as a plain
    /// loop: the filtering iterator's nested loop costs a pass more.
    #[inline(always)]
    fn each<'s>(&'s self, mut f: impl FnMut(Target<'s>, Access)) {
        for (t, a) in self.iter() {
            f(t, a);
        }
    }
}

impl Uses for [Use<'_>] {
    #[inline(always)]
    fn iter(&self) -> impl Iterator<Item = (Target<'_>, Access)> {
        <[Use<'_>]>::iter(self).map(|(t, a)| (*t, *a))
    }
}

impl<const N: usize> Uses for [Use<'_>; N] {
    #[inline(always)]
    fn iter(&self) -> impl Iterator<Item = (Target<'_>, Access)> {
        Uses::iter(self.as_slice())
    }
}
