//! The warm-up curve: the first runs of a benchmark, each timed, until
//! steady — the first call, a module's first use, the caches filling — so a
//! report says how many runs warm-up takes.
//!
//! Every sampled mode warms up before it samples ([`crate::Bench`]: runs
//! until the last few agree, or a cap). The curve of a record is the
//! warm-up of the first sampled mode measured on it, each run timed on that
//! mode's own clock (events for cold, hot and graph, a batch's per-run mean,
//! CUPTI for kernel mode), held against the same mode's steady-state
//! samples: steady from the first run after which every run lies within
//! the samples' interquartile range or ±5 % of their median, whichever is
//! wider.

use crate::record::{Mode, Unit, format_value};
use crate::stats::Summary;
use serde::{Deserialize, Serialize};

/// How far from the steady-state median a run may lie and still be
/// steady, where the interquartile range is narrower: ±5 %.
pub const STEADY_TOLERANCE: f64 = 0.05;

/// The first runs of a benchmark, each timed, and when they became steady.
///
/// A [`Record`](crate::Record)'s `warmup` is one ([`Bench`](crate::Bench)
/// makes it); from runs and the steady samples' summary:
/// ```
/// use gpu_bench::{Mode, stats::Summary, warmup::WarmupCurve};
/// let steady = Summary::of(&[13.0e-6, 13.1e-6, 12.9e-6, 13.0e-6]).unwrap();
/// let runs = vec![412e-6, 20e-6, 13.0e-6, 13.1e-6]; // first call, caches filling, steady
/// let curve = WarmupCurve::new(Mode::Hot, runs, &steady).unwrap();
/// assert_eq!(curve.steady_after, 2);
/// assert!(curve.steady());
/// assert!(curve.line().ends_with("steady after run 2"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmupCurve {
    /// The mode whose warm-up these runs are (their clock).
    pub mode: Mode,
    /// Each warm-up run's time, seconds, in the order run.
    pub runs: Vec<f64>,
    /// The steady-state median they are held against (the mode's samples).
    pub steady_median: f64,
    /// The leading runs outside the steady band: every run after the first
    /// `steady_after` lies in it. Equal to `runs.len()` when the last run
    /// is still outside (warm-up ended before the runs were steady).
    pub steady_after: usize,
}

impl WarmupCurve {
    /// The curve of `runs` (warm-up, in order) against `steady`, the
    /// summary of the same mode's samples; `None` without runs.
    pub fn new(mode: Mode, runs: Vec<f64>, steady: &Summary) -> Option<WarmupCurve> {
        if runs.is_empty() {
            return None;
        }
        let m = steady.median;
        let lo = steady.q1.min(m * (1.0 - STEADY_TOLERANCE));
        let hi = steady.q3.max(m * (1.0 + STEADY_TOLERANCE));
        // NaN (no steady samples) is never within the band.
        let within = |t: f64| t >= lo && t <= hi;
        let steady_after = runs.iter().rposition(|&t| !within(t)).map_or(0, |i| i + 1);
        Some(WarmupCurve { mode, runs, steady_median: m, steady_after })
    }

    /// Whether the curve reached the steady band before warm-up ended.
    pub fn steady(&self) -> bool {
        self.steady_after < self.runs.len()
    }

    /// One line for a report: `warm-up (hot): 5 runs, 412.0 µs → 13.10 µs,
    /// steady after run 3` (first run → last run).
    pub fn line(&self) -> String {
        let t = |v: Option<&f64>| format_value(v.copied().unwrap_or(f64::NAN), Unit::Seconds);
        let n = self.runs.len();
        let when = if !self.steady() {
            format!("not within the steady band (median {}) by its end", t(Some(&self.steady_median)))
        } else if self.steady_after == 0 {
            "steady from the first run".to_owned()
        } else {
            format!("steady after run {}", self.steady_after)
        };
        format!(
            "warm-up ({}): {n} run{}, {} → {}, {when}",
            self.mode.name(),
            if n == 1 { "" } else { "s" },
            t(self.runs.first()),
            t(self.runs.last())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steady(samples: &[f64]) -> Summary {
        Summary::of(samples).expect("samples")
    }

    #[test]
    fn steady_after_the_last_run_outside_the_iqr_or_five_percent() {
        let s = steady(&[13.0e-6, 13.1e-6, 13.2e-6, 13.1e-6, 13.0e-6]);
        let c =
            WarmupCurve::new(Mode::Hot, vec![412e-6, 40e-6, 14.0e-6, 13.4e-6, 13.1e-6], &s).expect("a curve");
        // 14.0 is 6.9 % above 13.1: outside; 13.4 is 2.3 %: inside.
        assert_eq!(c.steady_after, 3);
        assert!(c.steady());
        assert_eq!(c.line(), "warm-up (hot): 5 runs, 412.0 µs → 13.10 µs, steady after run 3");
        // A run back outside the band moves the point past it.
        let c = WarmupCurve::new(Mode::Hot, vec![13.1e-6, 20e-6, 13.1e-6], &s).expect("a curve");
        assert_eq!(c.steady_after, 2);
        let c = WarmupCurve::new(Mode::Hot, vec![13.1e-6, 13.0e-6], &s).expect("a curve");
        assert_eq!((c.steady_after, c.line().ends_with("steady from the first run")), (0, true));
    }

    #[test]
    fn a_wide_iqr_widens_the_band_and_an_unsettled_end_is_said() {
        let wide = steady(&[10e-6, 12e-6, 14e-6, 16e-6, 18e-6]);
        let c = WarmupCurve::new(Mode::Cold, vec![30e-6, 16e-6], &wide).expect("a curve");
        assert_eq!(c.steady_after, 1, "16 µs is inside the IQR though 14 % off the median");
        let c = WarmupCurve::new(Mode::Cold, vec![30e-6, 25e-6], &wide).expect("a curve");
        assert!(!c.steady() && c.line().contains("not within the steady band"), "{}", c.line());
        assert!(WarmupCurve::new(Mode::Cold, Vec::new(), &wide).is_none());
    }

    #[test]
    fn a_curve_survives_json() {
        let c = WarmupCurve::new(Mode::Batch, vec![2e-3, 1e-3], &steady(&[1e-3, 1e-3])).expect("a curve");
        let back: WarmupCurve =
            serde_json::from_str(&serde_json::to_string(&c).expect("json")).expect("back");
        assert_eq!(back, c);
    }
}
