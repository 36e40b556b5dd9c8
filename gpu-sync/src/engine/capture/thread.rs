//! The calling thread's capture state: whether it is capturing a graph
//! (the one place that answers "is this thread capturing?"), and the frees
//! that fall due on it meanwhile.
//!
//! In thread-local capture mode the driver forbids a capturing thread the
//! calls that may synchronize implicitly; gpu-sync refuses them here before
//! they reach the driver ([`refuse_on_capturing_thread`]) and puts off the
//! frees that `Drop` cannot refuse ([`free_outside_capture`]).

use super::deferred::{self, Until};
use crate::error::{Error, Result};
use std::cell::Cell;

thread_local! {
    /// Captures in progress on this thread. In thread-local capture mode the
    /// driver forbids this thread the calls that may synchronize implicitly
    /// (`cuMemHostAlloc`, `cuMemAlloc`, `cuMemFree`, `cuMemFreeHost`,
    /// `cuCtxSynchronize`, …): one of them silently invalidates the capture.
    static CAPTURING: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread is capturing a graph.
pub(in crate::engine) fn thread_is_capturing() -> bool {
    CAPTURING.with(Cell::get) > 0
}

/// [`Error::Capturing`] if this thread is capturing.
pub(in crate::engine) fn refuse_on_capturing_thread(op: &'static str) -> Result<()> {
    if thread_is_capturing() { Err(Error::Capturing { op }) } else { Ok(()) }
}

/// Runs `free` now, or when this thread's capture ends if it is capturing
/// (for frees that come from `Drop` and cannot return an error), queued in
/// the one deferred-work queue.
pub(in crate::engine) fn free_outside_capture(free: deferred::Work) {
    if thread_is_capturing() {
        deferred::defer(Until::CaptureEnds(std::thread::current().id()), free);
    } else {
        free();
    }
}

/// Marks this thread as capturing for its lifetime.
pub(in crate::engine) struct ThreadCapture;

impl ThreadCapture {
    pub(in crate::engine) fn begin() -> ThreadCapture {
        CAPTURING.with(|c| c.set(c.get() + 1));
        ThreadCapture
    }
}

impl Drop for ThreadCapture {
    fn drop(&mut self) {
        let left = CAPTURING.with(|c| {
            let n = c.get().saturating_sub(1);
            c.set(n);
            n
        });
        if left == 0 {
            deferred::run_capture_end();
        }
    }
}
