//! `CUresult` as an error value, and the loader's errors.

use crate::bindings::CUresult;
use crate::generated::result_names::RESULT_NAMES;
use std::ffi::CStr;
use std::fmt;

/// A `CUresult` other than `CUDA_SUCCESS`, printed with the driver's name and
/// description for it (`cuGetErrorName`, `cuGetErrorString`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CuError(pub CUresult);

impl CuError {
    /// The raw code.
    pub fn code(self) -> u32 {
        self.0.0
    }

    /// The code's name (`CUDA_ERROR_INVALID_VALUE`): asked of the loaded
    /// driver (`cuGetErrorName`), else taken from the 13.0 headers, else
    /// `"CUDA_ERROR_<code>"` for a code neither knows.
    pub fn name(self) -> String {
        if let Some(s) = self.ask_driver(true) {
            return s;
        }
        match result_name(self.0) {
            Some(n) => n.to_owned(),
            None => format!("CUDA_ERROR_{}", self.code()),
        }
    }

    /// The driver's description of the code (`cuGetErrorString`), or `None`
    /// when no driver is loaded or it does not know the code.
    pub fn description(self) -> Option<String> {
        self.ask_driver(false)
    }

    fn ask_driver(self, name: bool) -> Option<String> {
        let drv = crate::installed()?;
        let f = if name { drv.cuGetErrorName } else { drv.cuGetErrorString }?;
        let mut p: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: `f` is the driver's cuGetErrorName/cuGetErrorString from the
        // installed table, which lives for the whole process; it writes a
        // pointer to a static NUL-terminated string into `p`, or returns an
        // error for an unknown code and leaves `p` untouched (null).
        let r = unsafe { f(self.0, &mut p) };
        if r != CUresult::CUDA_SUCCESS || p.is_null() {
            return None;
        }
        // SAFETY: on success `p` points to a static NUL-terminated string
        // owned by the driver (documented for both calls).
        let s = unsafe { CStr::from_ptr(p) };
        Some(s.to_string_lossy().into_owned())
    }

    /// Whether the error leaves the context unusable (a "sticky" error: the
    /// process must restart to use the device again).
    pub fn is_sticky(self) -> bool {
        matches!(
            self.0,
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
                | CUresult::CUDA_ERROR_LAUNCH_FAILED
                | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
                | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
                | CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
                | CUresult::CUDA_ERROR_INVALID_PC
                | CUresult::CUDA_ERROR_ASSERT
                | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
                | CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
                | CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
        )
    }
}

impl fmt::Display for CuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())?;
        if let Some(d) = self.description() {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for CuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CuError({} = {})", self.name(), self.code())
    }
}

impl std::error::Error for CuError {}

/// The name the CUDA 13.0 headers give `r` (`"CUDA_ERROR_INVALID_VALUE"`),
/// without asking any driver; `None` for a code they do not name.
pub fn result_name(r: CUresult) -> Option<&'static str> {
    RESULT_NAMES.iter().find(|(c, _)| *c == r.0).map(|(_, n)| *n)
}

/// `Ok(())` for `CUDA_SUCCESS`, else the code as a [`CuError`].
pub fn check(r: CUresult) -> Result<(), CuError> {
    if r == CUresult::CUDA_SUCCESS { Ok(()) } else { Err(CuError(r)) }
}

/// Why a call of the per-call layer ([`crate::result`]) failed: always
/// names the driver entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The driver returned an error code.
    #[error("{call} failed: {error}")]
    Failed {
        /// The driver entry point (`cuStreamWaitEvent`).
        call: &'static str,
        /// What it returned.
        error: CuError,
    },
    /// The loaded driver lacks the entry point (it is newer than the
    /// driver, or a software driver does not implement it).
    #[error(
        "{call} needs a CUDA {} driver; this driver is CUDA {}",
        crate::version_string(*needs),
        crate::version_string(*have)
    )]
    Unsupported {
        /// The missing entry point.
        call: &'static str,
        /// First CUDA version (`major * 1000 + minor * 10`) with the bound
        /// signature: what the call needs.
        needs: i32,
        /// The version the loaded driver reports.
        have: i32,
    },
    /// The call was refused before reaching the driver, or its answer broke
    /// the driver's documented contract (handles of two different tables, a
    /// name with an interior NUL, a null handle reported as success).
    #[error("{call} refused: {reason}")]
    Refused {
        /// The driver entry point.
        call: &'static str,
        /// Why.
        reason: &'static str,
    },
}

