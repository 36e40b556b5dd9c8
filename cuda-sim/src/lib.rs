//! (being written) A software CUDA driver.
mod registry;
pub use registry::{
    DurationFn, KernelCall, KernelFault, KernelFn, KernelSpec, ParamKind, ParamSpec, Touched,
    lookup_kernel, register_kernel,
};
