//! The element kinds of a sweep and the check's arithmetic: each rank's
//! input is a pattern of whole numbers small enough that the sum over every
//! rank is exact in the kind (a float sum is then exact whatever order NCCL
//! adds in), so every output is compared for equality with a CPU reference.

use gpu_sync::nccl::NcclType;
use serde::{Deserialize, Serialize};

/// The element kind of a sweep (nccl-tests' `-d`).
///
/// ```
/// use gpu_bench::nccl::Dtype;
/// assert_eq!((Dtype::Bf16.name(), Dtype::Bf16.size()), ("bf16", 2));
/// assert!(Dtype::ALL.iter().any(|d| *d == Dtype::U8 && d.size() == 1));
/// ```
/// [`NcclReport`](super::NcclReport) says which one a run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    /// `f32` (`ncclFloat32`), nccl-tests' default.
    F32,
    /// `f64` (`ncclFloat64`).
    F64,
    /// `half::f16` (`ncclFloat16`).
    F16,
    /// `half::bf16` (`ncclBfloat16`).
    Bf16,
    /// `i32` (`ncclInt32`).
    I32,
    /// `i64` (`ncclInt64`).
    I64,
    /// `u8` (`ncclUint8`).
    U8,
}

impl Dtype {
    /// Every kind.
    pub const ALL: [Dtype; 7] =
        [Dtype::F32, Dtype::F64, Dtype::F16, Dtype::Bf16, Dtype::I32, Dtype::I64, Dtype::U8];

    /// Its name (`f32`, `bf16` …).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::I32 => "i32",
            Dtype::I64 => "i64",
            Dtype::U8 => "u8",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F64 | Dtype::I64 => 8,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::U8 => 1,
        }
    }
}

/// An element kind a sweep runs on: NCCL's kind, and whole numbers in and
/// out of it.
pub(super) trait Element: NcclType + PartialEq + Send + Sync {
    /// The largest whole number `w` such that every whole number up to `w`
    /// is exact in the kind and is not the sentinel the outputs are cleared
    /// to (every byte `0xFF`: a NaN for the floats, −1 for the signed
    /// integers, 255 for `u8`).
    const EXACT: u64;
    /// The whole number `v` (at most [`Element::EXACT`]) as an element.
    fn whole(v: u64) -> Self;
}

macro_rules! element {
    ($($t:ty => $exact:expr, |$v:ident| $conv:expr;)*) => {$(
        impl Element for $t {
            const EXACT: u64 = $exact;
            fn whole($v: u64) -> Self {
                $conv
            }
        }
    )*};
}

element! {
    f32 => 1 << 24, |v| v as f32;
    f64 => 1 << 53, |v| v as f64;
    half::f16 => 1 << 11, |v| half::f16::from_f64(v as f64);
    half::bf16 => 1 << 8, |v| half::bf16::from_f64(v as f64);
    i32 => i32::MAX as u64, |v| v as i32;
    i64 => i64::MAX as u64, |v| v as i64;
    u8 => 254, |v| v as u8;
}

/// Rank `rank`'s input element `idx`: a whole number below `modulus`,
/// different across ranks and indices (a multiplicative hash, so a shifted
/// or swapped block reads as wrong).
pub(super) fn input(rank: usize, idx: usize, modulus: u64) -> u64 {
    (idx as u64).wrapping_mul(2_654_435_761).wrapping_add(rank as u64 * 40_503 + 7) % modulus
}

/// The modulus of `T`'s inputs over `ranks` ranks: the sum of one element
/// over every rank stays at most [`Element::EXACT`].
pub(super) fn modulus<T: Element>(ranks: usize) -> u64 {
    (T::EXACT / ranks.max(1) as u64).max(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sums_exact<T: Element + std::fmt::Debug>(ranks: usize) {
        let m = modulus::<T>(ranks);
        let worst = (m - 1) * ranks as u64;
        assert!(worst <= T::EXACT);
        // The largest sum and its neighbour below are told apart.
        assert_ne!(T::whole(worst), T::whole(worst - 1));
        // The sentinel (every byte 0xFF) is no value a check expects.
        let sentinel: T = bytemuck::Zeroable::zeroed();
        let mut bytes = bytemuck::bytes_of(&sentinel).to_vec();
        bytes.iter_mut().for_each(|b| *b = 0xFF);
        let sentinel: T = *bytemuck::from_bytes(&bytes);
        for v in [0, 1, worst / 2, worst] {
            assert!(T::whole(v) != sentinel, "{v} reads as the sentinel");
        }
    }

    #[test]
    fn every_kind_sums_whole_numbers_exactly_over_eight_ranks() {
        for n in [2, 3, 4, 8] {
            sums_exact::<f32>(n);
            sums_exact::<f64>(n);
            sums_exact::<half::f16>(n);
            sums_exact::<half::bf16>(n);
            sums_exact::<i32>(n);
            sums_exact::<i64>(n);
            sums_exact::<u8>(n);
        }
    }

    #[test]
    fn inputs_differ_between_ranks_and_neighbours() {
        let m = modulus::<f32>(4);
        assert_ne!(input(0, 5, m), input(1, 5, m));
        assert_ne!(input(0, 5, m), input(0, 6, m));
        assert!((0..1000).all(|i| input(3, i, m) < m));
    }
}