impl DriverError {
    /// The driver entry point the error is about.
    pub fn call(&self) -> &'static str {
        match self {
            DriverError::Failed { call, .. }
            | DriverError::Unsupported { call, .. }
            | DriverError::Refused { call, .. } => call,
        }
    }

    /// The driver's code for [`DriverError::Failed`], else `None`.
    pub fn result(&self) -> Option<CUresult> {
        match self {
            DriverError::Failed { error, .. } => Some(error.0),
            _ => None,
        }
    }

    /// The error for entry point `call`, which `drv` lacks.
    #[cold]
    pub fn unsupported(drv: &crate::Driver, call: &'static str) -> DriverError {
        let needs = crate::Driver::entry_point(call).map_or(0, |e| e.since);
        DriverError::Unsupported { call, needs, have: drv.version() }
    }
}

/// `Ok(())` for `CUDA_SUCCESS`, else [`DriverError::Failed`] naming `call`.
#[inline]
pub fn check_call(call: &'static str, r: CUresult) -> Result<(), DriverError> {
    if r == CUresult::CUDA_SUCCESS { Ok(()) } else { Err(DriverError::Failed { call, error: CuError(r) }) }
}

/// Why the driver could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// No candidate library could be opened.
    #[error(
        "could not load the CUDA driver library (libcuda.so.1): {}. Install the NVIDIA driver \
         (it provides libcuda.so.1; no CUDA toolkit is needed), or set {} to its path",
        format_tried(.tried),
        crate::LIBCUDA_ENV
    )]
    LibraryNotFound {
        /// Each path tried, with the dynamic loader's message for it.
        tried: Vec<(String, String)>,
    },
    /// The library opened but lacks a symbol the loader needs.
    #[error("{library} has no symbol {symbol}: it is not a CUDA driver of version 12.0 or newer")]
    MissingSymbol {
        /// The library that was opened.
        library: String,
        /// The missing symbol.
        symbol: &'static str,
    },
    /// A bootstrap call failed (`cuInit`, `cuDriverGetVersion`).
    #[error("{call} failed: {result}{}", hint(*.result))]
    InitFailed {
        /// The driver call.
        call: &'static str,
        /// What it returned.
        result: CuError,
    },
}

fn format_tried(tried: &[(String, String)]) -> String {
    tried.iter().map(|(p, e)| format!("tried {p} ({e})")).collect::<Vec<_>>().join(", ")
}

fn hint(e: CuError) -> &'static str {
    match e.0 {
        CUresult::CUDA_ERROR_NO_DEVICE => " (the driver is installed but sees no GPU)",
        CUresult::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH => " (the kernel module and libcuda differ in version)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_headers_without_a_driver() {
        let e = CuError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
        assert_eq!(e.code(), 700);
        if crate::installed().is_none() {
            assert_eq!(e.name(), "CUDA_ERROR_ILLEGAL_ADDRESS");
            assert_eq!(format!("{e}"), "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
        }
        assert!(e.is_sticky());
        assert!(!CuError(CUresult::CUDA_ERROR_OUT_OF_MEMORY).is_sticky());
    }

    #[test]
    fn unknown_codes_are_values_not_ub() {
        let e = CuError(CUresult(123_456));
        assert_eq!(e.name(), "CUDA_ERROR_123456");
    }

    #[test]
    fn check_maps_success_only() {
        assert!(check(CUresult::CUDA_SUCCESS).is_ok());
        assert_eq!(
            check(CUresult::CUDA_ERROR_INVALID_VALUE),
            Err(CuError(CUresult::CUDA_ERROR_INVALID_VALUE))
        );
    }

    #[test]
    fn load_errors_name_what_was_tried() {
        let e = LoadError::LibraryNotFound {
            tried: vec![("libcuda.so.1".into(), "cannot open shared object file".into())],
        };
        let msg = e.to_string();
        assert!(msg.contains("libcuda.so.1 (cannot open shared object file)"), "{msg}");
        assert!(msg.contains("Install the NVIDIA driver"), "{msg}");
        let e = LoadError::InitFailed { call: "cuInit", result: CuError(CUresult::CUDA_ERROR_NO_DEVICE) };
        assert!(e.to_string().contains("sees no GPU"), "{e}");
    }
}
