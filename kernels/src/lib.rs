//! The workspace's CUDA kernels, from the Rust side.
//!
//! - the kernel table (`table`): **one declaration per kernel** — symbol,
//!   module, parameters (gpu-sync type and C spec side by side), cost model,
//!   simulator implementation and the contract its declaration rests on —
//!   generating [`KernelId`] / [`KernelInfo`], the `*Sig` signature types,
//!   the typed declarations the wrappers use, [`cost::for_kernel`] and the
//!   simulator registration. A compile-time check proves each signature
//!   type agrees with its spec; `tests/signatures.rs` checks the spec
//!   against `kernels/cu/*.cu`.
//! - [`ModuleId::fatbin`] (`fatbins`): the committed fatbins built by
//!   `cargo xtask kernels` from `kernels/cu/*.cu`, embedded 8-byte aligned.
//! - [`reference`](mod@reference): CPU implementations with bit-identical results.
//! - [`cost`]: FLOPs and minimum bytes moved, for the roofline.
//! - [`Kernels`] (`launch`): every kernel loaded into a device, as typed
//!   methods over gpu-sync buffers that check lengths and alignment — the
//!   only way to launch them (no typed kernel is handed out: several are
//!   sound only for the launches these methods make).
//! - [`RooflineKernels`] (`roofline`): the roofline's probes — HBM
//!   variants, FMA chains, the cache sweep, shared memory, intensity.
//! - [`TensorKernels`] (`tensor`): the tensor-core probes (`wgmma`, sm_90a).
//! - [`MmaKernels`] (`mma`): the same ceilings through `mma.sync` (sm_80
//!   and newer), the fallback where `wgmma` does not exist.
//! - [`BenchKernels`] (`bench`): gpu-bench's instruments — clock probe,
//!   spin gate, SM copy from mapped host memory.
//! - `register_sim_kernels` (feature `sim`): the references registered with
//!   `cuda-sim`, so the whole stack runs without a GPU.
//!
//! Alignment: `read_sum_u32x4`, `copy_u32x4` and `triad_f32` use 16-byte
//! vector loads, so their data pointers must be 16-byte aligned
//! ([`ParamKind::Pointer`]'s `align`); the other kernels need only their
//! element's alignment.
#![deny(unsafe_code)]

mod bench;
mod checks;
pub mod cost;
mod fatbins;
mod launch;
mod mma;
pub mod reference;
mod roofline;
#[cfg(feature = "sim")]
mod sim;
mod spec;
mod table;
mod tensor;

pub use bench::BenchKernels;
pub use cost::Cost;
pub use fatbins::{FATBIN_MAGIC, fatbin};
pub use launch::Kernels;
pub use mma::MmaKernels;
pub use roofline::{
    CacheHint, FmaOut, FmaPrecision, Grid, HBM_BULK, HBM_VARIANTS, LoadFlavor, READ_BULK_MAX_STAGES,
    ReadVariant, RooflineKernels, hbm_variant_name,
};
#[cfg(feature = "sim")]
pub use sim::register_sim_kernels;
pub use spec::{
    DEFAULT_BLOCK, Extent, KernelId, KernelInfo, KernelParam, LaunchRule, ModuleId, ParamAccess, ParamKind,
    TILE_VECTORS, Ty,
};
pub use table::{
    AddSig, BumpSig, CheckPatternSig, ClockProbeSig, CopyMappedSig, CopySig, EmptySig, FillPatternSig,
    MixSig, ReadSumSig, ScaleSig, SpinGateSig, SpinSig, StampSig, TriadSig,
};
pub use tensor::TensorKernels;
