//! The code `cargo xtask bindgen` generates, under `src/generated/` (never
//! edited by hand: the `generated_manifest` test and `generated/MANIFEST`
//! keep it so), with one set of lint allowances for all of it: C names, no
//! docs, and bindgen's own `unsafe` code (`entry_points.rs`, a list of the
//! driver's entry points, is `include!`d by `driver.rs` instead).
#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    missing_docs,
    unreachable_pub,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    unsafe_op_in_unsafe_fn
)]

/// The CUDA driver API's types and `PFN_` typedefs, from the pinned wheel's
/// `cuda.h` and `cudaTypedefs.h`.
pub mod bindings;
/// CUPTI's activity types and one `PFN_` typedef per function the
/// [`crate::cupti::Cupti`] table binds, generated from the pinned wheel's
/// headers.
pub mod cupti_bindings;
/// NCCL's types (`ncclComm_t`, `ncclUniqueId`, `ncclConfig_t` with
/// `NCCL_CONFIG_INITIALIZER`, `ncclResult_t`, `ncclDataType_t`,
/// `ncclRedOp_t`) and one `PFN_` typedef per function the
/// [`crate::nccl::Nccl`] table binds, generated from the pinned wheel's
/// `nccl.h`.
pub mod nccl_bindings;
/// NVRTC's types and run-time loaded function table, generated from the
/// pinned wheel's `nvrtc.h` (see [`crate::nvrtc`]).
pub mod nvrtc_bindings;
/// The name of every `CUresult`, for [`crate::result_name`].
pub(crate) mod result_names;
