//! Primary contexts ([Primary Context Management][pc]).
//!
//! [pc]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html

use super::Result;
use crate::handle::{Borrowed, BorrowedContext};
use crate::{CUcontext, CUdevice, Driver};

/// Retains the device's primary context (`cuDevicePrimaryCtxRetain`),
/// creating it on first use. The context stays alive until as many
/// [`release`]s as retains; since `release` is `unsafe`, the returned handle
/// is `'static`.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_DEVICE`, `CUDA_ERROR_OUT_OF_MEMORY`, …;
/// `Unsupported` without the entry point.
pub fn retain(drv: &'static Driver, dev: CUdevice) -> Result<BorrowedContext<'static>> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: writes one context handle through a valid pointer.
    unsafe { call!(drv, cuDevicePrimaryCtxRetain(&mut ctx, dev)) }?;
    super::non_null("cuDevicePrimaryCtxRetain", ctx)?;
    // SAFETY: the retain just taken keeps the context alive until a
    // `release`, whose caller promises no handle of it is used afterwards.
    Ok(unsafe { Borrowed::borrow_raw(drv, ctx) })
}

/// Releases one retain of the device's primary context
/// (`cuDevicePrimaryCtxRelease`); the last one destroys it.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
///
/// # Safety
/// 1. If this may be the last retain: no handle of the context (the
///    [`BorrowedContext`] from [`retain`], and every stream, event, module,
///    graph and device pointer made in it) is used afterwards, including
///    by an [`Owned`](crate::Owned)'s drop.
pub unsafe fn release(drv: &Driver, dev: CUdevice) -> Result<()> {
    // SAFETY: takes a device ordinal; the caller promises nothing of the
    // context is used if it is destroyed.
    unsafe { call!(drv, cuDevicePrimaryCtxRelease(dev)) }
}
