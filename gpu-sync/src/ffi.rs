//! Calling the driver: the process-wide table and the `cu!` macro.
//!
//! `cu!(drv, cuStreamWaitEvent(a, b, c))` calls the entry point if the driver
//! has it and turns its `CUresult` into [`crate::Result`]: `Unsupported`
//! (naming the CUDA version that introduced it) when the table lacks it, a
//! `Driver`/`ContextLost` error naming the call otherwise. The macro performs
//! the call, so each use sits inside an `unsafe` block whose `SAFETY:` comment
//! argues that call's contract at that site.

// Unsafe code: `driver` calls `cuInit` through the table.
#![allow(unsafe_code)]

use crate::error::{Error, Result};
use cuda_sys::{CUresult, Driver};

/// The process-wide driver (loaded or installed), initialized with
/// `cuInit(0)` once: the loader does that for libcuda, but a table installed
/// by other means (a software driver) arrives uninitialized.
pub(crate) fn driver() -> Result<&'static Driver> {
    static INIT: std::sync::OnceLock<Result<()>> = std::sync::OnceLock::new();
    let drv = cuda_sys::driver()?;
    INIT.get_or_init(|| {
        // SAFETY: cuInit takes only flags, which must be 0; calling it again
        // after the loader did is harmless.
        unsafe { cu!(drv, cuInit(0)) }
    })
    .clone()?;
    Ok(drv)
}

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

/// Like [`check`], but `CUDA_ERROR_NOT_READY` is `Ok(false)` (for queries).
#[inline]
pub(crate) fn check_ready(call: &'static str, r: CUresult) -> Result<bool> {
    match r {
        CUresult::CUDA_SUCCESS => Ok(true),
        CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        other => Err(Error::driver(call, cuda_sys::CuError(other))),
    }
}

/// Queries an entry point that reports readiness (`cuStreamQuery`,
/// `cuEventQuery`).
macro_rules! cu_query {
    ($drv:expr, $name:ident ( $($arg:expr),* $(,)? )) => {{
        let drv: &cuda_sys::Driver = $drv;
        match drv.$name {
            _ if $crate::host_fn::active() => Err($crate::host_fn::not_permitted(stringify!($name))),
            Some(f) => $crate::ffi::check_ready(stringify!($name), f($($arg),*)),
            None => Err($crate::ffi::unsupported(drv, stringify!($name))),
        }
    }};
}
pub(crate) use cu_query;
