//! The eager flavor: an operation over resources of its stream's device
//! only, with its conflicting uses on that device too — the hot path: one
//! book lock for the stream's state and every tracker. Anything touching
//! another device goes to [`super::across`].

use super::across;
use crate::engine::Reach;
use crate::engine::timeline::Timeline;
use crate::engine::timeline::book::Book;
use crate::engine::track::Uses;
use crate::error::{Error, Result};
use cuda_sys::BorrowedStream;
use std::sync::Arc;

/// Runs `op` on stream `s` as a tracked operation over `uses`, once the
/// facade's guards (`engine::submit`) have passed and the capture routing
/// sent it here: waits for conflicting uses on other streams, submits, and
/// records the new uses. On a capturing stream it is refused with
/// [`Error::Capturing`] without running `op` (decided under the book lock,
/// so a capture beginning meanwhile is seen). Returns `op`'s result and the
/// operation's ticket.
#[inline(always)]
pub(in crate::engine) fn run<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    (reach, home): (Reach, bool),
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    // A resource of another device's book: the across flavor, which asks
    // the device rule (`engine::reached`) before any lock (a resource's book
    // never changes: no lock is needed to ask). `home`: the caller's own
    // pass found every one in the stream's book (`engine::Home`).
    debug_assert!(!home || uses.iter().all(|(t, _)| t.res().is_in(&s.book)), "a buffer left out of Home");
    if !home && !all_in_book(s, uses) {
        return to_across(s, op_name, uses, reach, op);
    }
    // The stream's context, before its waits and its call (a wait on another
    // device's stream binds it back).
    s.device.inner.bind()?;
    let mut book = s.lock();
    // One pass (`Uses::each`: a launch's plain loop over its arguments):
    // whether any use conflicts (the hot path — the same stream
    // again — finds none and collects nothing), and whether a conflicting
    // use belongs to another device. The first conflict is
    // kept as where it sits (its tracker's slot, and the write or a
    // reader), so a single one (a handoff) is waited for without a second
    // pass over the uses.
    let (mut first, mut more, mut foreign) = (None::<(u32, Option<usize>)>, false, false);
    uses.each(|t, a| {
        let r = t.res();
        if let Some(tr) = book.tracker(r.slot) {
            tr.deps_at(Arc::as_ptr(s), a, |at, p| {
                if first.is_none() {
                    first = Some((r.slot, at));
                } else {
                    more = true;
                }
                foreign |= !Arc::ptr_eq(&p.timeline.book, &s.book);
            });
        }
    });
    if foreign {
        drop(book);
        return to_across(s, op_name, uses, reach, op);
    }
    waits_submit_record(s, op_name, uses, &mut book, (first, more), op)
}

/// The rest of [`run`], book held: the waits for the conflicts its pass
/// found (`first`, and whether there are `more`), the submission and the
/// record of the uses.
#[inline(always)]
fn waits_submit_record<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    book: &mut Book,
    (first, more): (Option<(u32, Option<usize>)>, bool),
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    if let Some((slot, at)) = first {
        // Refused before any wait is made.
        s.refuse_if_capturing(op_name)?;
        let (trackers, streams) = book.split();
        if !more {
            // The one conflict, found again where the pass above saw it
            // (same lock held): the wait made in place, no point cloned.
            let p = trackers.get(slot as usize).and_then(|tr| tr.0.at(at)).ok_or_else(lost_conflict)?;
            s.wait_same_device(streams, p)?;
        } else {
            // Each wait made in place, as a second pass over the trackers
            // finds it. The first error is kept; assigned only on that cold
            // path, so the hot path never drops a `Result` (an out-of-line
            // call per wait).
            let mut waited: Option<Error> = None;
            uses.each(|t, a| {
                if let Some(tr) = trackers.get(t.res().slot as usize) {
                    tr.0.deps(Arc::as_ptr(s), a, |p| {
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
    }
    let (r, ticket) = s.submit_in(&mut *book, op_name, &[], op)?;
    // `#[inline(always)]`: LLVM rates this call site cold (see
    // `engine::submit`) and would call the record out of line once per
    // argument (about 130 instructions a launch).
    uses.each(
        #[inline(always)]
        |t, a| {
            if let Some(tr) = book.tracker_mut(t.res().slot) {
                tr.record_use(s, ticket, a);
            }
        },
    );
    Ok((r, ticket))
}

/// The across flavor, for an operation [`run`] found to touch another
/// device (a resource of another book, or a conflicting use on another
/// device's stream): out of line, so the hot path never makes its
/// arguments (the [`Reach`] among them).
#[cold]
#[inline(never)]
fn to_across<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    reach: Reach,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    across::run(s, op_name, uses, reach, op)
}

/// The error for a conflict the first pass saw but the book no longer
/// holds under the same lock (a broken invariant, reported rather than
/// panicked on).
#[cold]
#[inline(never)]
fn lost_conflict() -> Error {
    Error::Internal("a conflicting use seen under the book lock was gone under the same lock".into())
}

/// Whether every resource of `uses` is tracked in the book of `s` (asked
/// out of line: a launch, the hot path, answers with `engine::Home`).
#[inline(never)]
fn all_in_book<U: Uses + ?Sized>(s: &Timeline, uses: &U) -> bool {
    uses.iter().all(|(t, _)| t.res().is_in(&s.book))
}
