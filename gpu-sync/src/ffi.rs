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
use cuda_sys::{CUresult, Driver};

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

// --- The legacy door, being removed: the call sites of graph.rs,
// module.rs and pinned.rs not yet moved onto `call`. ---

/// `Ok` for `CUDA_SUCCESS`, else the error naming `call`.
#[inline]
pub(crate) fn check(call: &'static str, r: CUresult) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS { Ok(()) } else { Err(Error::driver(call, cuda_sys::CuError(r))) }
}

/// The error for an entry point the loaded driver lacks.
#[cold]
pub(crate) fn unsupported(drv: &Driver, call: &'static str) -> Error {
    let needs = Driver::entry_point(call)
        .map(|e| cuda_sys::version_string(e.since))
        .unwrap_or_else(|| "newer".to_owned());
    Error::Unsupported { call, needs, have: cuda_sys::version_string(drv.version()) }
}

/// Calls a driver entry point by name; see the module docs. Inside a host
/// function it calls nothing and fails with `CUDA_ERROR_NOT_PERMITTED`
/// (the driver forbids calls there; see `host_fn`).
macro_rules! cu {
    ($drv:expr, $name:ident ( $($arg:expr),* $(,)? )) => {{
        let drv: &cuda_sys::Driver = $drv;
        match drv.$name {
            _ if $crate::host_fn::active() => Err($crate::host_fn::not_permitted(stringify!($name))),
            Some(f) => $crate::ffi::check(stringify!($name), f($($arg),*)),
            None => Err($crate::ffi::unsupported(drv, stringify!($name))),
        }
    }};
}
pub(crate) use cu;
