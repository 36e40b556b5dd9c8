//! Names and descriptions of `CUresult` codes ([Error Handling][err]).
//!
//! [err]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__ERROR.html

use super::Result;
use crate::{CUresult, Driver};
use std::ffi::{CStr, c_char};

/// The name of `code` (`cuGetErrorName`): `"CUDA_ERROR_INVALID_VALUE"`.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__ERROR.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_VALUE` for a code the driver does not know;
/// `Unsupported` without the entry point.
pub fn get_error_name(drv: &'static Driver, code: CUresult) -> Result<&'static CStr> {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: writes one pointer through a valid pointer.
    unsafe { call!(drv, cuGetErrorName(code, &mut p)) }?;
    static_str("cuGetErrorName", p)
}

/// The description of `code` (`cuGetErrorString`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__ERROR.html)
///
/// # Errors
/// As [`get_error_name`].
pub fn get_error_string(drv: &'static Driver, code: CUresult) -> Result<&'static CStr> {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: writes one pointer through a valid pointer.
    unsafe { call!(drv, cuGetErrorString(code, &mut p)) }?;
    static_str("cuGetErrorString", p)
}

fn static_str(call: &'static str, p: *const c_char) -> Result<&'static CStr> {
    super::non_null(call, p.cast_mut())?;
    // SAFETY: on success both calls point `p` at a NUL-terminated string
    // stored in the driver, which lives as long as the `'static` table (it
    // owns the library handle).
    Ok(unsafe { CStr::from_ptr(p) })
}
