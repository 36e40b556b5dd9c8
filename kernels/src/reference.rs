//! CPU reference implementations: plain functions over slices with the same
//! results as the `.cu` kernels — bit for bit, integer and float alike (the
//! float kernels do one IEEE operation per element, or one fused multiply-add:
//! `fmaf` in CUDA, [`f32::mul_add`] here).
//!
//! Functions over several slices process the first `min` of their lengths
//! elements; the kernels are given one `n` for all of them.

/// Chris Wellons' "lowbias32" finalizer; a bijection on `u32`.
/// Twin of `gs_lowbias32` in `common.cuh`.
const fn lowbias32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x7feb_352d);
    h ^= h >> 15;
    h = h.wrapping_mul(0x846c_a68b);
    h ^= h >> 16;
    h
}

/// The fill/check pattern: element `i` of a buffer filled with `seed`.
/// Twin of `gs_pattern` in `common.cuh`.
///
/// Depends on all 64 bits of `i`: for a fixed seed it is injective on any
/// run of 2^32 consecutive indices, and for a fixed index it is injective in
/// the seed.
pub const fn pattern(seed: u32, i: u64) -> u32 {
    let lo = i as u32;
    let hi = (i >> 32) as u32;
    let h = (seed.wrapping_add(0x6a09_e667).wrapping_mul(0x9e37_79b9)) ^ hi.wrapping_mul(0x85eb_ca6b) ^ lo;
    lowbias32(h)
}

/// The integer mix of `mix_u32`. Twin of `gs_mix` in `common.cuh`.
pub const fn mix(a: u32, b: u32, salt: u32) -> u32 {
    lowbias32(a ^ b.wrapping_mul(0x85eb_ca6b) ^ salt.wrapping_mul(0xc2b2_ae35))
}

/// `read_sum_u32x4`: the wrapping `u64` sum of all words (the kernel adds it
/// to `*out`).
pub fn read_sum_u32(words: &[u32]) -> u64 {
    words.iter().fold(0u64, |acc, &w| acc.wrapping_add(u64::from(w)))
}

/// `copy_u32x4`: `dst[i] = src[i]`.
pub fn copy_u32(src: &[u32], dst: &mut [u32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s;
    }
}

/// `triad_f32`: `a[i] = scalar * c[i] + b[i]` with one rounding
/// (`fmaf(scalar, c[i], b[i])`).
pub fn triad_f32(a: &mut [f32], b: &[f32], c: &[f32], scalar: f32) {
    for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
        *a = scalar.mul_add(*c, *b);
    }
}

/// `spin_cycles`: the value the kernel writes to `out[0]` — on a GPU, the
/// cycles it actually waited, at least `cycles`; the reference (and the
/// simulator) reports exactly `cycles`.
pub const fn spin_cycles(cycles: u64) -> u64 {
    cycles
}

/// `fill_pattern_u32`: `dst[i] = pattern(seed, i)`.
pub fn fill_pattern_u32(dst: &mut [u32], seed: u32) {
    for (i, d) in (0u64..).zip(dst.iter_mut()) {
        *d = pattern(seed, i);
    }
}

/// `check_pattern_u32`: how many `src[i] != pattern(seed, i)` (the kernel adds
/// it to `*mismatches`).
pub fn check_pattern_u32(src: &[u32], seed: u32) -> u64 {
    (0u64..).zip(src).filter(|&(i, &v)| v != pattern(seed, i)).map(|_| 1u64).sum()
}

/// `scale_f32`: `out[i] = a * input[i]`.
pub fn scale_f32(input: &[f32], out: &mut [f32], a: f32) {
    for (o, x) in out.iter_mut().zip(input) {
        *o = a * *x;
    }
}

/// `add_f32`: `out[i] = x[i] + y[i]`.
pub fn add_f32(x: &[f32], y: &[f32], out: &mut [f32]) {
    for ((o, x), y) in out.iter_mut().zip(x).zip(y) {
        *o = *x + *y;
    }
}

