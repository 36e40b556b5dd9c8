//! The group flavor: **one** operation over several streams, of one device
//! or several — work that one host call enqueues on N streams at once (an
//! NCCL group, whose `ncclGroupEnd` enqueues on every rank's stream; a
//! foreign call given several streams, `gpu_sync::ForeignGroup`).
//!
//! Submitting it once per stream would draw a stream's ticket before its
//! work is enqueued (the work of every stream is enqueued by the last
//! call), which `safety.rs` point 4 forbids. Here, under the books of every
//! device involved (each stream's, each resource's, each conflicting use's:
//! locked in ordinal order by `book::locked`, the one way to lock several):
//! every part's conflicting uses are read, then every stream is made to
//! wait for its own (device-side), then the one call runs, and only after
//! it returns each stream draws its ticket and its part's uses are recorded
//! at it. The uses are recorded whether the call succeeded or not: a group
//! call that fails part-way (NCCL's `ncclGroupEnd`) may have enqueued some
//! of its work, and recording uses of work that never ran only makes later
//! work wait for a marker that completes at once.

use super::across::{deps_into, record_in};
use super::captured::KeepAlive;
use crate::engine::timeline::Timeline;
use crate::engine::timeline::book::{self, BookList, Step, book_in};
use crate::engine::timeline::conflicts::Access;
use crate::engine::track::{Use, Uses};
use crate::engine::{Point, Reach};
use crate::error::{Error, Result};
use cuda_sys::BorrowedStream;
use smallvec::SmallVec;
use std::sync::Arc;

/// One stream of a group operation and the uses of the work enqueued on it.
pub(crate) struct Part<'a> {
    pub(in crate::engine) stream: &'a Arc<Timeline>,
    pub(in crate::engine) uses: &'a [Use<'a>],
    /// What a graph capturing this part keeps alive (a communicator),
    /// cloned only when it is captured.
    pub(in crate::engine) keep: Option<&'a dyn Keep>,
}

/// What a graph capturing a [`Part`] keeps alive: a shared handle, cloned
/// (into a [`KeepAlive`]) only by a capture, so an eager group clones
/// nothing.
pub(crate) trait Keep: Send + Sync {
    /// A new strong handle on it, for the graph.
    fn keep_alive(&self) -> KeepAlive;
}

impl<T: Send + Sync + 'static> Keep for Arc<T> {
    fn keep_alive(&self) -> KeepAlive {
        self.clone()
    }
}

