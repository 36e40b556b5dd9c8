//! The blocking flavor: a driver call that blocks the host until its own
//! transfer is done (a copy to or from pageable memory), made on the idle
//! stream with no book held while the driver blocks, and complete when it
//! returns.

use super::across::{books_of, deps_in, record_in};
use crate::engine::timeline::book::book_in;
use crate::engine::timeline::{Point, Timeline};
use crate::engine::track::{Target, Uses};
use crate::error::{Error, Result};
use cuda_sys::BorrowedStream;
use std::sync::Arc;

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
fn run_idle<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    _blocking: &std::sync::MutexGuard<'_, ()>,
    op_name: &'static str,
    uses: &U,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    if s.capture_hint() {
        return Err(Error::Capturing { op: op_name });
    }
    let mut list = books_of(s, uses);
    let dev = &s.device.inner;
    // Lock order: `blocking` (the caller holds it, across the driver call
    // and the wait after it), then books.
    loop {
        crate::engine::capture::host_fn::drain();
        // Unlocked: the stream's queue, then the uses on other streams.
        s.synchronize(op_name)?;
        let found = deps_in(&mut list.lock(), Arc::as_ptr(s), uses);
        let pending = match found {
            Ok(deps) => deps,
            Err(missing) => {
                for b in missing {
                    list.add_held(b);
                }
                continue;
            }
        };
        for p in &pending {
            p.host_wait()?;
        }
        let mut books = list.lock();
        match deps_in(&mut books, Arc::as_ptr(s), uses) {
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

/// The blocking flavor: [`run_idle`], then [`wait_for_borrowed`]:
/// returns once the blocking call's transfer is complete (or the context
/// lost).
pub(in crate::engine) fn run<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op_name: &'static str,
    uses: &U,
    reach: crate::engine::Reach,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    // The device rule, before any lock.
    crate::engine::devices(s, uses, reach)?;
    crate::ffi::refuse(op_name)?;
    // Held until the transfer is known complete: the wait after the call
    // synchronizes the stream, and a capture begun on it meanwhile (by
    // another thread) would make the driver refuse that wait and
    // invalidate the capture (seen in `capture_race`'s staged-copy test:
    // 1 run in about 100).
    let blocking = s.lock_blocking();
    let (r, ticket) = run_idle(s, &blocking, op_name, uses, op)?;
    wait_for_borrowed(s, ticket)?;
    drop(blocking);
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
