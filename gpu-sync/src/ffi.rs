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

use crate::error::Result;
use cuda_sys::Driver;

/// The process-wide driver (loaded or installed), initialized with
/// `cuInit(0)` once: the loader does that for libcuda, but a table installed
/// by other means (a software driver) arrives uninitialized.
pub(crate) fn driver() -> Result<&'static Driver> {
    static INIT: std::sync::OnceLock<Result<()>> = std::sync::OnceLock::new();
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
    crate::host_fn::refuse(name)?;
    Ok(f()?)
}