impl<'a> Part<'a> {
    /// The work of a group operation on `stream`, touching `uses` (each
    /// buffer reached from the stream's device: the engine checks).
    pub(crate) fn new(stream: &'a Arc<Timeline>, uses: &'a [Use<'a>]) -> Part<'a> {
        Part { stream, uses, keep: None }
    }

    /// The same part, whose work a graph that captures it must keep `keep`
    /// alive for (its communicator: each replay runs the collective).
    pub(crate) fn keeping(self, keep: &'a dyn Keep) -> Part<'a> {
        Part { keep: Some(keep), ..self }
    }
}

/// The tickets of a group operation, one per part, in the parts' order.
pub(crate) type Tickets = SmallVec<[u64; 4]>;

/// Runs `call` — which enqueues the work of every part, each on the raw
/// stream of the same index — as one tracked operation (see the module
/// docs), once the facade's guards (`engine::submit_group`) have passed.
/// Refused, before any lock, with [`Error::InvalidArgument`] when there is
/// no part or when one allocation is used by two parts and written by
/// either (the parts' work runs concurrently: nothing can order it), with
/// [`Error::DeviceMismatch`] for a buffer a part's stream does not reach,
/// and with [`Error::Capturing`] when a stream captures (checked again under
/// the books, before anything is enqueued).
///
/// # Errors
/// The refusals; the driver errors of the waits; `call`'s error (its uses
/// recorded all the same).
pub(in crate::engine) fn run<R>(
    op_name: &'static str,
    parts: &[Part<'_>],
    call: impl FnOnce(&[BorrowedStream<'_>]) -> Result<R>,
) -> Result<(R, Tickets)> {
    if parts.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{op_name}: an operation over several streams was given none"
        )));
    }
    let mut list = BookList::default();
    // Whether every buffer is in its own part's stream's book (the usual
    // group: each rank's buffers on its device).
    let mut local = true;
    for p in parts {
        // The device rule, before any lock.
        if !crate::engine::devices_local(p.stream, p.uses, Reach::Every("a buffer"))? {
            local = false;
            p.uses.each(|t, _| list.add(&t.resource().book));
        }
        if p.stream.capture_hint() {
            return Err(Error::Capturing { op: op_name });
        }
        list.add(&p.stream.book);
    }
    // Every buffer local and as many books as parts: no two parts share a
    // device, so none shares a buffer.
    if !local || list.len() != parts.len() {
        refuse_shared_writes(op_name, parts)?;
    }
    let mut call = Some(call);
    book::locked(&mut list, |books| {
        // Every part's conflicting uses, read before anything is enqueued
        // (this operation's own uses are recorded only after its call).
        // One list for every part's points; `ends[i]` closes part `i`'s.
        let mut deps: SmallVec<[Point; 4]> = SmallVec::new();
        let mut ends: SmallVec<[usize; 4]> = SmallVec::new();
        let mut missing = Vec::new();
        for p in parts {
            deps_into(books, Arc::as_ptr(p.stream), p.uses, &mut deps, &mut missing);
            ends.push(deps.len());
        }
        if !missing.is_empty() {
            return Ok(Step::Missing(missing));
        }
        // Refused before any wait is made.
        for p in parts {
            p.stream.refuse_if_capturing(op_name)?;
        }
        // Each stream waits for its own part's conflicts, its context bound
        // (another device's marker records with it current).
        let mut from = 0;
        for (p, &end) in parts.iter().zip(&ends) {
            let d = &deps[from..end];
            from = end;
            // Only a wait on another stream needs the context (a part with
            // none makes no driver call here).
            if d.iter().any(|pt| pt.timeline.id != p.stream.id) {
                p.stream.device.inner.bind()?;
            }
            p.stream.wait_before(books, op_name, d)?;
        }
        parts[0].stream.device.inner.bind()?;
        let mut raws: SmallVec<[BorrowedStream<'_>; 4]> = SmallVec::new();
        for p in parts {
            raws.push(p.stream.raw());
        }
        let call =
            call.take().ok_or_else(|| Error::Internal("the group flavor ran its call twice".into()))?;
        let r = call(&raws);
        // A ticket per part, drawn after the call returned, and its uses.
        let mut tickets = Tickets::new();
        for p in parts {
            let st = book_in(books, p.stream.book.ordinal)?.stream(p.stream);
            let ticket = p.stream.draw_ticket(st);
            record_in(books, p.stream, ticket, p.uses);
            tickets.push(ticket);
        }
        r.map(|r| Step::Done((r, tickets)))
    })
}

/// [`Error::InvalidArgument`] when one allocation is used by two parts and
/// written by either: their work is concurrent, so the engine could neither
/// order it nor keep both writes (a tracker keeps a resource's last write).
/// Each use is compared with the uses of the parts before its own (a group
/// holds a few parts of a few uses each), by the resource's address (each
/// lives at one place while the operation borrows it).
pub(in crate::engine) fn refuse_shared_writes(op_name: &'static str, parts: &[Part<'_>]) -> Result<()> {
    for (i, p) in parts.iter().enumerate() {
        for &(t, a) in p.uses {
            let res: *const _ = t.res();
            for q in &parts[..i] {
                for &(u, b) in q.uses {
                    if std::ptr::eq(u.res(), res) && (a == Access::Write || b == Access::Write) {
                        return Err(shared_write(op_name));
                    }
                }
            }
        }
    }
    Ok(())
}

/// [`refuse_shared_writes`]'s error.
#[cold]
#[inline(never)]
fn shared_write(op_name: &'static str) -> Error {
    Error::InvalidArgument(format!(
        "{op_name}: one buffer is used on two streams of one operation and written on one of them; \
         their work runs concurrently, so nothing orders it (split the operation, or use \
         separate buffers)"
    ))
}
