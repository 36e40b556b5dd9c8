//! The crate's error type: every failure names its cause, and every driver
//! failure names the driver call and its `CUresult`.

use cuda_sys::{CuError, LoadError};

/// Result alias of this crate.
///
/// Every fallible gpu-sync call returns one; [`Error`]'s example prints its error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in gpu-sync.
///
/// `Debug` prints the same message as `Display`, cause and hint included
/// and no variant name before it, so `fn main() -> Result<(), gpu_sync::Error>`
/// (which prints the `Debug` form) tells a person what to do in plain words:
/// ```
/// let e = gpu_sync::Error::InvalidArgument("n is 0".into());
/// assert_eq!(format!("{e:?}"), "invalid argument: n is 0");
/// ```
#[derive(Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The driver could not be loaded (no libcuda, no GPU, `cuInit` failed);
    /// the message says how to run on the simulator instead.
    #[error(
        // The variable is `backend::DRIVER_ENV`, written out: `error` sits
        // below `backend` in the layers (a test keeps the two equal).
        "CUDA driver unavailable: {0}\n(without a GPU, run on the simulator cuda-sim: set GPU_SYNC_DRIVER=sim, \
         or call gpu_sync::select_driver_with(DriverChoice::Sim); both need gpu-sync's `sim` feature)"
    )]
    Load(#[from] LoadError),

    /// A driver call failed.
    #[error("{call} failed: {error}")]
    Driver {
        /// The driver entry point (`cuStreamWaitEvent`).
        call: &'static str,
        /// What it returned.
        error: CuError,
    },

    /// A driver call reported a sticky error: the context is lost and every
    /// later call on this device fails; the process must restart to use it.
    #[error(
        "the CUDA context is lost ({call} returned {error}); restart the process to use this device again"
    )]
    ContextLost {
        /// The driver entry point that reported it.
        call: &'static str,
        /// The sticky error.
        error: CuError,
    },

    /// The loaded driver lacks an entry point this feature needs.
    #[error("{call} needs a CUDA {needs} driver; this driver is CUDA {have}")]
    Unsupported {
        /// The missing entry point.
        call: &'static str,
        /// Version that introduced it (`"12.4"`).
        needs: String,
        /// Version of the loaded driver.
        have: String,
    },

    /// The driver a program asked for cannot be used (see
    /// [`select_driver`](crate::select_driver)): an unknown
    /// `GPU_SYNC_DRIVER` value, the simulator without the `sim` feature, or
    /// the other driver already in use.
    #[error("driver selection: {0}")]
    DriverSelection(String),

    /// libnvrtc could not be loaded (see `cuda_sys::nvrtc`).
    #[error("{0}")]
    NvrtcLoad(#[from] cuda_sys::nvrtc::NvrtcLoadError),

    /// An NVRTC call failed; for a compile error `log` is the compiler's
    /// output.
    #[error("{call} failed: {result}{}", if log.is_empty() { String::new() } else { format!("\n{log}") })]
    Nvrtc {
        /// The NVRTC call (`nvrtcCompileProgram`).
        call: &'static str,
        /// Its `nvrtcResult` name (`NVRTC_ERROR_COMPILATION`).
        result: &'static str,
        /// The program log (empty when there is none).
        log: String,
    },

    /// An argument was rejected before reaching the driver.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// One of gpu-sync's own invariants did not hold (a bug in gpu-sync,
    /// reported instead of panicking); the message names it.
    #[error("internal error in gpu-sync: {0}")]
    Internal(String),

    /// Two buffers or views that must have one length do not.
    #[error("length mismatch in {op}: source has {src} elements, destination {dst}")]
    LengthMismatch {
        /// The operation.
        op: &'static str,
        /// Source length in elements.
        src: usize,
        /// Destination length in elements.
        dst: usize,
    },

    /// A range outside a buffer.
    #[error("range {start}..{end} is outside a buffer of {len} elements")]
    OutOfRange {
        /// Range start.
        start: usize,
        /// Range end (exclusive).
        end: usize,
        /// Buffer length.
        len: usize,
    },

    /// Objects of two devices were mixed where one device is needed.
    #[error("{what} belongs to device {found}, but the operation runs on device {expected}")]
    DeviceMismatch {
        /// What was on the wrong device.
        what: &'static str,
        /// The device the operation runs on.
        expected: i32,
        /// The device of the offending object.
        found: i32,
    },

    /// Peer access between two devices cannot be given: the same device
    /// twice, a pair the driver reports no peer access for
    /// (`cuDeviceCanAccessPeer`), or a device that has as many peers as its
    /// driver allows (`CUDA_ERROR_TOO_MANY_PEERS`). See
    /// [`Device::enable_peer_access`](crate::Device::enable_peer_access).
    #[error("peer access for work on device {device} to device {peer}'s memory: {reason}")]
    PeerAccess {
        /// The device whose work would touch the peer's memory.
        device: i32,
        /// The device owning the memory.
        peer: i32,
        /// Why it cannot be given.
        reason: String,
    },

    /// A kernel's Rust signature does not match what the driver reports.
    #[error("kernel `{kernel}`: {problem}")]
    KernelSignature {
        /// Kernel name.
        kernel: String,
        /// What does not match (names the parameter).
        problem: String,
    },

    /// A launch configuration the device cannot run.
    #[error("invalid launch of `{kernel}`: {reason}")]
    LaunchConfig {
        /// Kernel name.
        kernel: String,
        /// Which limit it breaks.
        reason: String,
    },

    /// A launch argument that would let the kernel reach memory outside its
    /// views: a view whose address is misaligned for its element type, or a
    /// [`Len`](crate::Len) larger than a buffer argument. Checked before the
    /// driver call; nothing was enqueued.
    #[error("launch of `{kernel}`, parameter {param}: {problem}")]
    LaunchArgument {
        /// Kernel name.
        kernel: String,
        /// Index of the offending parameter (the view, or the `Len`).
        param: usize,
        /// What is wrong, with the address and alignment, or the value and
        /// the shortest view.
        problem: String,
    },

    /// An event that was never recorded was asked for something that needs a
    /// recorded event (`elapsed`).
    #[error("event has not been recorded")]
    EventNotRecorded,

    /// `elapsed` was asked of events whose work has not completed.
    #[error("event has not completed yet; wait for it before reading its time")]
    EventNotComplete,

    /// The operation is not allowed on a stream that is capturing a graph.
    #[error("{op} is not allowed while the stream is capturing a CUDA graph")]
    Capturing {
        /// The refused operation.
        op: &'static str,
    },

    /// A second recorder was asked of a device that has one
    /// ([`Device::record`](crate::Device::record)): one recorder per device
    /// at a time.
    #[error(
        "device {device} is already recording (one trace::Recorder per device at a time; stop or drop the other first)"
    )]
    AlreadyRecording {
        /// The device's ordinal.
        device: i32,
    },

    /// CUPTI cannot be used ([`Timing::Cupti`](crate::trace::Timing::Cupti)
    /// asked without libcupti, or another tool owns the profiling
    /// interface); the message names the cause.
    #[error("CUPTI timing unavailable: {0}")]
    Cupti(#[from] cuda_sys::cupti::CuptiError),

    /// NCCL could not be loaded (`libnccl.so.2` missing or too old); the
    /// message lists where it looked and what to install.
    #[error("NCCL unavailable: {0}")]
    NcclLoad(#[from] cuda_sys::nccl::NcclLoadError),

    /// An NCCL call failed; the message names the call, its `ncclResult_t`
    /// and NCCL's own text.
    #[error("{0}")]
    Nccl(#[from] cuda_sys::nccl::NcclError),

    /// A communicator was still not ready after the caller's timeout (a
    /// rank that never came, collectives issued in different orders on
    /// different ranks): it was aborted (`ncclCommAbort`) and is unusable.
    #[error(
        "{what}: NCCL did not finish within {waited:?} (a rank that never joined, or collectives issued in \
         different orders on different ranks); the communicator was aborted"
    )]
    NcclTimeout {
        /// What was waited for.
        what: &'static str,
        /// How long.
        waited: std::time::Duration,
    },

    /// A proof was presented that does not cover the work it was asked to.
    #[error("the wait presented ({proof}) does not cover this work ({work})")]
    NotCovered {
        /// What the proof covers.
        proof: String,
        /// The work it was asked to cover.
        work: String,
    },
}

