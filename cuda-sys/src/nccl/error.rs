//! Why NCCL cannot be loaded or a call failed, and the names of NCCL's
//! results and versions.

use super::load::{LIBNCCL_ENV, NCCL_MIN_VERSION, NCCL_SONAME};
use crate::nccl_bindings::ncclResult_t;

/// No usable libnccl was found.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "could not load NCCL ({NCCL_SONAME}, at least {min}): {}. Install it — `pip install nvidia-nccl-cu13` \
     into the Python this program runs beside (or `cargo xtask bindgen`, which installs the pinned wheel \
     under target/cuda-wheels/) — or set {LIBNCCL_ENV} to the library's path",
    tried.iter().map(|(p, e)| format!("tried {p} ({e})")).collect::<Vec<_>>().join("; "),
    min = nccl_version_string(NCCL_MIN_VERSION)
)]
pub struct NcclLoadError {
    /// Each place looked in, in order, with why it gave no usable NCCL.
    pub tried: Vec<(String, String)>,
}

/// A call of the [`Nccl`](super::Nccl) table did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NcclError {
    /// The call returned `ncclInProgress`: on a non-blocking communicator
    /// the operation goes on in the background; poll
    /// `ncclCommGetAsyncError` until it reports `ncclSuccess` (or an error).
    #[error("{call} is in progress (ncclInProgress, a non-blocking communicator still working)")]
    InProgress {
        /// The NCCL call.
        call: &'static str,
    },
    /// The call returned an error code.
    #[error("{call} failed: {} ({}){}", nccl_result_name(*result), result.0,
        last_error.as_deref().filter(|s| !s.is_empty()).map(|s| format!(": {s}")).unwrap_or_default())]
    Failed {
        /// The NCCL call.
        call: &'static str,
        /// Its result.
        result: ncclResult_t,
        /// `ncclGetLastError`'s text right after the call, where the table
        /// has it.
        last_error: Option<String>,
    },
    /// The table lacks the function (a software table that does not
    /// implement it).
    #[error("{call}: the NCCL table ({origin}) does not have it")]
    Unsupported {
        /// The NCCL call.
        call: &'static str,
        /// The table's origin.
        origin: String,
    },
    /// The call was not made, or its result broke NCCL's contract.
    #[error("{call}: {reason}")]
    Refused {
        /// The NCCL call.
        call: &'static str,
        /// Why.
        reason: &'static str,
    },
}

impl NcclError {
    /// The `ncclResult_t` this error stands for (`ncclInProgress` for
    /// [`NcclError::InProgress`]); `None` for a call never made.
    pub fn result(&self) -> Option<ncclResult_t> {
        match self {
            NcclError::InProgress { .. } => Some(ncclResult_t::ncclInProgress),
            NcclError::Failed { result, .. } => Some(*result),
            NcclError::Unsupported { .. } | NcclError::Refused { .. } => None,
        }
    }
}

/// `Ok` for `ncclSuccess`, [`NcclError::InProgress`] for `ncclInProgress`,
/// else [`NcclError::Failed`] naming `call` (without `ncclGetLastError`'s
/// text). For a result obtained outside this layer, such as the
/// asynchronous state `ncclCommGetAsyncError` reports.
///
/// # Errors
/// As above.
pub fn check(call: &'static str, r: ncclResult_t) -> Result<(), NcclError> {
    match r {
        ncclResult_t::ncclSuccess => Ok(()),
        ncclResult_t::ncclInProgress => Err(NcclError::InProgress { call }),
        result => Err(NcclError::Failed { call, result, last_error: None }),
    }
}

/// The name of an `ncclResult_t` (`ncclInvalidUsage`), without a call into
/// the library.
pub fn nccl_result_name(r: ncclResult_t) -> &'static str {
    match r {
        ncclResult_t::ncclSuccess => "ncclSuccess",
        ncclResult_t::ncclUnhandledCudaError => "ncclUnhandledCudaError",
        ncclResult_t::ncclSystemError => "ncclSystemError",
        ncclResult_t::ncclInternalError => "ncclInternalError",
        ncclResult_t::ncclInvalidArgument => "ncclInvalidArgument",
        ncclResult_t::ncclInvalidUsage => "ncclInvalidUsage",
        ncclResult_t::ncclRemoteError => "ncclRemoteError",
        ncclResult_t::ncclInProgress => "ncclInProgress",
        _ => "ncclResult (unnamed code)",
    }
}

/// `major.minor.patch` of an `NCCL_VERSION_CODE` (`22809` → `2.28.9`; the
/// codes of 2.8 and before are `major*1000 + minor*100 + patch`, as the
/// header's `NCCL_VERSION` macro writes them).
pub fn nccl_version_string(code: i32) -> String {
    if code >= 10_000 {
        format!("{}.{}.{}", code / 10_000, code % 10_000 / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_the_header_writes_them() {
        assert_eq!(nccl_version_string(22809), "2.28.9");
        assert_eq!(nccl_version_string(21900), "2.19.0");
        assert_eq!(nccl_version_string(2708), "2.7.8");
        assert_eq!(nccl_version_string(crate::nccl_bindings::NCCL_VERSION_CODE as i32), "2.28.9");
    }

    #[test]
    fn in_progress_is_its_own_case_and_errors_name_the_call_and_the_result() {
        assert_eq!(check("ncclGroupEnd", ncclResult_t::ncclSuccess), Ok(()));
        let e = check("ncclGroupEnd", ncclResult_t::ncclInProgress).unwrap_err();
        assert_eq!(e, NcclError::InProgress { call: "ncclGroupEnd" });
        assert_eq!(e.result(), Some(ncclResult_t::ncclInProgress));
        let e = check("ncclAllReduce", ncclResult_t::ncclInvalidArgument).unwrap_err();
        assert_eq!(e.to_string(), "ncclAllReduce failed: ncclInvalidArgument (4)");
        let e = NcclError::Failed {
            call: "ncclSend",
            result: ncclResult_t::ncclRemoteError,
            last_error: Some("peer 1 went away".into()),
        };
        assert_eq!(e.to_string(), "ncclSend failed: ncclRemoteError (6): peer 1 went away");
        assert_eq!(nccl_result_name(ncclResult_t(77)), "ncclResult (unnamed code)");
    }
}
