// NCCL's element kinds are sealed: a local type, or a reference to one,
// cannot tell NCCL it is a kind whose layout it does not have.
use gpu_sync::nccl::NcclType;

#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Pair(u32, u32);

impl NcclType for Pair {
    const KIND: gpu_sync::cuda_sys::nccl_bindings::ncclDataType_t =
        gpu_sync::cuda_sys::nccl_bindings::ncclDataType_t::ncclFloat64;
}

impl NcclType for &'static Pair {
    const KIND: gpu_sync::cuda_sys::nccl_bindings::ncclDataType_t =
        gpu_sync::cuda_sys::nccl_bindings::ncclDataType_t::ncclFloat32;
}

fn main() {}
