//! The intervals the regression gate decides on: a distribution-free
//! interval of a median from two order statistics (exact binomial coverage,
//! no resampling, no assumption about the shape of the times), and the
//! standard normal quantile for figures that come as a value and a standard
//! error (the roofline's ceilings).
//!
//! ```
//! use gpu_bench::compare::interval::{median_interval, normal_quantile};
//! let v: Vec<f64> = (1..=20).map(f64::from).collect();
//! // [x(6), x(15)] covers the median with 95.9 % probability (≥ 95 %).
//! assert_eq!(median_interval(&v, 0.05), Some((6.0, 15.0)));
//! // One sample has no interval at any level.
//! assert_eq!(median_interval(&[1.0], 0.05), None);
//! assert!((normal_quantile(0.975) - 1.959964).abs() < 1e-6);
//! ```

/// `ln(e^a + e^b)` without overflow.
fn ln_add_exp(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (lo - hi).exp().ln_1p()
}

/// The largest `k ≥ 1` such that the `k`-th smallest and `k`-th largest of
/// `n` independent samples enclose their distribution's median with
/// probability at least `1 − alpha`: the coverage is
/// `1 − 2 P(Bin(n, ½) ≤ k − 1)`. `None` when even the smallest and largest
/// sample do not (`2 · 2⁻ⁿ > alpha`): too few samples for that level.
pub fn order_rank(n: usize, alpha: f64) -> Option<usize> {
    if n == 0 || !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    // ln P(Bin = j), from ln P(Bin = 0) = −n ln 2, summed into ln P(Bin ≤ j).
    let ln_half_alpha = (alpha / 2.0).ln();
    let nf = n as f64;
    let mut ln_pmf = -nf * std::f64::consts::LN_2;
    let mut ln_cdf = f64::NEG_INFINITY;
    let mut k = 0;
    for j in 0..n.div_ceil(2) {
        ln_cdf = ln_add_exp(ln_cdf, ln_pmf);
        if ln_cdf > ln_half_alpha {
            break;
        }
        // P(Bin ≤ j) ≤ alpha/2: rank j + 1 keeps the coverage.
        k = j + 1;
        ln_pmf += ((nf - j as f64) / (j as f64 + 1.0)).ln();
    }
    (k >= 1).then_some(k)
}

/// A distribution-free interval of the median of `samples` at level
/// `1 − alpha`: `[x(k), x(n+1−k)]` of the sorted samples, `k` from
/// [`order_rank`]. `None` when there are too few samples for that level.
pub fn median_interval(samples: &[f64], alpha: f64) -> Option<(f64, f64)> {
    let k = order_rank(samples.len(), alpha)?;
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    Some((v[k - 1], v[v.len() - k]))
}

/// The standard normal quantile `Φ⁻¹(p)` for `p` in (0, 1) (Acklam's
/// rational approximation, relative error below 1.2·10⁻⁹); NaN outside.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] =
        [7.784_695_709_041_462e-3, 3.224_671_290_700_398e-1, 2.445_134_137_142_996, 3.754_408_661_907_416];
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    let tail = |q: f64| {
        let q = (-2.0 * q.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail(p)
    } else if p > 1.0 - 0.02425 {
        -tail(1.0 - p)
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `P(Bin(n, ½) ≤ j)` by exact summation (small n).
    fn cdf(n: u64, j: u64) -> f64 {
        let mut c = 1.0f64;
        let mut s = 0.0;
        for i in 0..=j {
            if i > 0 {
                c = c * (n - i + 1) as f64 / i as f64;
            }
            s += c;
        }
        s / 2f64.powi(n as i32)
    }

    #[test]
    fn the_rank_is_the_largest_that_keeps_the_coverage() {
        for n in 1..60u64 {
            for alpha in [0.05, 0.01, 0.05 / 60.0] {
                match order_rank(n as usize, alpha) {
                    None => assert!(2.0 * 0.5f64.powi(n as i32) > alpha, "n {n} alpha {alpha}"),
                    Some(k) => {
                        let k = k as u64;
                        assert!(2.0 * cdf(n, k - 1) <= alpha * (1.0 + 1e-9), "n {n} k {k}");
                        assert!(k >= n.div_ceil(2) || 2.0 * cdf(n, k) > alpha, "n {n} k {k} not the largest");
                    }
                }
            }
        }
        // Bonferroni over 30 rows needs 12 samples a side for any interval.
        assert_eq!(order_rank(11, 0.05 / 60.0), None);
        assert_eq!(order_rank(12, 0.05 / 60.0), Some(1));
        // Large n stays finite (no underflow of 2^-n).
        let k = order_rank(1_000_000, 0.05).unwrap();
        assert!((499_000..500_000).contains(&k), "{k}");
    }

    #[test]
    fn normal_quantiles_are_right() {
        assert!(normal_quantile(0.5).abs() < 1e-12);
        assert!((normal_quantile(0.975) - 1.959_963_985).abs() < 1e-7);
        assert!((normal_quantile(1.0 - 0.05 / 60.0) - 3.143_980_287).abs() < 1e-6);
        assert!((normal_quantile(0.001) + 3.090_232_306).abs() < 1e-6);
        assert!(normal_quantile(0.0).is_nan() && normal_quantile(1.0).is_nan());
    }
}
