//! Short names for the `CUresult` codes the simulator returns.

pub(crate) use cuda_sys::CUresult;

/// The simulator's internal result: `Err` carries the code an entry point
/// returns.
pub(crate) type Res<T = ()> = Result<T, CUresult>;

pub(crate) const SUCCESS: CUresult = CUresult::CUDA_SUCCESS;
pub(crate) const INVALID_VALUE: CUresult = CUresult::CUDA_ERROR_INVALID_VALUE;
pub(crate) const OUT_OF_MEMORY: CUresult = CUresult::CUDA_ERROR_OUT_OF_MEMORY;
pub(crate) const NOT_INITIALIZED: CUresult = CUresult::CUDA_ERROR_NOT_INITIALIZED;
pub(crate) const NO_DEVICE: CUresult = CUresult::CUDA_ERROR_NO_DEVICE;
pub(crate) const INVALID_DEVICE: CUresult = CUresult::CUDA_ERROR_INVALID_DEVICE;
pub(crate) const INVALID_IMAGE: CUresult = CUresult::CUDA_ERROR_INVALID_IMAGE;
pub(crate) const INVALID_CONTEXT: CUresult = CUresult::CUDA_ERROR_INVALID_CONTEXT;
pub(crate) const INVALID_HANDLE: CUresult = CUresult::CUDA_ERROR_INVALID_HANDLE;
pub(crate) const ILLEGAL_STATE: CUresult = CUresult::CUDA_ERROR_ILLEGAL_STATE;
pub(crate) const NOT_FOUND: CUresult = CUresult::CUDA_ERROR_NOT_FOUND;
pub(crate) const NOT_READY: CUresult = CUresult::CUDA_ERROR_NOT_READY;
pub(crate) const ILLEGAL_ADDRESS: CUresult = CUresult::CUDA_ERROR_ILLEGAL_ADDRESS;
pub(crate) const LAUNCH_FAILED: CUresult = CUresult::CUDA_ERROR_LAUNCH_FAILED;
pub(crate) const PEER_ACCESS_ALREADY_ENABLED: CUresult = CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
pub(crate) const PEER_ACCESS_NOT_ENABLED: CUresult = CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
pub(crate) const TOO_MANY_PEERS: CUresult = CUresult::CUDA_ERROR_TOO_MANY_PEERS;
pub(crate) const NOT_PERMITTED: CUresult = CUresult::CUDA_ERROR_NOT_PERMITTED;
pub(crate) const NOT_SUPPORTED: CUresult = CUresult::CUDA_ERROR_NOT_SUPPORTED;
pub(crate) const CAPTURE_UNSUPPORTED: CUresult = CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
pub(crate) const CAPTURE_INVALIDATED: CUresult = CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
pub(crate) const CAPTURE_MERGE: CUresult = CUresult::CUDA_ERROR_STREAM_CAPTURE_MERGE;
pub(crate) const CAPTURE_UNMATCHED: CUresult = CUresult::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
pub(crate) const CAPTURE_UNJOINED: CUresult = CUresult::CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
pub(crate) const CAPTURE_ISOLATION: CUresult = CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
pub(crate) const CAPTURE_IMPLICIT: CUresult = CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
pub(crate) const CAPTURE_WRONG_THREAD: CUresult = CUresult::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
pub(crate) const UNKNOWN: CUresult = CUresult::CUDA_ERROR_UNKNOWN;

/// Whether `code` leaves a context unusable (see [`cuda_sys::CuError::is_sticky`]).
pub(crate) fn is_sticky(code: CUresult) -> bool {
    cuda_sys::CuError(code).is_sticky()
}
