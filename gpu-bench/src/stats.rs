//! Summary statistics of timing samples.

use serde::Serialize;

/// Summary of a set of samples (seconds, or any unit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
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
        Some(Summary {
            n,
            median: quantile_sorted(&v, 0.5),
            q1: quantile_sorted(&v, 0.25),
            q3: quantile_sorted(&v, 0.75),
            min: v[0],
            max: v[n - 1],
            mean,
            stdev: var.sqrt(),
        })
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
    fn four_significant_figures() {
        assert_eq!(sig4(2.71234), "2.712");
        assert_eq!(sig4(1234.5), "1234");
        assert_eq!(sig4(0.00123456), "0.001235");
        assert_eq!(sig4(98765.0), "98765");
    }
}
