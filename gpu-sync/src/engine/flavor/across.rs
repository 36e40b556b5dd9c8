//! The across flavor: an operation whose resources, or the uses it must
//! wait for, belong to several devices (a peer copy; a pinned buffer of one
//! device used on a stream of another). The books of every device involved
//! are locked in ordinal order. Also the helpers the blocking flavor shares
//! (which books, which conflicting points, recording the uses).

use crate::engine::timeline::book::{self, BookList, BookSet, Books, DeviceBook, Step};
use crate::engine::timeline::{Point, Timeline};
use crate::engine::track::Uses;
use crate::error::{Error, Result};
use cuda_sys::BorrowedStream;
use smallvec::SmallVec;
use std::sync::Arc;

/// The books an operation of `stream` over `uses` needs at least: the
/// stream's and each resource's.
pub(super) fn books_of<'a, U: Uses + ?Sized>(stream: &'a Timeline, uses: &'a U) -> BookList<'a> {
    let mut list = BookList::default();
    list.add(&stream.book);
    uses.each(|t, _| list.add(&t.resource().book));
    list
}

/// Conflicting points of `uses` for an operation on stream `stream` (its
/// timeline's address, by which `conflicts::OnStream` compares points),
/// each resource read from its own device's book; `Err(list)` when a
/// conflicting use is on a stream whose device's book is not locked (`list`
/// then names every book needed so far).
pub(super) fn deps_in<U: Uses + ?Sized>(
    books: &mut Books<'_>,
    stream: *const Timeline,
    uses: &U,
) -> Result<SmallVec<[Point; 4]>, Vec<Arc<DeviceBook>>> {
    let mut deps: SmallVec<[Point; 4]> = SmallVec::new();
    let mut missing: Vec<Arc<DeviceBook>> = Vec::new();
    deps_into(books, stream, uses, &mut deps, &mut missing);
    if missing.is_empty() { Ok(deps) } else { Err(missing) }
}

/// [`deps_in`] appending to `deps` and `missing` (the group flavor's parts
/// share one list of each).
#[inline(always)]
pub(super) fn deps_into<U: Uses + ?Sized, const N: usize>(
    books: &mut Books<'_>,
    stream: *const Timeline,
    uses: &U,
    deps: &mut SmallVec<[Point; N]>,
    missing: &mut Vec<Arc<DeviceBook>>,
) {
    let from = deps.len();
    uses.each(|t, a| {
        let r = t.res();
        if let Some(tr) = books.book(r.book.ordinal).and_then(|b| b.tracker(r.slot)) {
            tr.deps(stream, a, |p| deps.push(p.clone()));
        }
    });
    for p in &deps[from..] {
        if !books.has(p.timeline.book.ordinal) {
            missing.push(p.timeline.book.clone());
        }
    }
}

/// Records the uses at `ticket` of `stream`, each in its own device's book.
pub(super) fn record_in<U: Uses + ?Sized>(
    books: &mut impl BookSet,
    stream: &Arc<Timeline>,
    ticket: u64,
    uses: &U,
) {
    uses.each(|t, a| {
        let r = t.res();
        if let Some(tr) = books.book(r.book.ordinal).and_then(|b| b.tracker_mut(r.slot)) {
            tr.record_use(stream, ticket, a);
        }
    });
}

/// A tracked operation whose resources, or the uses it must
/// wait for, belong to several devices (a peer copy; a pinned buffer of one
/// device used on a stream of another): the books of every device involved
/// are locked, in ordinal order (found by locking what is known, reading the
/// conflicts, and locking again with any device they add). Refused on a
/// capturing stream.
pub(super) fn run<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    reach: crate::engine::Reach,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    // The device rule, before any lock.
    crate::engine::devices(s, uses, reach)?;
    if s.capture_hint() {
        return Err(Error::Capturing { op: op_name });
    }
    let mut list = books_of(s, uses);
    let mut op = Some(op);
    book::locked(&mut list, |books| {
        let deps = match deps_in(books, Arc::as_ptr(s), uses) {
            Ok(deps) => deps,
            Err(missing) => return Ok(Step::Missing(missing)),
        };
        s.device.inner.bind()?;
        let op = op.take().ok_or_else(|| Error::Internal("the across flavor ran its call twice".into()))?;
        let (out, ticket) = s.submit_in(books, op_name, &deps, op)?;
        record_in(books, s, ticket, uses);
        Ok(Step::Done((out, ticket)))
    })
}
