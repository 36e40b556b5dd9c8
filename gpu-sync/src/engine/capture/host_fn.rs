//! Host functions ([`crate::Stream::launch_host_fn`]) and what they may not
//! do.
//!
//! The driver runs a host function on one of its own threads, and forbids it
//! to call the driver (`cuLaunchHostFunc`: "the host function must not make
//! any CUDA API calls"; such a call may return `CUDA_ERROR_NOT_PERMITTED`
//! or deadlock). A closure given to `launch_host_fn` may still own gpu-sync
//! objects — a buffer it drops, a stream handle — whose `Drop` frees through
//! the driver and takes gpu-sync's locks, which the thread waiting for the
//! host function may hold. So, while a host function runs on this thread
//! (a flag the trampoline sets):
//! - every `Drop` that would call the driver or lock a tracker or stream
//!   hands its work to the deferred-work queue instead ([`defer`]);
//! - every driver call made through gpu-sync fails with
//!   `CUDA_ERROR_NOT_PERMITTED` without reaching the driver (`ffi::call`
//!   asks [`active`]), and every operation refuses before taking a lock
//!   (`engine::submit` and the other entry points ask `ffi::refuse` first).
//!
//! The queue is drained ([`drain`]) on an ordinary thread by the next
//! tracked operation, pageable copy, or stream or device synchronization —
//! where a host function's drops are naturally observed.
//!
//! Unsafe code (allowed by `capture`): [`launch`] hands the driver a
//! callback and a boxed closure (`cuLaunchHostFunc` takes raw pointers), and
//! the callback takes the box back.

use crate::error::Result;
use crate::ffi::call;
use cuda_sys::BorrowedStream;
use cuda_sys::result as cu;
use std::ffi::c_void;

/// Work a `Drop` could not do inside a host function.
pub(in crate::engine) type Deferred = super::deferred::Work;

/// Whether the calling thread is running a host function started by gpu-sync.
#[inline(always)]
pub(in crate::engine) fn active() -> bool {
    crate::ffi::calls_refused()
}

pub(in crate::engine) use crate::ffi::not_permitted;

/// Queues `work` to run later on an ordinary thread (see [`drain`]), in the
/// one deferred-work queue (`deferred`).
pub(in crate::engine) fn defer(work: Deferred) {
    super::deferred::defer(super::deferred::Until::Ordinary, work);
}

/// Runs `work` now, or defers it when called inside a host function.
pub(in crate::engine) fn now_or_deferred(work: impl FnOnce() + Send + 'static) {
    if active() { defer(Box::new(work)) } else { work() }
}

/// Runs the work deferred by host functions. Does nothing inside a host
/// function. Must be called with no gpu-sync lock held (the work frees
/// buffers, which locks trackers and streams).
#[inline]
pub(in crate::engine) fn drain() {
    super::deferred::run_ordinary();
}

/// Marks the calling thread as inside a host function until dropped (also
/// when the host function panics).
pub(crate) struct Inside(());

impl Inside {
    /// Enters a host function on this thread.
    pub(crate) fn enter() -> Inside {
        crate::ffi::refuse_calls(true);
        Inside(())
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        crate::ffi::refuse_calls(false);
    }
}

/// A host function's closure.
pub(crate) type HostFn = Box<dyn FnOnce() + Send>;

/// Queues `f` on `stream` (`cuLaunchHostFunc`): the driver runs it once, on
/// one of its threads, marked as inside a host function ([`Inside`]), with a
/// panic caught and logged (it cannot unwind into the driver). On error `f`
/// is dropped without running.
pub(crate) fn launch(stream: BorrowedStream<'_>, f: HostFn) -> Result<()> {
    unsafe extern "C" fn trampoline(user: *mut c_void) {
        // While `f` runs and while what it owns drops, gpu-sync makes no
        // driver call and takes no lock here: drops are deferred.
        let _inside = Inside::enter();
        // SAFETY: `user` is the `Box<HostFn>` leaked by `launch` for exactly
        // this call; the driver calls each host function once.
        let f = unsafe { Box::from_raw(user.cast::<HostFn>()) };
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
            log::error!("a stream host function panicked; the panic was stopped at the driver boundary");
        }
    }
    let user: *mut HostFn = Box::into_raw(Box::new(f));
    // SAFETY: `trampoline` matches CUhostFn and makes no CUDA call (every
    // gpu-sync call inside it refuses, see the module docs); `user` is a
    // `Send` closure that stays valid until the trampoline reclaims it
    // (exactly once, when it runs, on any thread).
    let r = call("cuLaunchHostFunc", || unsafe {
        cu::stream::launch_host_func(stream, Some(trampoline), user.cast())
    });
    if r.is_err() {
        // SAFETY: the driver did not take `user` (the call failed or was
        // never made), so this is its only owner.
        drop(unsafe { Box::from_raw(user) });
    }
    r
}
