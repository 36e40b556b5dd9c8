//! The per-call layer: one function per driver entry point, grouped by the
//! sections of the [CUDA Driver API reference][api] (cudarc's `result`
//! layer is the model).
//!
//! Each function calls exactly one entry point of the table its handles
//! belong to (or the `drv` it is given), returns out-parameters through
//! `Result`, and turns the `CUresult` into a [`DriverError`] naming the call:
//! [`DriverError::Failed`] with the driver's code, or
//! [`DriverError::Unsupported`] (with the CUDA version the entry point
//! needs) when the table lacks it. A function is safe where its handles
//! ([`Owned`](crate::Owned), [`Borrowed`](crate::Borrowed)) prove the objects
//! alive; it is `unsafe` only where it takes raw device or host pointers,
//! kernel parameters or a host callback, and its `# Safety` says what the
//! driver will do with them.
//!
//! No safety policy lives here: nothing is tracked, no context is made
//! current, no ordering between streams is inserted. These functions type
//! the calls; `gpu-sync` decides when each is correct.
//!
//! Handles carry their table: a call refuses
//! ([`DriverError::Refused`]) handles of two different tables rather than
//! hand one driver another's pointer.
//!
//! [api]: https://docs.nvidia.com/cuda/cuda-driver-api/index.html

/// Calls entry point `$name` of `$drv` with `$args`: the `CUresult` as
/// `Result<(), DriverError>`, `Unsupported` when the table lacks it. The
/// call itself is made here, so each use sits in an `unsafe` block whose
/// `SAFETY:` comment argues that call's contract.
macro_rules! call {
    ($drv:expr, $name:ident ( $($arg:expr),* $(,)? )) => {{
        let drv: &$crate::Driver = $drv;
        match drv.$name {
            Some(f) => $crate::error::check_call(stringify!($name), f($($arg),*)),
            None => Err($crate::error::DriverError::unsupported(drv, stringify!($name))),
        }
    }};
}

/// Like [`call!`], but `CUDA_ERROR_NOT_READY` is `Ok(false)` and success
/// `Ok(true)` (for `cuStreamQuery`, `cuEventQuery`).
macro_rules! query {
    ($drv:expr, $name:ident ( $($arg:expr),* $(,)? )) => {{
        let drv: &$crate::Driver = $drv;
        match drv.$name {
            Some(f) => match f($($arg),*) {
                $crate::bindings::CUresult::CUDA_SUCCESS => Ok(true),
                $crate::bindings::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                r => Err($crate::error::DriverError::Failed { call: stringify!($name), error: $crate::CuError(r) }),
            },
            None => Err($crate::error::DriverError::unsupported(drv, stringify!($name))),
        }
    }};
}

pub mod context;
pub mod device;
pub mod error;
pub mod event;
pub mod function;
pub mod graph;
pub mod init;
pub mod launch;
pub mod mem_pool;
pub mod memory;
pub mod module;
pub mod primary_ctx;
pub mod stream;

pub use crate::error::DriverError;

/// Result of the per-call layer.
pub type Result<T, E = DriverError> = std::result::Result<T, E>;

/// `Err(Refused)` naming `call` when a handle the driver returned with
/// `CUDA_SUCCESS` is null (never documented; a broken table).
#[inline]
fn non_null<T>(call: &'static str, p: *mut T) -> Result<()> {
    if p.is_null() {
        Err(DriverError::Refused { call, reason: "the driver returned a null handle" })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// The source of every per-call module, and the handle module (whose
    /// `destroys!` rows call the destroy entry points).
    const SOURCES: &[&str] = &[
        include_str!("context.rs"),
        include_str!("device.rs"),
        include_str!("error.rs"),
        include_str!("event.rs"),
        include_str!("function.rs"),
        include_str!("graph.rs"),
        include_str!("init.rs"),
        include_str!("launch.rs"),
        include_str!("mem_pool.rs"),
        include_str!("memory.rs"),
        include_str!("module.rs"),
        include_str!("primary_ctx.rs"),
        include_str!("stream.rs"),
        include_str!("../handle.rs"),
    ];

    #[test]
    fn every_entry_point_has_a_per_call_function() {
        // A new entry point in the generator's list must get its function
        // here: each is called as `call!(drv, cuX(...))`, `query!(...)` or
        // in a `destroys!` row (`Kind: cuX;`).
        let missing: Vec<&str> = crate::Driver::ENTRY_POINTS
            .iter()
            .map(|e| e.name)
            .filter(|name| {
                let called = format!(" {name}(");
                let destroyed = format!(": {name};");
                !SOURCES.iter().any(|s| s.contains(&called) || s.contains(&destroyed))
            })
            .collect();
        assert!(missing.is_empty(), "entry points without a cuda_sys::result function: {missing:?}");
    }
}