/// `mix_u32`: `out[i] = mix(a[i], b[i], salt)`.
pub fn mix_u32(a: &[u32], b: &[u32], out: &mut [u32], salt: u32) {
    for ((o, a), b) in out.iter_mut().zip(a).zip(b) {
        *o = mix(*a, *b, salt);
    }
}

/// `bump_u32`: `x[i] = x[i].wrapping_add(add)`.
pub fn bump_u32(x: &mut [u32], add: u32) {
    for v in x {
        *v = v.wrapping_add(add);
    }
}

/// The largest `|got - want|` over the elements (NaN if either side holds a
/// NaN: a NaN never passes a check) and the largest `|want|` (the scale a
/// tolerance is relative to): how the matrix probes' results are checked.
pub fn worst_abs_error(got: &[f32], want: &[f32]) -> (f32, f32) {
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0f32, |m, e| if e.is_nan() || m.is_nan() { f32::NAN } else { m.max(e) });
    (worst, scale)
}

/// The roofline's probes (`roofline.cu`), for their result checks and the
/// simulator.
pub mod probes {
    use crate::cost::{FMA_CHAINS, FMA_INNER, SMEM_UNROLL};

    /// Words of shared memory per block of `smem_read`, in uint4 (`RL_SMEM`).
    pub const SMEM_ELEMS: u64 = 2048;
    /// The FMA probes' multiplier.
    const M: f64 = -0.9375;
    /// The FMA probes' addend.
    const K: f64 = 0.5;
    /// The step between slot starting values, 2^-20.
    const STEP: f32 = 1.0 / 1_048_576.0;

    /// `cache_read`: the wrapping `u64` sum of the words of `in[j % ws]` for
    /// `j < n` (`ws = in.len() / 4` uint4).
    pub fn cache_read(words: &[u32], n: u64) -> u64 {
        let ws = (words.len() / 4) as u64;
        if ws == 0 {
            return 0;
        }
        let sum = |k: u64| super::read_sum_u32(&words[..(k * 4) as usize]);
        let (full, rem) = (n / ws, n % ws);
        sum(ws).wrapping_mul(full).wrapping_add(sum(rem))
    }

    /// `smem_read`: what thread 0 sums (wrapping `u32`) over its
    /// `8 * iters` loads of element `k % 2048`, word `w` of element `e`
    /// being `pattern(seed, 4e + w)`.
    pub fn smem_read(iters: u32, seed: u32) -> u32 {
        let elem = |e: u64| (0..4).fold(0u32, |a, w| a.wrapping_add(super::pattern(seed, 4 * e + w)));
        let loads = u64::from(iters) * SMEM_UNROLL;
        let all = (0..SMEM_ELEMS).fold(0u32, |a, e| a.wrapping_add(elem(e)));
        let full = (loads / SMEM_ELEMS) as u32;
        let rem = (0..loads % SMEM_ELEMS).fold(0u32, |a, e| a.wrapping_add(elem(e)));
        all.wrapping_mul(full).wrapping_add(rem)
    }

    /// `intensity_f32`: each float after `fmas` steps of
    /// `x = fmaf(x, -0.9375, 0.5)`.
    pub fn intensity_f32(input: &[f32], out: &mut [f32], fmas: u32) {
        for (o, x) in out.iter_mut().zip(input) {
            let mut v = *x;
            for _ in 0..fmas {
                v = v.mul_add(-0.9375, 0.5);
            }
            *o = v;
        }
    }

    /// `intensity_f64`: each double after `fmas` steps of
    /// `x = fma(x, -0.9375, 0.5)`.
    pub fn intensity_f64(input: &[f64], out: &mut [f64], fmas: u32) {
        for (o, x) in out.iter_mut().zip(input) {
            let mut v = *x;
            for _ in 0..fmas {
                v = v.mul_add(M, K);
            }
            *o = v;
        }
    }

