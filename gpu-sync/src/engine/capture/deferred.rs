//! The one queue of work gpu-sync puts off, and when each item may run.
//!
//! Two situations forbid a `Drop` (or a free it starts) to do its work now:
//! - inside a host function no driver call may be made and no gpu-sync lock
//!   taken (see `host_fn`): the work waits for an ordinary thread
//!   ([`Until::Ordinary`]), which runs it at its next tracked operation,
//!   pageable copy, or stream or device synchronization ([`run_ordinary`]);
//! - on a thread capturing a graph (thread-local capture mode) a free may
//!   synchronize implicitly and invalidate the capture (see `thread`): the
//!   work waits for the end of that thread's capture
//!   ([`Until::CaptureEnds`], [`run_capture_end`]);
//! - a stream-ordered free on a capturing stream would become a node of the
//!   graph: it waits for the end of that stream's capture
//!   ([`Until::StreamCaptureEnds`], [`run_stream_capture_end`]).
//!
//! All wait in one process-wide queue, each item tagged with its condition.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::ThreadId;

/// Work put off.
pub(in crate::engine) type Work = Box<dyn FnOnce() + Send>;

/// When deferred work may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum Until {
    /// On any ordinary thread (one not running a host function).
    Ordinary,
    /// When this thread's graph capture ends, on that thread.
    CaptureEnds(ThreadId),
    /// When the capture the stream with this id takes part in ends (queued
    /// with the stream's state locked and its capture seen, so the end of
    /// the capture, which clears it under that lock, runs it afterwards).
    StreamCaptureEnds(u64),
}

static QUEUE: Mutex<Vec<(Until, Work)>> = Mutex::new(Vec::new());
/// How many [`Until::Ordinary`] items the queue holds: lets
/// [`run_ordinary`], called on every tracked operation, skip the lock.
static ORDINARY: AtomicUsize = AtomicUsize::new(0);

/// Queues `work` until `until`.
pub(in crate::engine) fn defer(until: Until, work: Work) {
    let mut q = QUEUE.lock().unwrap_or_else(|p| p.into_inner());
    q.push((until, work));
    if until == Until::Ordinary {
        ORDINARY.fetch_add(1, Ordering::Release);
    }
}

/// Takes the items queued until `until`, in queue order.
fn take(until: Until) -> Vec<Work> {
    let mut q = QUEUE.lock().unwrap_or_else(|p| p.into_inner());
    let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut *q).into_iter().partition(|(u, _)| *u == until);
    *q = later;
    if until == Until::Ordinary {
        ORDINARY.fetch_sub(now.len(), Ordering::Release);
    }
    now.into_iter().map(|(_, w)| w).collect()
}

/// Runs the work put off until an ordinary thread. Does nothing inside a
/// host function. Must be called with no gpu-sync lock held (the work frees
/// buffers, which locks trackers and streams).
#[inline]
pub(in crate::engine) fn run_ordinary() {
    // One load on the hot path (nothing queued); the host-function test
    // only when there is work to run.
    if ORDINARY.load(Ordering::Acquire) != 0 {
        run_ordinary_slow();
    }
}

#[cold]
#[inline(never)]
fn run_ordinary_slow() {
    if crate::ffi::calls_refused() {
        return;
    }
    for w in take(Until::Ordinary) {
        w();
    }
}

/// Runs the work this thread put off until its capture ended (call when it
/// has).
pub(in crate::engine) fn run_capture_end() {
    for w in take(Until::CaptureEnds(std::thread::current().id())) {
        w();
    }
}

/// Runs the work put off until the capture of stream `stream` ended (call
/// once it has, with the stream's capture cleared).
pub(in crate::engine) fn run_stream_capture_end(stream: u64) {
    for w in take(Until::StreamCaptureEnds(stream)) {
        w();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn each_item_runs_once_under_its_own_condition() {
        let ran = Arc::new(AtomicU32::new(0));
        let me = std::thread::current().id();
        let bump = |bit: u32| {
            let ran = ran.clone();
            Box::new(move || {
                ran.fetch_or(bit, Ordering::SeqCst);
            }) as Work
        };
        defer(Until::CaptureEnds(me), bump(1));
        defer(Until::Ordinary, bump(2));
        defer(Until::StreamCaptureEnds(u64::MAX), bump(4));
        run_stream_capture_end(u64::MAX - 1);
        assert_eq!(ran.load(Ordering::SeqCst) & 4, 0);
        run_stream_capture_end(u64::MAX);
        assert_eq!(ran.load(Ordering::SeqCst) & 4, 4);
        ran.store(0, Ordering::SeqCst);
        // Another thread's capture end runs nothing of this thread's.
        std::thread::spawn(run_capture_end).join().expect("no panic");
        assert_eq!(ran.load(Ordering::SeqCst) & 1, 0);
        run_capture_end();
        assert_eq!(ran.load(Ordering::SeqCst) & 1, 1);
        run_ordinary();
        assert_eq!(ran.load(Ordering::SeqCst), 3);
        // Nothing runs twice.
        ran.store(0, Ordering::SeqCst);
        run_capture_end();
        run_ordinary();
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    }
}
