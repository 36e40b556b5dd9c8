//! Why CUPTI cannot be used, and the names of CUPTI's results.

use super::load::LIBCUPTI_ENV;
use crate::cupti_bindings::CUptiResult;

/// Why CUPTI cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CuptiError {
    /// No libcupti could be loaded.
    #[error(
        "could not load CUPTI (libcupti.so.13): {}. Install it — `pip install nvidia-cuda-cupti==13.0.85` \
         (or `cargo xtask bindgen`, which installs it under target/cuda-wheels/), or the CUDA toolkit — \
         and set {LIBCUPTI_ENV} to the library's path",
        tried.iter().map(|(p, e)| format!("tried {p} ({e})")).collect::<Vec<_>>().join(", ")
    )]
    NotFound {
        /// Each path tried, with why it failed.
        tried: Vec<(String, String)>,
    },
    /// CUPTI is loaded but another tool owns the profiling interface
    /// (compute-sanitizer, Nsight Compute or Systems), or it refused.
    #[error("CUPTI is unavailable: {call} returned {name} ({origin}){hint}",
        hint = if *name == "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" {
            "; another tool (compute-sanitizer, ncu, nsys) owns the profiling interface"
        } else { "" })]
    Unavailable {
        /// The CUPTI call that refused.
        call: &'static str,
        /// Its result's name.
        name: &'static str,
        /// The table's origin.
        origin: String,
    },
    /// A CUPTI call failed.
    #[error("{call} failed: {name}")]
    Call {
        /// The CUPTI call.
        call: &'static str,
        /// Its result's name.
        name: &'static str,
    },
}
/// The name of a `CUptiResult` (`CUPTI_ERROR_NOT_INITIALIZED`), without a
/// call into the library.
pub fn cupti_result_name(r: CUptiResult) -> &'static str {
    match r {
        CUptiResult::CUPTI_SUCCESS => "CUPTI_SUCCESS",
        CUptiResult::CUPTI_ERROR_INVALID_PARAMETER => "CUPTI_ERROR_INVALID_PARAMETER",
        CUptiResult::CUPTI_ERROR_INVALID_DEVICE => "CUPTI_ERROR_INVALID_DEVICE",
        CUptiResult::CUPTI_ERROR_INVALID_CONTEXT => "CUPTI_ERROR_INVALID_CONTEXT",
        CUptiResult::CUPTI_ERROR_INVALID_OPERATION => "CUPTI_ERROR_INVALID_OPERATION",
        CUptiResult::CUPTI_ERROR_INVALID_KIND => "CUPTI_ERROR_INVALID_KIND",
        CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED => "CUPTI_ERROR_MAX_LIMIT_REACHED",
        CUptiResult::CUPTI_ERROR_NOT_INITIALIZED => "CUPTI_ERROR_NOT_INITIALIZED",
        CUptiResult::CUPTI_ERROR_NOT_COMPATIBLE => "CUPTI_ERROR_NOT_COMPATIBLE",
        CUptiResult::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES => "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
        CUptiResult::CUPTI_ERROR_NOT_SUPPORTED => "CUPTI_ERROR_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => {
            "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
        }
        CUptiResult::CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE => "CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE",
        CUptiResult::CUPTI_ERROR_UNKNOWN => "CUPTI_ERROR_UNKNOWN",
        _ => "CUPTI_ERROR (unnamed code)",
    }
}

pub(super) fn check(call: &'static str, r: CUptiResult) -> Result<(), CuptiError> {
    if r == CUptiResult::CUPTI_SUCCESS {
        Ok(())
    } else {
        Err(CuptiError::Call { call, name: cupti_result_name(r) })
    }
}
