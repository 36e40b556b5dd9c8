//! NCCL's element kinds and reduction operators over raw bytes: exact for
//! the integer kinds (wrapping, as the device's integer arithmetic), and
//! for the floating kinds one rounding per step, folding the ranks' inputs
//! in rank order (rank 0's value, then + rank 1's, …), each step rounded to
//! the element kind (f16 and bf16 through f32, as NCCL's kernels compute
//! them). `ncclAvg` is the sum, then one division by the number of ranks
//! (rounded for floats, truncating for integers).

use cuda_sys::nccl_bindings::{ncclDataType_t as T, ncclRedOp_t as O};

/// Bytes of one element of `ty`; `None` for a kind the simulator refuses
/// (FP8, unknown codes).
pub(crate) fn elem_size(ty: T) -> Option<u64> {
    match ty {
        T::ncclInt8 | T::ncclUint8 => Some(1),
        T::ncclFloat16 | T::ncclBfloat16 => Some(2),
        T::ncclInt32 | T::ncclUint32 | T::ncclFloat32 => Some(4),
        T::ncclInt64 | T::ncclUint64 | T::ncclFloat64 => Some(8),
        _ => None,
    }
}

/// Whether `op` is one of the five built-in operators.
pub(crate) fn valid_op(op: O) -> bool {
    op.0 < O::ncclNumOps.0
}

/// One element kind's arithmetic.
trait Elem: Copy {
    const SIZE: usize;
    fn get(b: &[u8]) -> Self;
    fn put(self, out: &mut Vec<u8>);
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
    fn max(self, o: Self) -> Self;
    fn div_n(self, n: usize) -> Self;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = size_of::<$t>();
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(a)
            }
            fn put(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_le_bytes()) }
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn min(self, o: Self) -> Self { Ord::min(self, o) }
            fn max(self, o: Self) -> Self { Ord::max(self, o) }
            fn div_n(self, n: usize) -> Self { self.wrapping_div(n as $t) }
        }
    )*};
}
int_elem!(i8, u8, i32, u32, i64, u64);

macro_rules! float_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = size_of::<$t>();
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(a)
            }
            fn put(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_le_bytes()) }
            fn add(self, o: Self) -> Self { self + o }
            fn mul(self, o: Self) -> Self { self * o }
            fn min(self, o: Self) -> Self { <$t>::min(self, o) }
            fn max(self, o: Self) -> Self { <$t>::max(self, o) }
            fn div_n(self, n: usize) -> Self { self / n as $t }
        }
    )*};
}
float_elem!(f32, f64);

/// A 16-bit float kind, computed through f32 and rounded back each step.
trait Half: Copy {
    fn to_f32(self) -> f32;
    fn of_f32(f: f32) -> Self;
    fn bits(self) -> u16;
    fn from_bits(b: u16) -> Self;
}

#[derive(Clone, Copy)]
struct F16(u16);
#[derive(Clone, Copy)]
struct Bf16(u16);

impl Half for F16 {
    fn to_f32(self) -> f32 {
        f16_to_f32(self.0)
    }
    fn of_f32(f: f32) -> Self {
        F16(f32_to_f16(f))
    }
    fn bits(self) -> u16 {
        self.0
    }
    fn from_bits(b: u16) -> Self {
        F16(b)
    }
}

impl Half for Bf16 {
    fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }
    fn of_f32(f: f32) -> Self {
        let x = f.to_bits();
        if f.is_nan() {
            return Bf16(((x >> 16) as u16) | 0x40);
        }
        let r = x.wrapping_add(0x7fff + ((x >> 16) & 1));
        Bf16((r >> 16) as u16)
    }
    fn bits(self) -> u16 {
        self.0
    }
    fn from_bits(b: u16) -> Self {
        Bf16(b)
    }
}

macro_rules! half_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = 2;
            fn get(b: &[u8]) -> Self { <$t as Half>::from_bits(u16::from_le_bytes([b[0], b[1]])) }
            fn put(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.bits().to_le_bytes()) }
            fn add(self, o: Self) -> Self { Self::of_f32(self.to_f32() + o.to_f32()) }
            fn mul(self, o: Self) -> Self { Self::of_f32(self.to_f32() * o.to_f32()) }
            fn min(self, o: Self) -> Self { Self::of_f32(self.to_f32().min(o.to_f32())) }
            fn max(self, o: Self) -> Self { Self::of_f32(self.to_f32().max(o.to_f32())) }
            fn div_n(self, n: usize) -> Self { Self::of_f32(self.to_f32() / n as f32) }
        }
    )*};
}
half_elem!(F16, Bf16);

