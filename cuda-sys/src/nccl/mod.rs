//! NCCL, NVIDIA's collective communication library, loaded at run time like
//! libcuda, libcupti and libnvrtc, so building needs no NCCL.
//!
//! - [`Nccl`]: the function table, one field per NCCL function this
//!   workspace uses, typed by the generated `PFN_*` typedefs
//!   ([`crate::nccl_bindings`], from the pinned `nvidia-nccl-cu13==2.28.9`
//!   wheel's `nccl.h`, with `ncclConfig_t` and `NCCL_CONFIG_INITIALIZER`).
//!   A software NCCL fills the same table ([`Nccl::empty`], then
//!   [`install_nccl`]), as cuda-sim does for the driver and CUPTI: the table
//!   is chosen with the driver (`GPU_SYNC_DRIVER=sim` installs the
//!   simulator's driver, CUPTI and NCCL together).
//! - [`nccl`]: the process-wide table: the installed one, else
//!   `libnccl.so.2` loaded from, in order ([`nccl_candidates`]), the path in
//!   `CUDA_SYS_LIBNCCL`; an NCCL already loaded in the process (`dlopen`
//!   with `RTLD_NOLOAD`: one NCCL per process, PyTorch's if it came first);
//!   `lib/libnccl.so.2` of the run host's Python package `nvidia.nccl` (the
//!   `nvidia-nccl-cu13` wheel, as `pip install` put it); this workspace's
//!   pinned wheel under `target/cuda-wheels/` (development); the dynamic
//!   loader's path. Its version must be at least [`NCCL_MIN_VERSION`]
//!   (2.19, why is said there). Nothing found is an [`NcclLoadError`] listing
//!   each place and what to install, never a panic.
//! - [`result`]: one function per table function, returning
//!   `Result<_, NcclError>`; `ncclInProgress` is its own case
//!   ([`NcclError::InProgress`]), since communicators are non-blocking.
//!
//! Nothing here knows about gpu-sync's safety rules: it types the calls.

mod error;
mod load;
pub mod result;
#[cfg(test)]
mod tests;

pub use error::{NcclError, NcclLoadError, check, nccl_result_name, nccl_version_string};
pub use load::{
    LIBNCCL_ENV, NCCL_FP8_MIN_VERSION, NCCL_MIN_VERSION, NCCL_SONAME, Nccl, NcclCandidate, NcclInstallError,
    check_version, install_nccl, installed_nccl, load_nccl, nccl, nccl_candidates, nccl_candidates_from,
    python_nccl_lib,
};

/// A communicator's name, as a value that may cross threads: the raw
/// `ncclComm_t` and nothing more — no claim that it is alive, nor that no
/// other thread uses it (as [`crate::handle::RawHandle`] for driver
/// handles). Every [`result`] function that takes a communicator is
/// `unsafe`, and its caller argues both: the communicator is alive, and
/// calls on it are not made by two threads at once (NCCL's rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommName(crate::nccl_bindings::ncclComm_t);

impl CommName {
    /// Names `raw`.
    pub fn new(raw: crate::nccl_bindings::ncclComm_t) -> CommName {
        CommName(raw)
    }

    /// The raw communicator.
    pub fn get(self) -> crate::nccl_bindings::ncclComm_t {
        self.0
    }
}

// SAFETY: a `CommName` is only a name: nothing reads through it here, and
// every use passes it to an `unsafe` function of `result` whose caller
// argues that the communicator is alive and that no two threads call NCCL
// on it at once. Sending or sharing the name is therefore harmless.
unsafe impl Send for CommName {}
// SAFETY: as for `Send`.
unsafe impl Sync for CommName {}
