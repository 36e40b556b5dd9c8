//! The calling thread's context ([Context Management][ctx]; peer access from
//! [Peer Context Memory Access][peer]).
//!
//! [ctx]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html
//! [peer]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PEER__ACCESS.html

use super::Result;
use crate::handle::{AsBorrowed, kind};
use crate::{CUcontext, CUdevice, Driver};
use std::cell::Cell;

thread_local! {
    /// The context the last successful [`set_current`] on this thread made
    /// current, with its table (null: none, or unknown after a failure).
    static SET_HERE: Cell<(*const Driver, CUcontext)> =
        const { Cell::new((std::ptr::null(), std::ptr::null_mut())) };
}

/// Makes `ctx` current on the calling thread, or none with `None`
/// (`cuCtxSetCurrent`), and remembers it for [`is_current_here`].
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)
///
/// # Errors
/// The driver's code; `Refused` for a context of another table;
/// `Unsupported` without the entry point.
pub fn set_current(drv: &Driver, ctx: Option<impl AsBorrowed<kind::ContextKind>>) -> Result<()> {
    let raw = match &ctx {
        Some(c) => {
            let c = c.as_borrowed();
            crate::handle::same_driver("cuCtxSetCurrent", drv, c.driver())?;
            c.as_raw()
        }
        None => std::ptr::null_mut(),
    };
    // Unknown until the call succeeds.
    SET_HERE.with(|h| h.set((std::ptr::null(), std::ptr::null_mut())));
    // SAFETY: `raw` is null or a live context (the handle proves it).
    unsafe { call!(drv, cuCtxSetCurrent(raw)) }?;
    SET_HERE.with(|h| h.set((std::ptr::from_ref(drv), raw)));
    Ok(())
}

/// Whether the last context made current on this thread through this
/// layer ([`set_current`]) is `ctx` of `drv`: a thread-local read, no driver
/// call. Every safe way to change the calling thread's context goes through
/// `set_current`, so a cache of "which context is current" kept by a crate
/// above (gpu-sync's) asks this instead of keeping its own, which safe code
/// could make stale. A context changed by other means (the raw table, the
/// runtime API, another library) is not seen: that code is `unsafe` or
/// foreign, and its owner makes the right context current again.
#[inline(always)]
pub fn is_current_here(drv: &Driver, ctx: CUcontext) -> bool {
    // After a failed `set_current` the table is null: never equal.
    let (d, c) = SET_HERE.get();
    c == ctx && std::ptr::eq(d, drv)
}

/// The calling thread's current context (`cuCtxGetCurrent`), `None` when
/// it has none. Raw: nothing proves how long it stays alive.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_current(drv: &Driver) -> Result<Option<CUcontext>> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: writes one handle through a valid pointer.
    unsafe { call!(drv, cuCtxGetCurrent(&mut ctx)) }?;
    Ok((!ctx.is_null()).then_some(ctx))
}

/// The current context's device (`cuCtxGetDevice`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_CONTEXT` without a current context; `Unsupported`
/// without the entry point.
pub fn get_device(drv: &Driver) -> Result<CUdevice> {
    let mut d: CUdevice = 0;
    // SAFETY: writes one device through a valid pointer.
    unsafe { call!(drv, cuCtxGetDevice(&mut d)) }?;
    Ok(d)
}

/// Blocks until the current context's device has finished all work
/// (`cuCtxSynchronize`, the pre-13.0 ABI without a context argument).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)
///
/// # Errors
/// The error of any failed work (sticky errors included);
/// `CUDA_ERROR_INVALID_CONTEXT` without a current context; `Unsupported`
/// without the entry point.
pub fn synchronize(drv: &Driver) -> Result<()> {
    // SAFETY: no arguments.
    unsafe { call!(drv, cuCtxSynchronize()) }
}

/// The current context's stream priority range as (least, greatest)
/// (`cuCtxGetStreamPriorityRange`); greater priority is a lower number.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_stream_priority_range(drv: &Driver) -> Result<(i32, i32)> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: writes two ints through valid pointers.
    unsafe { call!(drv, cuCtxGetStreamPriorityRange(&mut least, &mut greatest)) }?;
    Ok((least, greatest))
}

/// Lets the current context access `peer`'s memory
/// (`cuCtxEnablePeerAccess`); `flags` must be 0.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PEER__ACCESS.html)
///
/// # Errors
/// `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`,
/// `CUDA_ERROR_PEER_ACCESS_UNSUPPORTED`, …; `Unsupported` without the entry
/// point.
pub fn enable_peer_access(peer: impl AsBorrowed<kind::ContextKind>, flags: u32) -> Result<()> {
    let peer = peer.as_borrowed();
    // SAFETY: `peer` is a live context (the handle proves it).
    unsafe { call!(peer.driver(), cuCtxEnablePeerAccess(peer.as_raw(), flags)) }
}

/// Stops the current context's access to `peer`'s memory
/// (`cuCtxDisablePeerAccess`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PEER__ACCESS.html)
///
/// # Errors
/// `CUDA_ERROR_PEER_ACCESS_NOT_ENABLED` when access was not enabled,
/// `CUDA_ERROR_INVALID_CONTEXT`, …; `Unsupported` without the entry point.
pub fn disable_peer_access(peer: impl AsBorrowed<kind::ContextKind>) -> Result<()> {
    let peer = peer.as_borrowed();
    // SAFETY: `peer` is a live context (the handle proves it).
    unsafe { call!(peer.driver(), cuCtxDisablePeerAccess(peer.as_raw())) }
}
