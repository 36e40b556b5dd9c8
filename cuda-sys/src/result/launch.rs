//! Kernel launches ([Execution Control][exec]).
//!
//! [exec]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html

use super::Result;
use crate::handle::{AsBorrowed, kind, same_driver};
use std::ffi::c_void;

/// Queues a launch of `function` on `stream` (`cuLaunchKernel`) with a
/// `grid` of blocks of `block` threads and `shared_mem` bytes of dynamic
/// shared memory; `params` holds one pointer per kernel parameter, each to
/// that parameter's value (copied by the driver during the call).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_VALUE` for a configuration the device cannot run,
/// `CUDA_ERROR_INVALID_HANDLE`, …; `Refused` for handles of two tables;
/// `Unsupported` without the entry point. Errors of the kernel itself come
/// from later calls.
///
/// # Safety
/// 1. `params` has exactly one entry per parameter of the kernel, the
///    `i`-th pointing to a readable value of the `i`-th parameter's type and
///    size;
/// 2. the kernel's memory accesses are sound: every address it reaches (the
///    pointers passed, and anything reachable from them) is memory alive
///    until the kernel completed, inside its allocation, and not accessed
///    by other work or the host unordered with the kernel where either side
///    writes.
#[inline]
pub unsafe fn launch_kernel(
    function: impl AsBorrowed<kind::FunctionKind>,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem: u32,
    stream: impl AsBorrowed<kind::StreamKind>,
    params: &mut [*mut c_void],
) -> Result<()> {
    let (f, s) = (function.as_borrowed(), stream.as_borrowed());
    same_driver("cuLaunchKernel", f.driver(), s.driver())?;
    let params = if params.is_empty() { std::ptr::null_mut() } else { params.as_mut_ptr() };
    // SAFETY: a live function and stream of one table; `params` and the
    // kernel's accesses are the caller's obligations; no `extra` array.
    unsafe {
        call!(
            f.driver(),
            cuLaunchKernel(
                f.as_raw(),
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_mem,
                s.as_raw(),
                params,
                std::ptr::null_mut()
            )
        )
    }
}
