//! Named host ranges: a guard, nestable, per thread.

use super::RangeRecord;
use super::clock::{now_ns, thread_id};
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Live recorders, of any device: ranges are recorded while it is > 0.
pub(super) static RECORDERS: AtomicUsize = AtomicUsize::new(0);

static NEXT_RANGE: AtomicU64 = AtomicU64::new(1);

/// An open range on this thread.
struct Open {
    id: u64,
    parent: Option<u64>,
    name: String,
    start_ns: u64,
}

thread_local! {
    /// The open ranges of this thread, innermost last.
    static OPEN: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
}

/// The innermost open range of the calling thread.
pub(crate) fn innermost() -> Option<u64> {
    OPEN.try_with(|o| o.try_borrow().ok().and_then(|o| o.last().map(|r| r.id))).ok().flatten()
}

/// An open host range: ends when dropped (see [`range`]). Not `Send`: a
/// range opens and ends on one thread.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::trace::{self, RecordOptions, Timing};
/// let device = gpu_sync::Device::get(0)?;
/// let recorder = device.record(RecordOptions::new(Timing::HostOnly))?;
/// {
///     let _outer = trace::range("epoch");
///     let _inner = trace::range("step"); // nested: its parent is "epoch"
/// }
/// let rec = recorder.stop()?;
/// let step = rec.ranges.iter().find(|r| r.name == "step").expect("recorded");
/// assert_eq!(step.parent, rec.ranges.iter().find(|r| r.name == "epoch").map(|r| r.id));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[must_use = "the range ends when this guard is dropped"]
pub struct Range {
    /// `None` when no recorder was on at its start.
    id: Option<u64>,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Range").field("id", &self.id).finish()
    }
}

impl Range {
    /// Its id ([`RangeRecord::id`]), `None` when it is not recorded (no
    /// recorder was on when it opened).
    pub fn id(&self) -> Option<u64> {
        self.id
    }
}

/// Opens a named host range on the calling thread, ended when the guard
/// drops; ranges nest (the innermost open one is each operation's
/// [`OpRecord::range`](super::OpRecord::range)). Recorded while any
/// [`Recorder`](super::Recorder) is on; otherwise one atomic load.
pub fn range(name: impl Into<String>) -> Range {
    if RECORDERS.load(Ordering::Relaxed) == 0 {
        return Range { id: None, _not_send: PhantomData };
    }
    let id = NEXT_RANGE.fetch_add(1, Ordering::Relaxed);
    let start_ns = now_ns();
    let name = name.into();
    let pushed = OPEN
        .try_with(|o| {
            let Ok(mut o) = o.try_borrow_mut() else { return false };
            let parent = o.last().map(|r| r.id);
            o.push(Open { id, parent, name, start_ns });
            true
        })
        .unwrap_or(false);
    Range { id: pushed.then_some(id), _not_send: PhantomData }
}

/// Runs `f` inside a [`range`] named `name`.
pub fn scope<R>(name: impl Into<String>, f: impl FnOnce() -> R) -> R {
    let _range = range(name);
    f()
}

impl Drop for Range {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let end_ns = now_ns();
        // Normally the innermost; a guard dropped out of order (moved into
        // a longer-lived place) is found where it is.
        let open = OPEN
            .try_with(|o| {
                let mut o = o.try_borrow_mut().ok()?;
                let at = o.iter().rposition(|r| r.id == id)?;
                Some(o.remove(at))
            })
            .ok()
            .flatten();
        if let Some(r) = open {
            let rec = RangeRecord {
                id,
                parent: r.parent,
                name: r.name,
                thread: thread_id(),
                start_ns: r.start_ns,
                end_ns,
            };
            super::sink::range_ended(rec);
        }
    }
}
