//! The element kinds and reduction operations NCCL takes, typed.

use bytemuck::{Pod, Zeroable};
use cuda_sys::nccl_bindings::{ncclDataType_t as D, ncclRedOp_t as R};

mod sealed {
    /// Only this module's element kinds are NCCL element kinds.
    pub trait Sealed {}
}

/// An element type NCCL reduces and moves: `f32`, `f64`, `i32`, `i64`,
/// `u32`, `u64`, `u8`, `i8`, [`half::f16`], [`half::bf16`], and the FP8
/// kinds [`Fp8E4M3`] and [`Fp8E5M2`] (NCCL 2.24 and later). Sealed: the
/// kind NCCL is told must be the element's real layout.
///
/// ```
/// use gpu_sync::nccl::NcclType;
/// fn bytes<T: NcclType>(n: usize) -> usize { n * std::mem::size_of::<T>() }
/// assert_eq!(bytes::<half::bf16>(4), 8);
/// ```
pub trait NcclType: Pod + sealed::Sealed {
    /// NCCL's name for it.
    const KIND: D;
}

macro_rules! kinds {
    ($($t:ty => $k:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl NcclType for $t {
            const KIND: D = D::$k;
        }
    )*};
}

kinds!(
    i8 => ncclInt8, u8 => ncclUint8, i32 => ncclInt32, u32 => ncclUint32, i64 => ncclInt64,
    u64 => ncclUint64, half::f16 => ncclFloat16, f32 => ncclFloat32, f64 => ncclFloat64,
    half::bf16 => ncclBfloat16, Fp8E4M3 => ncclFloat8e4m3, Fp8E5M2 => ncclFloat8e5m2,
);

/// An 8-bit float of the E4M3 layout (4 exponent bits, 3 mantissa bits), as
/// its bits: NCCL's `ncclFloat8e4m3` (NCCL 2.24 and later; older versions
/// refuse it with an error naming the version).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(transparent)]
pub struct Fp8E4M3(pub u8);

/// An 8-bit float of the E5M2 layout (5 exponent bits, 2 mantissa bits), as
/// its bits: NCCL's `ncclFloat8e5m2` (NCCL 2.24 and later).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(transparent)]
pub struct Fp8E5M2(pub u8);

/// How a reduction combines the ranks' elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum (`ncclSum`).
    Sum,
    /// The product (`ncclProd`).
    Prod,
    /// The minimum (`ncclMin`).
    Min,
    /// The maximum (`ncclMax`).
    Max,
    /// The mean: the sum divided by the number of ranks (`ncclAvg`).
    Avg,
}

impl ReduceOp {
    /// NCCL's name for it.
    pub(crate) fn raw(self) -> R {
        match self {
            ReduceOp::Sum => R::ncclSum,
            ReduceOp::Prod => R::ncclProd,
            ReduceOp::Min => R::ncclMin,
            ReduceOp::Max => R::ncclMax,
            ReduceOp::Avg => R::ncclAvg,
        }
    }
}
