//! Kernel functions ([Execution Control][exec]).
//!
//! [exec]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html

use super::Result;
use crate::CUfunction_attribute;
use crate::handle::{AsBorrowed, kind};
use std::ffi::{CStr, c_char};

/// Offset and size in bytes of parameter `index` (`cuFuncGetParamInfo`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_VALUE` past the last parameter; `Unsupported` before
/// CUDA 12.4.
pub fn get_param_info(function: impl AsBorrowed<kind::FunctionKind>, index: usize) -> Result<(usize, usize)> {
    let f = function.as_borrowed();
    let (mut offset, mut size) = (0usize, 0usize);
    // SAFETY: a live function; writes two size_t through valid pointers.
    unsafe { call!(f.driver(), cuFuncGetParamInfo(f.as_raw(), index, &mut offset, &mut size)) }?;
    Ok((offset, size))
}

/// One attribute of the function (`cuFuncGetAttribute`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_attribute(
    function: impl AsBorrowed<kind::FunctionKind>,
    attr: CUfunction_attribute,
) -> Result<i32> {
    let f = function.as_borrowed();
    let mut v = 0;
    // SAFETY: a live function; writes one int through a valid pointer.
    unsafe { call!(f.driver(), cuFuncGetAttribute(&mut v, attr, f.as_raw())) }?;
    Ok(v)
}

/// Sets one attribute of the function (`cuFuncSetAttribute`), e.g. its
/// maximum dynamic shared memory.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_VALUE` beyond the device's limit, …; `Unsupported`
/// without the entry point.
pub fn set_attribute(
    function: impl AsBorrowed<kind::FunctionKind>,
    attr: CUfunction_attribute,
    value: i32,
) -> Result<()> {
    let f = function.as_borrowed();
    // SAFETY: a live function.
    unsafe { call!(f.driver(), cuFuncSetAttribute(f.as_raw(), attr, value)) }
}

/// The function's (mangled) name (`cuFuncGetName`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html)
///
/// # Errors
/// The driver's code; `Unsupported` before CUDA 12.3.
pub fn get_name(function: impl AsBorrowed<kind::FunctionKind>) -> Result<String> {
    let f = function.as_borrowed();
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: a live function; writes one pointer through a valid pointer.
    unsafe { call!(f.driver(), cuFuncGetName(&mut p, f.as_raw())) }?;
    super::non_null("cuFuncGetName", p.cast_mut())?;
    // SAFETY: on success `p` is the function's NUL-terminated name, owned by
    // the driver and valid while the function (borrowed) is; copied now.
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}