impl std::fmt::Debug for Error {
    /// The `Display` message: the cause and its hint survive where `Debug`
    /// is what gets printed (an error returned from `main`), without the
    /// variant's name before it ("DriverSelection: driver selection: …").
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl Error {
    /// The error for driver call `call` returning `error`: a lost context for
    /// sticky errors, else [`Error::Driver`].
    pub(crate) fn driver(call: &'static str, error: CuError) -> Error {
        if error.is_sticky() { Error::ContextLost { call, error } } else { Error::Driver { call, error } }
    }

    /// The raw driver error, if this is one.
    pub fn cu_error(&self) -> Option<CuError> {
        match self {
            Error::Driver { error, .. } | Error::ContextLost { error, .. } => Some(*error),
            Error::Load(LoadError::InitFailed { result, .. }) => Some(*result),
            _ => None,
        }
    }

    /// The driver call that failed, if this is a driver error.
    pub fn call(&self) -> Option<&'static str> {
        match self {
            Error::Driver { call, .. }
            | Error::ContextLost { call, .. }
            | Error::Unsupported { call, .. } => Some(call),
            _ => None,
        }
    }
}

/// An error of cuda-sys's per-call layer (`cuda_sys::result`) as this
/// crate's error: a failed call is [`Error::Driver`] (a sticky code
/// [`Error::ContextLost`]), a missing entry point [`Error::Unsupported`]
/// with the versions as text, a refused call [`Error::InvalidArgument`]
/// naming it.
impl From<cuda_sys::DriverError> for Error {
    fn from(e: cuda_sys::DriverError) -> Error {
        match e {
            cuda_sys::DriverError::Failed { call, error } => Error::driver(call, error),
            cuda_sys::DriverError::Unsupported { call, needs, have } => Error::Unsupported {
                call,
                needs: cuda_sys::version_string(needs),
                have: cuda_sys::version_string(have),
            },
            other => Error::InvalidArgument(other.to_string()),
        }
    }
}

