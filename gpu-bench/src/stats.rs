//! Summary statistics of timing samples, the robust noise of the median the
//! stopping rule uses, outlier counts, and the bootstrap interval of a ratio
//! of medians.
//!
//! [`Summary`]'s page has the example.

use serde::{Deserialize, Serialize};

/// Summary of a set of samples (seconds, or any unit).
///
/// ```
/// use gpu_bench::stats::Summary;
/// let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 100.0]).unwrap();
/// assert_eq!(s.median, 3.0);
/// assert_eq!(s.outliers(), 1); // 100 lies beyond Q3 + 1.5 IQR
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// First quartile (25th percentile, linear interpolation).
    pub q1: f64,
    /// Third quartile (75th percentile).
    pub q3: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1).
    pub stdev: f64,
    /// Samples beyond the Tukey fences (below Q1 − 1.5 IQR or above
    /// Q3 + 1.5 IQR). They stay in the samples and in every statistic; the
    /// median and IQR are barely moved by them.
    #[serde(default)]
    pub outliers: usize,
}

impl Summary {
    /// Summarizes `samples`; `None` when empty or when any sample is not finite.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var =
            if n > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        let (q1, q3) = (quantile_sorted(&v, 0.25), quantile_sorted(&v, 0.75));
        let (lo, hi) = (q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1));
        Some(Summary {
            n,
            median: quantile_sorted(&v, 0.5),
            q1,
            q3,
            min: v[0],
            max: v[n - 1],
            mean,
            stdev: var.sqrt(),
            outliers: v.iter().filter(|&&x| x < lo || x > hi).count(),
        })
    }

    /// Samples beyond the Tukey fences (see [`Summary::outliers`](Self#structfield.outliers)).
    pub fn outliers(&self) -> usize {
        self.outliers
    }

    /// A summary of nothing (every statistic NaN), for a mode that took no
    /// sample.
    pub fn empty() -> Summary {
        let nan = f64::NAN;
        Summary {
            n: 0,
            median: nan,
            q1: nan,
            q3: nan,
            min: nan,
            max: nan,
            mean: nan,
            stdev: nan,
            outliers: 0,
        }
    }

    /// Robust relative standard error of the median: the standard error of
    /// the median of `n` normal samples, `1.2533 σ / √n`, with σ estimated
    /// from the IQR (`σ ≈ IQR / 1.349`), over the median.
    ///
    /// Why this and not nvbench's stdev/mean: the IQR ignores up to a
    /// quarter of the samples on each side, so a few outliers (a preempted
    /// sample, a clock dip) do not move it, where one sample 10× the others
    /// inflates the standard deviation for the rest of the run; and it
    /// estimates how well the *median* is known, which shrinks as samples
    /// accumulate, so sampling converges instead of chasing a fixed spread.
    /// The stopping rule pairs it with a drift check
    /// ([`crate::stop`]), since a standard error assumes the samples come
    /// from one distribution.
    pub fn median_noise(&self) -> f64 {
        if self.n < 2 || self.median.is_nan() || self.median <= 0.0 {
            return f64::INFINITY;
        }
        1.2533 * (self.iqr() / 1.349) / (self.n as f64).sqrt() / self.median
    }

    /// Interquartile range.
    pub fn iqr(&self) -> f64 {
        self.q3 - self.q1
    }

    /// Relative noise: standard deviation over mean (nvbench's "noise").
    pub fn rel_noise(&self) -> f64 {
        if self.mean > 0.0 { self.stdev / self.mean } else { 0.0 }
    }
}

/// Quantile `q` in [0, 1] of sorted, non-empty `v` (linear interpolation
/// between closest ranks, as R's type 7 and NumPy's default).
pub fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let n = v.len();
    if n == 1 {
        return v[0];
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

/// Median of `v` (NaN when empty).
pub fn median(v: &[f64]) -> f64 {
    Summary::of(v).map_or(f64::NAN, |s| s.median)
}

/// A small deterministic xorshift generator for bootstrap resampling (the
/// same data give the same interval).
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> XorShift {
        XorShift(seed | 1)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Ratio of medians `median(a) / median(b)` with a bootstrap 95 % interval
/// (`resamples` resamples of each, percentile method). `(NaN, NaN)` when
/// either is empty.
pub fn ratio_ci(a: &[f64], b: &[f64], resamples: usize) -> (f64, (f64, f64)) {
    let r = median(a) / median(b);
    if a.is_empty() || b.is_empty() {
        return (r, (f64::NAN, f64::NAN));
    }
    let mut rng = XorShift::new(0x9e37_79b9_7f4a_7c15 ^ (a.len() as u64) << 20 ^ b.len() as u64);
    let mut ra = vec![0.0; a.len()];
    let mut rb = vec![0.0; b.len()];
    let mut rs: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            ra.iter_mut().for_each(|x| *x = a[rng.below(a.len())]);
            rb.iter_mut().for_each(|x| *x = b[rng.below(b.len())]);
            median(&ra) / median(&rb)
        })
        .filter(|x| x.is_finite())
        .collect();
    rs.sort_by(f64::total_cmp);
    if rs.is_empty() {
        return (r, (f64::NAN, f64::NAN));
    }
    (r, (quantile_sorted(&rs, 0.025), quantile_sorted(&rs, 0.975)))
}

