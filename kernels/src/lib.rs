//! The workspace's CUDA kernels, from the Rust side.
//!
//! - [`Kernel`] / [`KernelInfo`] (`spec`): every kernel's symbol, module and
//!   parameters — size, pointer access, element type, alignment, extent. The
//!   simulator registration and the typed launch wrappers both derive from it.
//! - [`Module::fatbin`] (`fatbins`): the committed fatbins built by
//!   `cargo xtask kernels` from `kernels/cu/*.cu`, embedded 8-byte aligned.
//! - [`reference`](mod@reference): CPU implementations with bit-identical results.
//! - [`cost`]: FLOPs and minimum bytes moved, for the roofline.
//! - [`Kernels`] (`launch`): every kernel loaded into a device, as typed
//!   methods over gpu-sync buffers that check lengths and alignment — the
//!   only way to launch them (no typed kernel is handed out: several are
//!   sound only for the launches these methods make).
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
pub mod cost;
mod fatbins;
mod launch;
pub mod reference;
#[cfg(feature = "sim")]
mod sim;
mod spec;

pub use bench::{BenchKernels, ClockProbeSig, CopyMappedSig, SpinGateSig};
pub use cost::Cost;
pub use fatbins::{FATBIN_MAGIC, fatbin};
pub use launch::{
    AddSig, BumpSig, CheckPatternSig, CopySig, FillPatternSig, Kernels, MixSig, ReadSumSig, ScaleSig,
    SpinSig, TriadSig,
};
#[cfg(feature = "sim")]
pub use sim::register_sim_kernels;
pub use spec::{Access, DEFAULT_BLOCK, Kernel, KernelInfo, LaunchRule, Len, Module, Param, ParamKind, Ty};