/// IEEE half (binary16) to f32, exact.
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalize the mantissa.
            let (mut e, mut m) = (113u32, man);
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
        (31, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// f32 to IEEE half, rounding to nearest even.
pub(crate) fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 255 {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 112;
    if e >= 31 {
        return sign | 0x7c00;
    }
    let round = |v: u32, rem: u32, halfway: u32| {
        if rem > halfway || (rem == halfway && v & 1 == 1) { v + 1 } else { v }
    };
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let v = m >> shift;
        return sign | round(v, m & ((1 << shift) - 1), 1 << (shift - 1)) as u16;
    }
    let v = ((e as u32) << 10) | (man >> 13);
    sign | round(v, man & 0x1fff, 0x1000) as u16
}

fn fold<E: Elem>(op: O, inputs: &[&[u8]], count: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * E::SIZE);
    for i in 0..count {
        let at = |b: &[u8]| E::get(&b[i * E::SIZE..]);
        let mut acc = at(inputs[0]);
        for b in &inputs[1..] {
            let x = at(b);
            acc = match op {
                O::ncclProd => acc.mul(x),
                O::ncclMin => acc.min(x),
                O::ncclMax => acc.max(x),
                _ => acc.add(x),
            };
        }
        if op == O::ncclAvg {
            acc = acc.div_n(inputs.len());
        }
        acc.put(&mut out);
    }
    out
}

/// Reduces `count` elements of each of `inputs` (one per rank, in rank
/// order, each at least `count` elements of `ty`) with `op`. `ty` and `op`
/// were checked ([`elem_size`], [`valid_op`]); `inputs` is not empty.
pub(crate) fn reduce(ty: T, op: O, inputs: &[&[u8]], count: usize) -> Vec<u8> {
    match ty {
        T::ncclInt8 => fold::<i8>(op, inputs, count),
        T::ncclUint8 => fold::<u8>(op, inputs, count),
        T::ncclInt32 => fold::<i32>(op, inputs, count),
        T::ncclUint32 => fold::<u32>(op, inputs, count),
        T::ncclInt64 => fold::<i64>(op, inputs, count),
        T::ncclUint64 => fold::<u64>(op, inputs, count),
        T::ncclFloat16 => fold::<F16>(op, inputs, count),
        T::ncclBfloat16 => fold::<Bf16>(op, inputs, count),
        T::ncclFloat32 => fold::<f32>(op, inputs, count),
        _ => fold::<f64>(op, inputs, count),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions_round_trip_and_round_to_nearest_even() {
        for h in [0u16, 0x8000, 0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x0400, 0x7c00] {
            assert_eq!(f32_to_f16(f16_to_f32(h)), h, "{h:#x}");
        }
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        // 2^-24 written by its bits: `powi` is not exact under Miri, which
        // runs these tests in CI.
        assert_eq!(f16_to_f32(0x0001), f32::from_bits(0x3380_0000));
        // 2049 lies between 2048 and 2050: ties to even (2048).
        assert_eq!(f16_to_f32(f32_to_f16(2049.0)), 2048.0);
        assert_eq!(f16_to_f32(f32_to_f16(2051.0)), 2052.0);
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(Bf16::of_f32(1.0).0, 0x3f80);
        assert_eq!(Bf16::of_f32(257.0).to_f32(), 256.0);
    }

    #[test]
    fn integer_sums_wrap_and_floats_fold_in_rank_order() {
        let a = 250u8.to_le_bytes();
        let b = 10u8.to_le_bytes();
        assert_eq!(reduce(T::ncclUint8, O::ncclSum, &[&a, &b], 1), vec![4]);
        // (1e8 + 1) + -1e8 in f32 is 0, 1e8 + (1 - 1e8) would differ: the order is rank order.
        let x: Vec<[u8; 4]> = [1e8f32, 1.0, -1e8].iter().map(|v| v.to_le_bytes()).collect();
        let inputs: Vec<&[u8]> = x.iter().map(|v| v.as_slice()).collect();
        assert_eq!(reduce(T::ncclFloat32, O::ncclSum, &inputs, 1), 0f32.to_le_bytes().to_vec());
        let y: Vec<[u8; 4]> = [7i32, -3, 4].iter().map(|v| v.to_le_bytes()).collect();
        let inputs: Vec<&[u8]> = y.iter().map(|v| v.as_slice()).collect();
        assert_eq!(reduce(T::ncclInt32, O::ncclAvg, &inputs, 1), 2i32.to_le_bytes().to_vec());
        assert_eq!(reduce(T::ncclInt32, O::ncclMin, &inputs, 1), (-3i32).to_le_bytes().to_vec());
        assert_eq!(reduce(T::ncclInt32, O::ncclProd, &inputs, 1), (-84i32).to_le_bytes().to_vec());
    }
}