/// How much `b`'s values exceed `a`'s: the Hodges–Lehmann shift, the
/// median of all `a.len() × b.len()` differences `b[j] − a[i]` (NaN when
/// either is empty; the values must be finite). Unlike the difference of
/// the two medians it moves little when both samples sit on the same two
/// levels in slightly different shares (a median jumps to the other level
/// as its share passes one half). Found without forming the differences:
/// each order statistic by bisection over the 64-bit order of the
/// floating-point values (at most 64 steps), counting in O(n + m) with the
/// sorted samples.
pub fn shift(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return f64::NAN;
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let total = a.len() * b.len();
    let half = total / 2;
    if total % 2 == 1 {
        nth_difference(&a, &b, half + 1)
    } else {
        // As `quantile_sorted` interpolates.
        let (x, y) = (nth_difference(&a, &b, half), nth_difference(&a, &b, half + 1));
        x + 0.5 * (y - x)
    }
}

/// The `k`-th smallest (from 1) of the differences `b[j] − a[i]` of sorted,
/// finite `a` and `b`, as computed in floating point.
fn nth_difference(a: &[f64], b: &[f64], k: usize) -> f64 {
    // How many differences are at most d, each computed as it is returned.
    // For each j the i whose difference exceeds d form a prefix, which only
    // grows with j (rounding keeps b[j] − a[i] monotone in both).
    let at_most = |d: f64| {
        let (mut i, mut count) = (0, 0usize);
        for &bj in b {
            while i < a.len() && bj - a[i] > d {
                i += 1;
            }
            count += a.len() - i;
        }
        count
    };
    // Keys in the floating-point values' total order, and back.
    let key = |x: f64| {
        let bits = x.to_bits();
        if bits >> 63 == 1 { !bits } else { bits | 1 << 63 }
    };
    let value = |k: u64| f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k });
    // The smallest value with at least k differences at or below it is a
    // difference itself, the k-th: between the smallest and the largest.
    let (mut lo, mut hi) = (key(b[0] - a[a.len() - 1]), key(b[b.len() - 1] - a[0]));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if at_most(value(mid)) >= k {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    value(lo)
}