#[cfg(test)]
mod driver_error_tests {
    use super::*;
    use cuda_sys::{CUresult, DriverError};

    #[test]
    fn per_call_errors_keep_their_call_and_meaning() {
        let e: Error =
            DriverError::Failed { call: "cuMemAlloc", error: CuError(CUresult::CUDA_ERROR_OUT_OF_MEMORY) }
                .into();
        assert!(matches!(e, Error::Driver { call: "cuMemAlloc", .. }), "{e}");
        let e: Error = DriverError::Failed {
            call: "cuStreamSynchronize",
            error: CuError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        }
        .into();
        assert!(matches!(e, Error::ContextLost { call: "cuStreamSynchronize", .. }), "{e}");
        let e: Error =
            DriverError::Unsupported { call: "cuFuncGetParamInfo", needs: 12040, have: 12020 }.into();
        assert_eq!(e.to_string(), "cuFuncGetParamInfo needs a CUDA 12.4 driver; this driver is CUDA 12.2");
        let e: Error = DriverError::Refused { call: "cuStreamWaitEvent", reason: "two tables" }.into();
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("cuStreamWaitEvent")), "{e}");
    }
}

#[cfg(test)]
mod debug_tests {
    use super::*;

    #[test]
    fn debug_keeps_the_cause_and_the_hint_that_display_gives() {
        let e = Error::Load(LoadError::LibraryNotFound {
            tried: vec![("libcuda.so.1".into(), "cannot open shared object file".into())],
        });
        let (d, s) = (format!("{e:?}"), e.to_string());
        assert_eq!(d, s);
        assert!(d.contains("libcuda.so.1") && d.contains("cannot open shared object file"), "{d}");
        assert_eq!(format!("{:?}", Error::EventNotRecorded), Error::EventNotRecorded.to_string());
        let e = Error::DriverSelection("GPU_SYNC_DRIVER=\"x\": expected sim, cuda or auto".into());
        assert!(format!("{e:?}").starts_with("driver selection: "), "{e:?}");
    }

    #[test]
    fn no_driver_names_the_simulator_variable() {
        let e = Error::Load(LoadError::LibraryNotFound {
            tried: vec![("libcuda.so.1".into(), "cannot open shared object file".into())],
        });
        assert!(e.to_string().contains("GPU_SYNC_DRIVER=sim"), "{e}");
    }
}
