//! `cuGetErrorName` / `cuGetErrorString`: static NUL-terminated texts, never
//! counted nor fault-injected (error formatting calls them).
#![allow(non_snake_case)]

use super::put;
use crate::result::{CUresult, INVALID_VALUE, SUCCESS};
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char};
use std::sync::OnceLock;

/// A short English description of `code`.
fn describe(code: CUresult) -> &'static str {
    match code {
        CUresult::CUDA_SUCCESS => "no error",
        CUresult::CUDA_ERROR_INVALID_VALUE => "invalid argument",
        CUresult::CUDA_ERROR_OUT_OF_MEMORY => "out of memory",
        CUresult::CUDA_ERROR_NOT_INITIALIZED => "initialization error",
        CUresult::CUDA_ERROR_DEINITIALIZED => "driver shutting down",
        CUresult::CUDA_ERROR_NO_DEVICE => "no CUDA-capable device is detected",
        CUresult::CUDA_ERROR_INVALID_DEVICE => "invalid device ordinal",
        CUresult::CUDA_ERROR_INVALID_IMAGE => "device kernel image is invalid",
        CUresult::CUDA_ERROR_INVALID_CONTEXT => "invalid device context",
        CUresult::CUDA_ERROR_INVALID_HANDLE => "invalid resource handle",
        CUresult::CUDA_ERROR_ILLEGAL_STATE => "the operation cannot be performed in the present state",
        CUresult::CUDA_ERROR_NOT_FOUND => "named symbol not found",
        CUresult::CUDA_ERROR_NOT_READY => "device not ready",
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS => "an illegal memory access was encountered",
        CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => "too many resources requested for launch",
        CUresult::CUDA_ERROR_LAUNCH_FAILED => "unspecified launch failure",
        CUresult::CUDA_ERROR_LAUNCH_TIMEOUT => "the launch timed out and was terminated",
        CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => "peer access is already enabled",
        CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED => "peer access has not been enabled",
        CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED => {
            "peer access is not supported between these two devices"
        }
        CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED => "context is destroyed",
        CUresult::CUDA_ERROR_ASSERT => "device-side assert triggered",
        CUresult::CUDA_ERROR_MISALIGNED_ADDRESS => "misaligned address",
        CUresult::CUDA_ERROR_NOT_PERMITTED => "operation not permitted",
        CUresult::CUDA_ERROR_NOT_SUPPORTED => "operation not supported",
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED => "operation not permitted when stream is capturing",
        CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED => {
            "operation failed due to a previous error during capture"
        }
        CUresult::CUDA_ERROR_STREAM_CAPTURE_MERGE => {
            "operation would result in a merge of separate capture sequences"
        }
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED => {
            "capture was not ended in the same stream as it began"
        }
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNJOINED => "capturing stream has unjoined work",
        CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION => {
            "dependency created on uncaptured work in another stream"
        }
        CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT => {
            "operation would make the legacy stream depend on a capturing blocking stream"
        }
        CUresult::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD => {
            "attempt to terminate a thread-local capture sequence from another thread"
        }
        CUresult::CUDA_ERROR_UNKNOWN => "unknown error",
        _ => "a CUDA driver error (see the CUDA driver API documentation for this code)",
    }
}

/// Name and description of every code the headers name, built once.
fn texts() -> &'static HashMap<u32, (&'static CStr, &'static CStr)> {
    static TEXTS: OnceLock<HashMap<u32, (&'static CStr, &'static CStr)>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        let leak =
            |s: &str| -> &'static CStr { Box::leak(CString::new(s).unwrap_or_default().into_boxed_c_str()) };
        (0..=1000u32)
            .filter_map(|c| {
                let code = CUresult(c);
                cuda_sys::result_name(code).map(|n| (c, (leak(n), leak(describe(code)))))
            })
            .collect()
    })
}

fn lookup(error: CUresult, p: *mut *const c_char, name: bool) -> CUresult {
    let Some(&(n, d)) = texts().get(&error.0) else { return INVALID_VALUE };
    let s = if name { n } else { d };
    // SAFETY: `p` is the caller's output slot (null is refused by `put`);
    // the string is leaked, so valid for the rest of the process.
    match unsafe { put(p, s.as_ptr()) } {
        Ok(()) => SUCCESS,
        Err(c) => c,
    }
}

/// `cuGetErrorName`.
pub(super) unsafe extern "C" fn cuGetErrorName(error: CUresult, pStr: *mut *const c_char) -> CUresult {
    lookup(error, pStr, true)
}

/// `cuGetErrorString`.
pub(super) unsafe extern "C" fn cuGetErrorString(error: CUresult, pStr: *mut *const c_char) -> CUresult {
    lookup(error, pStr, false)
}