/// Formats `x` with 4 significant figures.
pub fn sig4(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = 4 - 1 - x.abs().log10().floor() as i32;
    if digits <= 0 { format!("{:.0}", x) } else { format!("{:.*}", digits as usize, x) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shift is the median of every pairwise difference: against the
    /// differences formed and sorted, on random samples of odd and even
    /// sizes with ties; a constant offset reads exactly; two samples on the
    /// same two levels in shares either side of one half read a shift far
    /// below the gap their medians show.
    #[test]
    fn shift_is_the_median_of_all_differences() {
        let mut rng = XorShift::new(7);
        for (n, m) in [(1, 1), (1, 4), (3, 5), (8, 8), (17, 30), (40, 41)] {
            let a: Vec<f64> = (0..n).map(|_| (rng.below(20) * 32) as f64).collect();
            let b: Vec<f64> = (0..m).map(|_| (rng.below(20) * 32) as f64 + 0.25).collect();
            let mut d: Vec<f64> = b.iter().flat_map(|y| a.iter().map(move |x| y - x)).collect();
            d.sort_by(f64::total_cmp);
            assert_eq!(shift(&a, &b), quantile_sorted(&d, 0.5), "{n} × {m}");
            let plus: Vec<f64> = a.iter().map(|x| x + 96.0).collect();
            assert_eq!(shift(&a, &plus), 96.0);
        }
        // Values that are not whole (the differences round), one pair, and
        // a wide range with the answer near zero.
        for (n, m) in [(1, 1), (2, 3), (9, 14), (31, 30)] {
            for _ in 0..50 {
                let a: Vec<f64> = (0..n).map(|_| rng.below(1 << 20) as f64 * 0.003_141_59).collect();
                let b: Vec<f64> = (0..m).map(|_| rng.below(1 << 20) as f64 * 0.002_718_28).collect();
                let mut d: Vec<f64> = b.iter().flat_map(|y| a.iter().map(move |x| y - x)).collect();
                d.sort_by(f64::total_cmp);
                assert_eq!(shift(&a, &b), quantile_sorted(&d, 0.5), "{a:?} {b:?}");
            }
        }
        let (x, y) = (3129.9933051295807, 1013.921943610723);
        assert_eq!(shift(&[x], &[y]), y - x);
        assert_eq!(shift(&[0.0], &[1e-300, 2e-300, 3e-300, 1.0]), 2e-300 + 0.5 * (3e-300 - 2e-300));
        assert!(shift(&[], &[1.0]).is_nan() && shift(&[1.0], &[]).is_nan());
        // 48 % and 52 % of samples on the upper of two levels 192 apart.
        let levels = |upper: usize| -> Vec<f64> {
            (0..100).map(|i| if i < upper { 3424.0 } else { 3232.0 }).collect()
        };
        let (a, b) = (levels(48), levels(52));
        assert_eq!(median(&b) - median(&a), 192.0);
        assert_eq!(shift(&a, &b), 0.0);
    }

    #[test]
    fn median_and_quartiles_interpolate() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).expect("non-empty");
        assert_eq!(s.median, 2.5);
        assert_eq!(s.q1, 1.75);
        assert_eq!(s.q3, 3.25);
        assert_eq!((s.min, s.max), (1.0, 4.0));
        assert_eq!(s.mean, 2.5);
        assert!((s.stdev - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((s.iqr() - 1.5).abs() < 1e-12);
    }

    #[test]
    fn odd_count_median_is_the_middle_sample() {
        let s = Summary::of(&[9.0, 1.0, 5.0]).expect("non-empty");
        assert_eq!(s.median, 5.0);
    }

    #[test]
    fn empty_or_nan_has_no_summary() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn noise_is_relative_stdev() {
        let s = Summary::of(&[10.0, 10.0, 10.0]).expect("non-empty");
        assert_eq!(s.rel_noise(), 0.0);
        let s = Summary::of(&[9.0, 11.0]).expect("non-empty");
        assert!((s.rel_noise() - 2f64.sqrt() / 10.0).abs() < 1e-12);
    }

    #[test]
    fn outliers_are_counted_and_do_not_move_the_median_noise() {
        let clean: Vec<f64> = (0..200).map(|i| 1.0 + 0.001 * f64::from(i % 10)).collect();
        let mut dirty = clean.clone();
        for i in (0..200).step_by(20) {
            dirty[i] = 10.0;
        }
        let (c, d) = (Summary::of(&clean).unwrap(), Summary::of(&dirty).unwrap());
        assert_eq!(c.outliers, 0);
        assert_eq!(d.outliers, 10);
        // stdev/mean explodes, the median's noise barely moves.
        assert!(d.rel_noise() > 50.0 * c.rel_noise());
        assert!(d.median_noise() < 1.5 * c.median_noise(), "{} vs {}", d.median_noise(), c.median_noise());
    }

    #[test]
    fn median_noise_shrinks_with_samples() {
        let a: Vec<f64> = (0..40).map(|i| 1.0 + 0.01 * f64::from(i % 8)).collect();
        let b: Vec<f64> = (0..640).map(|i| 1.0 + 0.01 * f64::from(i % 8)).collect();
        let (na, nb) = (Summary::of(&a).unwrap().median_noise(), Summary::of(&b).unwrap().median_noise());
        assert!((na / nb - 4.0).abs() < 0.2, "{na} {nb}");
        assert_eq!(Summary::of(&[1.0]).unwrap().median_noise(), f64::INFINITY);
    }

    #[test]
    fn ratio_interval_brackets_the_ratio() {
        let a: Vec<f64> = (0..100).map(|i| 2.0 + 0.01 * f64::from(i % 7)).collect();
        let b: Vec<f64> = (0..100).map(|i| 1.0 + 0.005 * f64::from(i % 5)).collect();
        let (r, (lo, hi)) = ratio_ci(&a, &b, 500);
        assert!(lo <= r && r <= hi, "{lo} {r} {hi}");
        assert!(lo > 1.9 && hi < 2.1);
        assert!(ratio_ci(&[], &b, 10).1.0.is_nan());
    }

    #[test]
    fn four_significant_figures() {
        assert_eq!(sig4(2.71234), "2.712");
        assert_eq!(sig4(1234.5), "1234");
        assert_eq!(sig4(0.00123456), "0.001235");
        assert_eq!(sig4(98765.0), "98765");
    }
}
