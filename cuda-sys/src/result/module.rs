//! Modules ([Module Management][module]).
//!
//! [module]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html

use super::Result;
use crate::error::DriverError;
use crate::handle::{Borrowed, BorrowedFunction, BorrowedModule, Owned, OwnedModule};
use crate::{CUfunction, CUmodule, Driver};
use std::ffi::{CStr, c_void};

/// Loads device code into the current context (`cuModuleLoadData`): a
/// fatbin, a cubin, or NUL-terminated PTX (JIT-compiled for the device).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_IMAGE`, `CUDA_ERROR_NO_BINARY_FOR_GPU`, …;
/// `Unsupported` without the entry point.
///
/// # Safety
/// 1. `image` points to a complete fatbin or cubin image, or to PTX text
///    ending in a NUL byte, readable for the whole call (the driver finds
///    the length from the image itself).
pub unsafe fn load_data(drv: &'static Driver, image: *const c_void) -> Result<OwnedModule> {
    let mut m: CUmodule = std::ptr::null_mut();
    // SAFETY: writes one module handle through a valid pointer; `image` is
    // the caller's obligation.
    unsafe { call!(drv, cuModuleLoadData(&mut m, image)) }?;
    super::non_null("cuModuleLoadData", m)?;
    // SAFETY: a new module of `drv`, owned by nobody else.
    Ok(unsafe { Owned::from_raw(drv, m) })
}

/// Unloads the module (`cuModuleUnload`); the same as [`Owned::destroy`].
/// Its functions must not be launched afterwards, which the borrow of
/// [`get_function`] ensures.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html)
///
/// # Errors
/// The driver's code (the module is then leaked); `Unsupported` without the
/// entry point.
pub fn unload(module: OwnedModule) -> Result<()> {
    module.destroy()
}

/// The kernel `name` of the module (`cuModuleGetFunction`), borrowed from
/// the module: it cannot outlive it.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html)
///
/// # Errors
/// `CUDA_ERROR_NOT_FOUND` for a name the module lacks; `Unsupported`
/// without the entry point.
pub fn get_function<'m>(module: BorrowedModule<'m>, name: &CStr) -> Result<BorrowedFunction<'m>> {
    let mut f: CUfunction = std::ptr::null_mut();
    // SAFETY: a live module and a NUL-terminated name; writes one function
    // handle through a valid pointer.
    unsafe { call!(module.driver(), cuModuleGetFunction(&mut f, module.as_raw(), name.as_ptr())) }?;
    if f.is_null() {
        return Err(DriverError::Refused {
            call: "cuModuleGetFunction",
            reason: "the driver returned a null handle",
        });
    }
    // SAFETY: a function lives as long as its module, which is borrowed for
    // 'm; functions are internally synchronized.
    Ok(unsafe { Borrowed::borrow_raw(module.driver(), f) })
}
