//! The one door from gpu-sync to the driver.
//!
//! Every driver call gpu-sync makes is a function of `cuda_sys::result`
//! (one per entry point, typed, out-parameters returned) and passes through
//! [`call`]: inside a host function it calls nothing and fails with
//! `CUDA_ERROR_NOT_PERMITTED` (the driver forbids calls there; see
//! `host_fn`), otherwise it makes the call and maps cuda-sys's
//! [`DriverError`](cuda_sys::DriverError) into [`crate::Error`]. No
//! `unsafe` lives here: the per-call functions that take raw pointers are
//! `unsafe` at their call sites, with the `SAFETY:` argument there.

use crate::error::{Error, Result};
use cuda_sys::{BorrowedContext, Driver};
use std::cell::Cell;

thread_local! {
    /// How many host functions this thread is inside (nested trampolines
    /// cannot happen with the real driver; counted anyway): while non-zero,
    /// [`call`] refuses.
    static REFUSING: Cell<u32> = const { Cell::new(0) };
}

/// Whether driver calls are refused on this thread (it is running a host
/// function started by gpu-sync).
#[inline(always)]
pub(crate) fn calls_refused() -> bool {
    REFUSING.with(Cell::get) != 0
}

/// Enters (`true`) or leaves (`false`) a stretch of this thread in which
/// every driver call is refused (`host_fn::Inside` pairs them).
pub(crate) fn refuse_calls(enter: bool) {
    REFUSING.with(|d| d.set(if enter { d.get() + 1 } else { d.get().saturating_sub(1) }));
}

/// The error for a driver call `call` made inside a host function: the code
/// the driver itself uses for it.
#[cold]
pub(crate) fn not_permitted(call: &'static str) -> Error {
    Error::Driver { call, error: cuda_sys::CuError(cuda_sys::CUresult::CUDA_ERROR_NOT_PERMITTED) }
}

/// `Err` (`CUDA_ERROR_NOT_PERMITTED`, naming `op`) inside a host function,
/// before any lock is taken or driver call made.
#[inline(always)]
pub(crate) fn refuse(op: &'static str) -> Result<()> {
    if calls_refused() { Err(not_permitted(op)) } else { Ok(()) }
}

/// The process-wide driver (loaded or installed), initialized with
/// `cuInit(0)` once: the loader does that for libcuda, but a table installed
/// by other means (a software driver) arrives uninitialized.
pub(crate) fn driver() -> Result<&'static Driver> {
    static INIT: std::sync::OnceLock<Result<()>> = std::sync::OnceLock::new();
    crate::backend::honour_env_on_first_use()?;
    let drv = cuda_sys::driver()?;
    INIT.get_or_init(|| call("cuInit", || cuda_sys::result::init::init(drv, 0))).clone()?;
    Ok(drv)
}

/// Makes the driver call `f` (a `cuda_sys::result` function calling entry
/// point `name`), unless the calling thread is running a host function: then
/// nothing is called and the error is the driver's own
/// `CUDA_ERROR_NOT_PERMITTED` naming `name`.
#[inline(always)]
pub(crate) fn call<T>(name: &'static str, f: impl FnOnce() -> cuda_sys::result::Result<T>) -> Result<T> {
    refuse(name)?;
    Ok(f()?)
}

/// [`call`] without its refusal, for the driver call an operation makes
/// inside the closure it gives `engine::submit`: the engine's first guard
/// refused inside a host function on this thread, and the closure runs on
/// the same thread within that call (before it returns), so the answer
/// cannot have changed. Use it nowhere else.
#[inline(always)]
pub(crate) fn call_admitted<T>(f: impl FnOnce() -> cuda_sys::result::Result<T>) -> Result<T> {
    Ok(f()?)
}

/// Makes the primary context `ctx` current on this thread unless it is
/// already: the one check-then-set of gpu-sync (`DeviceInner::bind`, the
/// recorder's `DeviceFacts::bind`). Whether it is current is asked of
/// cuda-sys's per-call layer (`result::context::is_current_here`), which
/// every safe `cuCtxSetCurrent` passes through, so the answer is never
/// stale: a thread-local read.
///
/// # Errors
/// A driver error from `cuCtxSetCurrent`.
#[inline]
pub(crate) fn bind(drv: &'static Driver, ctx: BorrowedContext<'static>) -> Result<()> {
    if cuda_sys::result::context::is_current_here(drv, ctx.as_raw()) {
        return Ok(());
    }
    call("cuCtxSetCurrent", || cuda_sys::result::context::set_current(drv, Some(ctx)))
}