    /// IEEE binary16 bits of `v`, which must be an f16 value (as
    /// [`Half::round`] gives): zero, subnormal, normal or infinite.
    pub fn f16_bits(v: f64) -> u16 {
        let sign = u16::from(v.is_sign_negative()) << 15;
        let a = v.abs();
        if a == 0.0 {
            return sign;
        }
        if a.is_infinite() || a > 65504.0 {
            return sign | 0x7c00;
        }
        let exp = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        if exp < -14 {
            return sign | (a / 2f64.powi(-24)) as u16;
        }
        let mant = ((a / 2f64.powi(exp) - 1.0) * 1024.0) as u16;
        sign | (((exp + 15) as u16) << 10) | mant
    }

    /// `intensity_f16x2`: each half of each word (low half first) after
    /// `fmas` steps of `x = fma(x, -0.9375, 0.5)` in binary16, correctly
    /// rounded (the product and sum are exact in f64 for these magnitudes).
    pub fn intensity_f16x2(input: &[u32], out: &mut [u32], fmas: u32) {
        let half = |h: u16| TcFormat::F16.decode(&h.to_le_bytes(), 0);
        let step = |h: u16| -> u16 {
            let mut x = half(h);
            for _ in 0..fmas {
                x = Half::F16.round(x.mul_add(M, K));
            }
            f16_bits(x)
        };
        for (o, w) in out.iter_mut().zip(input) {
            *o = u32::from(step(*w as u16)) | (u32::from(step((*w >> 16) as u16)) << 16);
        }
    }

    /// The starting value of chain `c` of slot `i` (`seed + j * 2^-20`,
    /// `j = 8i + c` rounded to f32, as the kernel computes it).
    fn start_f32(seed: f32, j: u64) -> f32 {
        (j as f32).mul_add(STEP, seed)
    }

    /// `fma_f32`: `out[i]` for `i < out.len()`.
    pub fn fma_f32(seed: f32, iters: u32, out: &mut [f32]) {
        for (i, o) in (0u64..).zip(out.iter_mut()) {
            let mut acc = 0.0f32;
            for c in 0..FMA_CHAINS {
                let mut x = start_f32(seed, i * FMA_CHAINS + c);
                for _ in 0..u64::from(iters) * FMA_INNER {
                    x = x.mul_add(M as f32, K as f32);
                }
                acc += x;
            }
            *o = acc;
        }
    }

    /// `fma_f64`: `out[i]` for `i < out.len()`.
    pub fn fma_f64(seed: f64, iters: u32, out: &mut [f64]) {
        for (i, o) in (0u64..).zip(out.iter_mut()) {
            let mut acc = 0.0f64;
            for c in 0..FMA_CHAINS {
                let mut x = ((i * FMA_CHAINS + c) as f64).mul_add(f64::from(STEP), seed);
                for _ in 0..u64::from(iters) * FMA_INNER {
                    x = x.mul_add(M, K);
                }
                acc += x;
            }
            *o = acc;
        }
    }

