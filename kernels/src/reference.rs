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
