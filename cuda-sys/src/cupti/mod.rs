//! CUPTI, the CUDA profiling interface, loaded at run time like libcuda:
//! the GPU's own start and end timestamps of every kernel, copy and memset
//! (the Activity API), so a timer can be checked against the device's clock.
//!
//! - [`Cupti`]: the function table, one field per function CUPTI exports
//!   that this workspace uses, typed by the generated `PFN_*` typedefs
//!   (`cupti_bindings.rs`, from the pinned `nvidia-cuda-cupti` wheel's
//!   headers). A software driver fills the same table ([`Cupti::empty`],
//!   then [`install_cupti`]), as cuda-sim does for the driver.
//! - [`cupti`]: the process-wide table: the installed one, else `libcupti`
//!   loaded from, in order, `CUDA_SYS_LIBCUPTI`, the pinned wheel under this
//!   workspace's `target/cuda-wheels/`, the CUDA toolkit
//!   (`/usr/local/cuda/extras/CUPTI/lib64`, `/usr/local/cuda/lib64`), and
//!   the dynamic loader's path. Its version must be of the 13.0 line the
//!   record layouts were generated from.
//! - [`Activity`] / [`activity`]: the one process-wide CUPTI subscriber and
//!   activity-buffer owner. Consumers ([`Activity::consumer`]) each get
//!   their own copy of the records of the kinds they asked for; records
//!   CUPTI dropped for lack of buffer space are counted, never lost
//!   silently. Under compute-sanitizer or Nsight Compute, which own the
//!   profiling interface, subscribing fails and [`activity`] returns
//!   [`CuptiError::Unavailable`].
//!
//! - [`KernelDurations`]: the range profiler with one counter,
//!   `gpu__time_duration.sum` (the duration Nsight Compute reports), per
//!   kernel, for a kernel clock that adds no code to the kernels.
//!
//! Nothing here knows about gpu-sync's safety rules: it types the calls and
//! turns CUPTI's binary records into plain Rust values.

mod activity;
mod error;
mod load;
mod range;
mod records;

pub use activity::{Activity, Consumer, activity};
pub use error::{CuptiError, cupti_result_name};
pub use load::{
    CUPTI_HEADER_VERSION, Cupti, LIBCUPTI_ENV, cupti, cupti_candidates, install_cupti, load_cupti,
};
pub use range::{KERNEL_DURATION_METRIC, KernelDurations};
pub use records::{ActivityKind, ActivityOp, ActivityRecord, EXTERNAL_KIND_CUSTOM0, StreamRecords, SyncKind};
