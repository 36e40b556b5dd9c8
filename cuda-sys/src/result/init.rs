//! Initialization and version ([Initialization][init], [Version Management][ver]).
//!
//! [init]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__INITIALIZE.html
//! [ver]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VERSION.html

use super::Result;
use crate::Driver;

/// Initializes the driver (`cuInit`); `flags` must be 0. Harmless to repeat.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__INITIALIZE.html)
///
/// # Errors
/// The driver's code (`CUDA_ERROR_NO_DEVICE`, `CUDA_ERROR_INVALID_VALUE` for
/// nonzero flags, …); `Unsupported` without the entry point.
pub fn init(drv: &Driver, flags: u32) -> Result<()> {
    // SAFETY: cuInit takes only flags; no pointer is involved.
    unsafe { call!(drv, cuInit(flags)) }
}

/// The CUDA version the driver implements (`cuDriverGetVersion`), e.g.
/// `13000`. Works before [`init`].
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VERSION.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn driver_get_version(drv: &Driver) -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int through a valid pointer.
    unsafe { call!(drv, cuDriverGetVersion(&mut v)) }?;
    Ok(v)
}