    /// A 16-bit float format, by its stored mantissa bits and smallest
    /// normal exponent.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Half {
        /// IEEE binary16 (`fma.rn.f16x2`).
        F16,
        /// bfloat16 (`fma.rn.bf16x2`).
        Bf16,
    }

    impl Half {
        /// `v` rounded to this format, to nearest even (the value, in f64).
        /// Overflow gives an infinity.
        pub fn round(self, v: f64) -> f64 {
            let (mant, min_exp, max) = match self {
                Half::F16 => (10, -14, 65504.0),
                Half::Bf16 => (7, -126, 3.389_531_389_251_535_5e38),
            };
            if v == 0.0 || !v.is_finite() {
                return v;
            }
            let exp = (((v.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(min_exp);
            let quantum = 2f64.powi(exp - mant);
            let r = (v / quantum).round_ties_even() * quantum;
            if r.abs() > max { f64::INFINITY.copysign(r) } else { r }
        }
    }

    /// `fma_f16x2` / `fma_bf16x2`: `out[i]` for `i < out.len()`. Each step's
    /// product and sum are exact in f64 for these magnitudes, so one
    /// rounding to the format gives the hardware's correctly rounded FMA.
    pub fn fma_half2(format: Half, seed: f32, iters: u32, out: &mut [f32]) {
        let (m, k) = (format.round(M), format.round(K));
        for (i, o) in (0u64..).zip(out.iter_mut()) {
            let mut acc = 0.0f32;
            for c in 0..FMA_CHAINS {
                let j = i * FMA_CHAINS + c;
                let lo = (j as f32).mul_add(STEP, seed);
                let hi = ((j as f32) + 0.5).mul_add(STEP, seed);
                let mut x = [format.round(f64::from(lo)), format.round(f64::from(hi))];
                for _ in 0..u64::from(iters) * FMA_INNER {
                    for v in &mut x {
                        *v = format.round(v.mul_add(m, k));
                    }
                }
                acc = acc + x[0] as f32 + x[1] as f32;
            }
            *o = acc;
        }
    }

    /// The operand format of a tensor probe (`tensor.cu`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum TcFormat {
        /// bfloat16 (`tc_bf16_probe`).
        Bf16,
        /// IEEE half (`tc_f16_probe`).
        F16,
        /// FP8 e4m3 (`tc_e4m3_probe`).
        E4m3,
    }

    impl TcFormat {
        /// Values per 128-byte row: the K of one launch's four slices.
        pub const fn k(self) -> usize {
            match self {
                TcFormat::Bf16 | TcFormat::F16 => 64,
                TcFormat::E4m3 => 128,
            }
        }

        /// Value `i` of a row-major tile of this format.
        pub fn decode(self, bytes: &[u8], i: usize) -> f64 {
            match self {
                TcFormat::Bf16 => {
                    let h = u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]);
                    f64::from(f32::from_bits(u32::from(h) << 16))
                }
                TcFormat::F16 => {
                    let h = u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]);
                    let (s, e, m) = (h >> 15, i32::from((h >> 10) & 31), f64::from(h & 1023));
                    let v = match e {
                        0 => m * 2f64.powi(-24),
                        31 => f64::NAN,
                        _ => (1.0 + m / 1024.0) * 2f64.powi(e - 15),
                    };
                    if s == 1 { -v } else { v }
                }
                TcFormat::E4m3 => {
                    let b = bytes[i];
                    let (s, e, m) = (b >> 7, i32::from((b >> 3) & 15), f64::from(b & 7));
                    let v = match (e, b & 7) {
                        (15, 7) => f64::NAN,
                        (0, _) => m / 8.0 * 2f64.powi(-6),
                        _ => (1.0 + m / 8.0) * 2f64.powi(e - 7),
                    };
                    if s == 1 { -v } else { v }
                }
            }
        }

        /// `rows` x 128 bytes of random normal values of magnitude 2^-5 to
        /// 2 (no zeros, no NaN), from `seed`.
        pub fn random(self, rows: usize, seed: u32) -> Vec<u8> {
            let mut out = vec![0u8; rows * 128];
            let word = |i: u64| super::pattern(seed, i);
            match self {
                TcFormat::Bf16 | TcFormat::F16 => {
                    for (i, pair) in (0u64..).zip(out.chunks_exact_mut(2)) {
                        let r = word(i);
                        let sign = (r >> 31) as u16;
                        let exp = (r >> 24) as u16 % 6;
                        let h = match self {
                            TcFormat::Bf16 => (sign << 15) | ((122 + exp) << 7) | (r as u16 & 0x7f),
                            _ => (sign << 15) | ((10 + exp) << 10) | (r as u16 & 0x3ff),
                        };
                        pair.copy_from_slice(&h.to_le_bytes());
                    }
                }
                TcFormat::E4m3 => {
                    for (i, b) in (0u64..).zip(out.iter_mut()) {
                        let r = word(i);
                        *b = (((r >> 31) as u8) << 7) | ((2 + (r >> 24) as u8 % 6) << 3) | (r as u8 & 7);
                    }
                }
            }
            out
        }
    }

    /// A tensor probe's result: `iters * A . B^T` (64 x 256, row-major),
    /// `a` 64 rows and `b` 256 rows of 128 bytes, summed in f64.
    pub fn tensor(format: TcFormat, a: &[u8], b: &[u8], iters: u32) -> Vec<f32> {
        let k = format.k();
        let av: Vec<f64> = (0..64 * k).map(|i| format.decode(a, i)).collect();
        let bv: Vec<f64> = (0..256 * k).map(|i| format.decode(b, i)).collect();
        let mut out = vec![0f32; 64 * 256];
        for m in 0..64 {
            for n in 0..256 {
                let dot: f64 = (0..k).map(|j| av[m * k + j] * bv[n * k + j]).sum();
                out[m * 256 + n] = (dot * f64::from(iters)) as f32;
            }
        }
        out
    }

    /// Rows of an `mma.sync` probe's operands (`MMA_ROWS` in `mma.cu`): A
    /// and B are each 32 rows of 32 bytes.
    pub const MMA_ROWS: usize = 32;

    impl TcFormat {
        /// Values per 32-byte row of an `mma.sync` probe's operands: its K.
        pub const fn mma_k(self) -> usize {
            self.k() / 4
        }
    }

    /// An `mma.sync` probe's result: `iters * A . B^T` (32 x 32,
    /// row-major), `a` and `b` each 32 rows of 32 bytes, summed in f64.
    pub fn mma(format: TcFormat, a: &[u8], b: &[u8], iters: u32) -> Vec<f32> {
        let k = format.mma_k();
        let av: Vec<f64> = (0..MMA_ROWS * k).map(|i| format.decode(a, i)).collect();
        let bv: Vec<f64> = (0..MMA_ROWS * k).map(|i| format.decode(b, i)).collect();
        let mut out = vec![0f32; MMA_ROWS * MMA_ROWS];
        for m in 0..MMA_ROWS {
            for n in 0..MMA_ROWS {
                let dot: f64 = (0..k).map(|j| av[m * k + j] * bv[n * k + j]).sum();
                out[m * MMA_ROWS + n] = (dot * f64::from(iters)) as f32;
            }
        }
        out
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn mma_reference_is_a_product() {
            // A row of ones (bf16 0x3f80) against B rows of twos: 2K each.
            let ones = [0x80u8, 0x3f].repeat(16 * MMA_ROWS);
            let twos = [0x00u8, 0x40].repeat(16 * MMA_ROWS);
            let d = mma(TcFormat::Bf16, &ones, &twos, 3);
            assert_eq!(d.len(), 1024);
            assert!(d.iter().all(|&v| v == 3.0 * 2.0 * 16.0), "{:?}", &d[..4]);
            // FP8: K = 32 a row; e4m3 0x38 is 1.0.
            let e = [0x38u8; 32 * MMA_ROWS];
            assert!(mma(TcFormat::E4m3, &e, &e, 1).iter().all(|&v| v == 32.0));
            // Random operands: not all equal, and row m of the result uses
            // row m of A (swapping two A rows swaps two result rows).
            let (a, b) = (TcFormat::F16.random(8, 5), TcFormat::F16.random(8, 6));
            let d = mma(TcFormat::F16, &a, &b, 1);
            let mut a2 = a.clone();
            a2[..32].copy_from_slice(&a[32..64]);
            a2[32..64].copy_from_slice(&a[..32]);
            let d2 = mma(TcFormat::F16, &a2, &b, 1);
            assert_eq!(&d2[..32], &d[32..64]);
            assert_ne!(d[0], d[1]);
            // f16 bits round trip, and one FP16x2 step by hand.
            for bits in [0x3c00u16, 0xc000, 0x0001, 0x03ff, 0x0400, 0x7bff, 0x8000, 0x3555] {
                assert_eq!(f16_bits(TcFormat::F16.decode(&bits.to_le_bytes(), 0)), bits, "{bits:#x}");
            }
            let mut w = [0u32];
            // 1.0 -> -0.9375 + 0.5 = -0.4375 (0xb700); 2.0 (0x4000) -> -1.375 (0xbd80).
            intensity_f16x2(&[0x4000_3c00], &mut w, 1);
            assert_eq!(w[0], 0xbd80_b700);
            let mut o = [0f64; 1];
            intensity_f64(&[1.0], &mut o, 2);
            assert_eq!(o[0], 1f64.mul_add(-0.9375, 0.5).mul_add(-0.9375, 0.5));
        }

        #[test]
        fn half_rounding() {
            assert_eq!(Half::F16.round(1.0), 1.0);
            // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even is 1.
            assert_eq!(Half::F16.round(1.0 + 2f64.powi(-11)), 1.0);
            assert_eq!(Half::F16.round(1.0 + 3.0 * 2f64.powi(-11)), 1.0 + 2.0 * 2f64.powi(-10));
            assert_eq!(Half::Bf16.round(1.0 + 2f64.powi(-9)), 1.0);
            assert_eq!(Half::F16.round(1e6), f64::INFINITY);
            assert_eq!(Half::F16.round(-0.9375), -0.9375);
            // Subnormal f16: quantum 2^-24.
            assert_eq!(Half::F16.round(3.0 * 2f64.powi(-26)), 2f64.powi(-24));
        }

        #[test]
        fn tensor_formats_decode() {
            assert_eq!(TcFormat::Bf16.decode(&[0x80, 0x3f], 0), 1.0);
            assert_eq!(TcFormat::F16.decode(&[0x00, 0x3c], 0), 1.0);
            assert_eq!(TcFormat::F16.decode(&[0x00, 0xc0], 0), -2.0);
            assert_eq!(TcFormat::E4m3.decode(&[0x38], 0), 1.0);
            assert_eq!(TcFormat::E4m3.decode(&[0xc4], 0), -3.0);
            assert!(TcFormat::E4m3.decode(&[0x7f], 0).is_nan());
            for f in [TcFormat::Bf16, TcFormat::F16, TcFormat::E4m3] {
                let t = f.random(2, 9);
                assert_eq!(t.len(), 256);
                for i in 0..2 * f.k() {
                    let v = f.decode(&t, i).abs();
                    assert!((1.0 / 64.0..=2.0).contains(&v), "{f:?} {i}: {v}");
                }
            }
            // One row of ones against one row of ones: K.
            let ones = [0x80u8, 0x3f].repeat(64);
            let a = ones.repeat(64);
            let b = ones.repeat(256);
            let d = tensor(TcFormat::Bf16, &a, &b, 3);
            assert!(d.iter().all(|&v| v == 192.0));
        }

        #[test]
        fn fma_chains_depend_on_seed_and_iterations() {
            let mut a = [0f32; 4];
            let mut b = [0f32; 4];
            fma_f32(0.25, 1, &mut a);
            fma_f32(0.5, 1, &mut b);
            assert_ne!(a, b);
            let mut c = [0f32; 4];
            fma_f32(0.25, 2, &mut c);
            assert_ne!(a, c);
            let mut h = [0f32; 2];
            fma_half2(Half::F16, 0.25, 1, &mut h);
            assert!(h.iter().all(|v| v.is_finite() && *v != 0.0));
        }

        #[test]
        fn cache_and_smem_sums() {
            let words: Vec<u32> = (1..=8).collect(); // two uint4: sums 10 and 26
            assert_eq!(cache_read(&words, 0), 0);
            assert_eq!(cache_read(&words, 1), 10);
            assert_eq!(cache_read(&words, 5), 3 * 36 - 26);
            let one = smem_read(1, 7);
            let direct = (0..8u64)
                .flat_map(|e| (0..4).map(move |w| (e, w)))
                .fold(0u32, |a, (e, w)| a.wrapping_add(crate::reference::pattern(7, 4 * e + w)));
            assert_eq!(one, direct);
            let mut out = [0f32; 1];
            intensity_f32(&[1.0], &mut out, 2);
            assert_eq!(out[0], 1f32.mul_add(-0.9375, 0.5).mul_add(-0.9375, 0.5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn lowbias32_known_values() {
        assert_eq!(lowbias32(0), 0);
        // By hand: h=1 → 1 → ×0x7feb352d → 0x7feb352d ^ (>>15: 0xffd6) = 0x7febcafb
        // → ×0x846ca68b (mod 2^32) → … ^ (>>16).
        let h = 1u32;
        let h = h ^ (h >> 16);
        let h = h.wrapping_mul(0x7feb_352d);
        assert_eq!(h, 0x7feb_352d);
        let h = h ^ (h >> 15);
        assert_eq!(h, 0x7feb_cafb);
        let h = h.wrapping_mul(0x846c_a68b);
        let h = h ^ (h >> 16);
        assert_eq!(lowbias32(1), h);
    }

    #[test]
    fn pattern_pinned_values() {
        // Pinned so a change to `pattern` (which must stay identical to
        // `gs_pattern` in common.cuh) is noticed.
        let pre = 0x6a09_e667u32.wrapping_mul(0x9e37_79b9);
        assert_eq!(pattern(0, 0), lowbias32(pre));
        assert_eq!(pattern(0, 5), lowbias32(pre ^ 5));
        assert_eq!(pattern(0, 1 << 32), lowbias32(pre ^ 0x85eb_ca6b));
        assert_eq!(pattern(7, 3), lowbias32((7u32 + 0x6a09_e667).wrapping_mul(0x9e37_79b9) ^ 3));
        assert_ne!(pattern(0, 0), 0, "a zeroed buffer must not match seed 0 at index 0");
    }

    #[test]
    fn pattern_differs_across_indices_and_seeds() {
        let mut seen = HashSet::new();
        for i in 0..10_000u64 {
            assert!(seen.insert(pattern(1, i)), "repeat at {i}");
        }
        // High bits of the index matter.
        for bit in 0..64u32 {
            assert_ne!(pattern(1, 12345 ^ (1 << bit)), pattern(1, 12345), "bit {bit}");
            assert_ne!(pattern(1, u64::MAX ^ (1 << bit)), pattern(1, u64::MAX), "bit {bit}");
        }
        assert_ne!(pattern(1, 0xdead_beef), pattern(1, 0x1_dead_beef));
        for seed in 0..1000u32 {
            assert_ne!(pattern(seed, 42), pattern(seed + 1, 42));
        }
        let seeds: HashSet<_> = (0..1000u32).map(|s| pattern(s, 99)).collect();
        assert_eq!(seeds.len(), 1000);
    }

    #[test]
    fn fill_then_check() {
        let mut buf = vec![0u32; 1000];
        fill_pattern_u32(&mut buf, 9);
        assert_eq!(buf[17], pattern(9, 17));
        assert_eq!(check_pattern_u32(&buf, 9), 0);
        assert_eq!(check_pattern_u32(&buf, 10), 1000);
        // Plant mismatches.
        buf[0] ^= 1;
        buf[500] = buf[500].wrapping_add(7);
        buf[999] = !buf[999];
        assert_eq!(check_pattern_u32(&buf, 9), 3);
        assert_eq!(check_pattern_u32(&[], 9), 0);
    }

    #[test]
    fn read_sum_hand_values_and_wrap() {
        assert_eq!(read_sum_u32(&[]), 0);
        assert_eq!(read_sum_u32(&[1, 2, 3, 4]), 10);
        assert_eq!(read_sum_u32(&[u32::MAX, u32::MAX]), 2 * u64::from(u32::MAX));
        // 2^33 + 2 words of u32::MAX would wrap; check the arithmetic on a fold instead.
        let words = vec![u32::MAX; 1 << 20];
        assert_eq!(read_sum_u32(&words), (1u64 << 20) * u64::from(u32::MAX));
        // Wrapping: the sum is modulo 2^64.
        let big = u64::MAX - 5;
        assert_eq!(big.wrapping_add(read_sum_u32(&[10])), 4);
    }

    #[test]
    fn triad_matches_mul_add_and_is_fused() {
        let b = [1.0f32, -2.5, 3.25, 0.0, 1e-8];
        let c = [0.5f32, 4.0, -1.0, 7.0, 1.0];
        let mut a = [0.0f32; 5];
        triad_f32(&mut a, &b, &c, 3.0);
        assert_eq!(a, [2.5, 9.5, 0.25, 21.0, 3.0f32.mul_add(1.0, 1e-8)]);
        // One rounding: x*x - x*x rounded twice is 0, fused it is the error term.
        let x = 1.0f32 + f32::EPSILON;
        let mut out = [0.0f32];
        let neg = -(x * x);
        triad_f32(&mut out, &[neg], &[x], x);
        assert_ne!(out[0], 0.0);
        assert_eq!(out[0], x.mul_add(x, neg));
    }

    #[test]
    fn elementwise() {
        let mut out = [0.0f32; 3];
        scale_f32(&[1.0, -2.0, 0.5], &mut out, 4.0);
        assert_eq!(out, [4.0, -8.0, 2.0]);
        add_f32(&[1.0, 2.0, 3.0], &[0.5, 0.25, -3.0], &mut out);
        assert_eq!(out, [1.5, 2.25, 0.0]);
        let mut x = [0u32, 5, u32::MAX];
        bump_u32(&mut x, 2);
        assert_eq!(x, [2, 7, 1]);
        let mut dst = [0u32; 2];
        copy_u32(&[8, 9, 10], &mut dst);
        assert_eq!(dst, [8, 9]);
        assert_eq!(spin_cycles(1234), 1234);
    }

    #[test]
    fn mix_is_deterministic_and_sensitive() {
        assert_eq!(mix(0, 0, 0), 0);
        assert_eq!(mix(1, 0, 0), lowbias32(1));
        assert_eq!(mix(0, 1, 0), lowbias32(0x85eb_ca6b));
        assert_eq!(mix(0, 0, 1), lowbias32(0xc2b2_ae35));
        let base = mix(10, 20, 30);
        assert_ne!(base, mix(11, 20, 30));
        assert_ne!(base, mix(10, 21, 30));
        assert_ne!(base, mix(10, 20, 31));
        let mut out = [0u32; 2];
        mix_u32(&[10, 11], &[20, 20], &mut out, 30);
        assert_eq!(out, [base, mix(11, 20, 30)]);
    }
}

#[cfg(test)]
mod worst_tests {
    /// The largest error and scale; a NaN on either side is NaN (never a pass).
    #[test]
    fn worst_abs_error_is_the_largest_and_nan_never_passes() {
        let (w, s) = super::worst_abs_error(&[1.0, 2.5, -3.0], &[1.0, 2.0, -4.0]);
        assert_eq!((w, s), (1.0, 4.0));
        assert!(super::worst_abs_error(&[f32::NAN, 1.0], &[0.0, 1.0]).0.is_nan());
        assert!(super::worst_abs_error(&[0.0, 1.0], &[0.0, f32::NAN]).0.is_nan());
    }
}
