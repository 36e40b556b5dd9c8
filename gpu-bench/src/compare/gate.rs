//! The regression gate between two results files: [`Results`] (a timer
//! report or a roofline), checked ([`GateError`]) and compared row by row
//! ([`compare`]) under one rule controlled for the many rows of a report.
//!
//! # The rule
//! - A *row* is one (benchmark, mode) of a timer report present in both
//!   files, or one ceiling of a roofline.
//! - With `m` rows, each row's interval of new/old is a `1 − α/m`
//!   interval, α = [`FAMILY_ALPHA`] = 5 % (Bonferroni): all `m` intervals
//!   hold together with probability at least 95 %, so two runs of the same
//!   code get any verdict in at most 5 % of reports, however many rows a
//!   report has. (A per-row 95 % interval would flag a 30-row A/A report
//!   1 − 0.95³⁰ = 79 % of the time.)
//! - Times: the interval of each median is distribution-free (two order
//!   statistics at `1 − α/(2m)`, [`median_interval`]); the ratio's is
//!   `[lo_new / hi_old, hi_new / lo_old]`. A mode with too few samples for
//!   that level (a one-sample first call always) is reported as *too few
//!   samples* and never decides.
//! - Ceilings (rates): `exp(ln r ± z·√(noise_old² + noise_new²))`,
//!   `z = Φ⁻¹(1 − α/(2m))`, the noise being the relative standard error
//!   of each median; a ceiling with no noise figure has no interval.
//! - *SLOWER* (a regression) only when the whole interval lies beyond the
//!   threshold: above `1 + threshold` for a time, below `1 − threshold`
//!   for a ceiling (a lower ceiling is the regression); *faster* when it
//!   lies beyond on the other side; else *same*.
//! - Refused ([`GateError`]): a sample or ceiling that is NaN, infinite,
//!   zero or negative (named); nothing in common, or no row with an
//!   interval; two files of different GPUs, drivers, schemas or schema
//!   versions, unless [`GateOptions::allow_different_env`], which lists the
//!   differences in the report instead.

use super::interval::{median_interval, normal_quantile};
use super::{Verdict, verdict};
use crate::record::{Report, Unit, format_value};
use crate::roofline::RooflineReport;
use serde::{Deserialize, Serialize};

/// The family-wise false-verdict rate the rule holds a report to.
pub const FAMILY_ALPHA: f64 = 0.05;

/// Why two results files cannot be compared.
///
/// ```
/// use gpu_bench::compare::gate::{GateError, parse_threshold};
/// assert_eq!(parse_threshold("5%"), Ok(0.05));
/// let err = parse_threshold("5").unwrap_err(); // 5 % or 500 %?
/// assert!(matches!(err, GateError::Threshold(_)));
/// assert!(err.to_string().contains("ambiguous"));
/// ```
/// [`CompareReport`]'s example meets it from [`compare`] too.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateError {
    /// The threshold is not `N%` in (0 %, 100 %) or a fraction in (0, 1).
    #[error("threshold {0}")]
    Threshold(String),
    /// Not a results file this gate reads.
    #[error("{0}")]
    Unreadable(String),
    /// A time or rate that cannot be compared (NaN, infinite, zero,
    /// negative), named.
    #[error("{0}")]
    BadValue(String),
    /// Nothing was compared, or nothing had an interval: no verdict.
    #[error("nothing compared: {0}")]
    NothingCompared(String),
    /// The two files come from different GPUs, drivers or schemas.
    #[error(
        "the results come from different environments ({}); pass --allow-different-env to compare them anyway",
        .0.join("; ")
    )]
    DifferentEnv(Vec<String>),
}

/// Parses a threshold: `5%` (percent in (0, 100)) or a bare fraction in
/// (0, 1) (`0.05`). A bare number of 1 or more (`5`, `50`) is refused as
/// ambiguous (5 % or 500 %?), as are 0, negatives and anything else.
///
/// # Errors
/// [`GateError::Threshold`] naming the bound.
pub fn parse_threshold(s: &str) -> Result<f64, GateError> {
    let t = s.trim();
    let bad = |why: String| Err(GateError::Threshold(format!("{s:?}: {why}")));
    if let Some(p) = t.strip_suffix('%') {
        return match p.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 && x < 100.0 => Ok(x / 100.0),
            Ok(x) if x.is_finite() => bad(format!("{x}% is not in (0%, 100%)")),
            _ => bad("not a percentage like 5%".into()),
        };
    }
    match t.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x < 1.0 => Ok(x),
        Ok(x) if x.is_finite() && x >= 1.0 => {
            bad(format!("ambiguous: a bare number must be a fraction in (0, 1); write {x}% or 0.05"))
        }
        Ok(x) if x.is_finite() => bad(format!("{x} is not in (0, 1)")),
        _ => bad("expected a percentage like 5% or a fraction in (0, 1) like 0.05".into()),
    }
}

/// A results file the gate reads.
///
/// [`CompareReport`]'s example reads one from JSON and builds one.
#[derive(Debug, Clone, PartialEq)]
pub enum Results {
    /// A timer report (`gpu-bench.report`).
    Timer(Box<Report>),
    /// A roofline (`gpu-bench.roofline`), with the version it was written
    /// in (reading upgrades older ones).
    Roofline(Box<RooflineReport>, u32),
}

impl Results {
    /// Reads either schema, by its `schema` field.
    ///
    /// # Errors
    /// [`GateError::Unreadable`]: not JSON, another schema, a version this
    /// build does not read.
    pub fn from_json(text: &str) -> Result<Results, GateError> {
        let head: serde_json::Value =
            serde_json::from_str(text).map_err(|e| GateError::Unreadable(format!("not JSON: {e}")))?;
        match head.get("schema").and_then(|v| v.as_str()) {
            Some(crate::roofline::SCHEMA) => {
                let version = head.get("version").and_then(serde_json::Value::as_u64).unwrap_or(0) as u32;
                let r = RooflineReport::from_json(text).map_err(|e| GateError::Unreadable(e.to_string()))?;
                Ok(Results::Roofline(Box::new(r), version))
            }
            _ => Report::from_json(text).map(|r| Results::Timer(Box::new(r))).map_err(GateError::Unreadable),
        }
    }

    /// What must match for a comparison to mean something: (what, value).
    fn env(&self) -> Vec<(&'static str, String)> {
        let (schema, device, driver) = match self {
            Results::Timer(r) => (format!("{} v{}", r.schema, r.schema_version), &r.device, None),
            Results::Roofline(r, v) => {
                (format!("{} v{v}", crate::roofline::SCHEMA), &r.device, r.driver_version.clone())
            }
        };
        let (a, b) = device.compute_capability;
        let mut env = vec![
            ("schema", schema),
            (
                "GPU",
                format!("{} (sm_{a}{b}){}", device.name, if device.simulated { ", simulated" } else { "" }),
            ),
            ("CUDA driver", device.driver_cuda_version.clone()),
        ];
        if let Some(d) = driver {
            env.push(("kernel driver", d));
        }
        env
    }
}

/// How to compare.
///
/// [`CompareReport`]'s example passes one to [`compare`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateOptions {
    /// The relative change that counts, a fraction in (0, 1).
    pub threshold: f64,
    /// Compare files from different GPUs, drivers or schemas, the
    /// differences listed in the report, instead of refusing.
    pub allow_different_env: bool,
}

/// One row compared.
///
/// [`CompareReport`]'s example reads its rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The record key, or the ceiling's name.
    pub key: String,
    /// The mode (`hot`, `first-call`, …), or `ceiling`.
    pub what: String,
    /// The unit of `old` and `new`.
    pub unit: Unit,
    /// Old median (or ceiling).
    pub old: f64,
    /// New median (or ceiling).
    pub new: f64,
    /// Samples behind each (a ceiling: 0, it comes with its noise).
    pub samples: (usize, usize),
    /// new / old.
    pub ratio: f64,
    /// The corrected interval of new/old; `None`: too few samples.
    pub interval: Option<(f64, f64)>,
    /// The verdict.
    pub verdict: Verdict,
}

/// Two results files compared: what [`compare`] returns.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::compare::gate::{GateError, GateOptions, Results, compare};
/// use gpu_bench::{Bench, Mode, Report, Settings, Verdict, device_info, render};
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let (device, settings) = (Device::get(0)?, Settings { min_samples: 8, max_samples: 8, ..Settings::quick() });
/// let stream = Stream::new(&device)?;
/// let mut buf = DeviceBuffer::<u8>::alloc(&stream, 1 << 20)?;
/// let mut report = Report::new("nightly", device_info(&device)?, settings);
/// let bench = Bench::new("memset 1 MiB").modes(&[Mode::Hot]).settings(settings);
/// report.records.push(bench.run(&stream, |s| s.fill_bytes(&mut buf, 0))?);
/// let old = Results::from_json(&render::json(&report))?; // as `gpu-bench compare` reads it
/// report.records[0].modes[0].samples.iter_mut().for_each(|t| *t *= 1.5); // 50 % slower
/// let new = Results::Timer(Box::new(report));
/// let opts = GateOptions { threshold: 0.05, allow_different_env: false };
/// let cmp = compare(&old, &new, opts)?;
/// assert!(cmp.regressed() && cmp.comparisons[0].verdict == Verdict::Slower);
/// assert!(!compare(&old, &old, opts)?.regressed()); // A against A
/// let bad = GateOptions { threshold: 5.0, ..opts };
/// assert!(matches!(compare(&old, &new, bad), Err(GateError::Threshold(_))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// The schema of both files.
    pub schema: String,
    /// Threshold, a fraction.
    pub threshold: f64,
    /// Each row's interval level: `1 − FAMILY_ALPHA / rows`.
    pub row_level: f64,
    /// The rows.
    pub comparisons: Vec<Comparison>,
    /// Keys only in the old file.
    pub only_old: Vec<String>,
    /// Keys only in the new file.
    pub only_new: Vec<String>,
    /// Differences of GPU, driver or schema, allowed by the caller.
    pub env_differences: Vec<String>,
}

impl CompareReport {
    /// Whether any row regressed.
    pub fn regressed(&self) -> bool {
        self.comparisons.iter().any(|c| c.verdict == Verdict::Slower)
    }

    /// A markdown table (6 columns), the rule above it.
    pub fn to_markdown(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .comparisons
            .iter()
            .map(|c| {
                vec![
                    c.key.clone(),
                    c.what.clone(),
                    format_value(c.old, c.unit),
                    format_value(c.new, c.unit),
                    match c.interval {
                        Some((lo, hi)) => format!("{:.3} [{lo:.3}, {hi:.3}]", c.ratio),
                        None => format!("{:.3} [—]", c.ratio),
                    },
                    c.verdict.name().to_owned(),
                ]
            })
            .collect();
        let mut s = format!(
            "# Compare ({}; threshold {:.1}%)\n\nA verdict needs the whole interval of new/old beyond the \
             threshold; each interval is at {:.4}% (Bonferroni over {} rows: a {:.0}% family), so two runs \
             of the same code get any verdict in at most {:.0}% of reports. Rows with too few samples for an \
             interval never decide.\n\n",
            self.schema,
            self.threshold * 100.0,
            self.row_level * 100.0,
            self.comparisons.len(),
            (1.0 - FAMILY_ALPHA) * 100.0,
            FAMILY_ALPHA * 100.0,
        );
        for d in &self.env_differences {
            s.push_str(&format!("- **different environment**: {d}\n"));
        }
        if !self.env_differences.is_empty() {
            s.push('\n');
        }
        s.push_str(&crate::render::table(
            &["benchmark", "mode", "old", "new", "new/old [interval]", "verdict"],
            &rows,
        ));
        for k in &self.only_old {
            s.push_str(&format!("- only in OLD: {k}\n"));
        }
        for k in &self.only_new {
            s.push_str(&format!("- only in NEW: {k}\n"));
        }
        s
    }

    /// CSV, one row per comparison.
    pub fn to_csv(&self) -> String {
        let mut csv = String::from("benchmark,mode,old,new,unit,ratio,low,high,verdict\n");
        for c in &self.comparisons {
            let (lo, hi) =
                c.interval.map_or((String::new(), String::new()), |(a, b)| (a.to_string(), b.to_string()));
            csv.push_str(&format!(
                "\"{}\",{},{},{},{:?},{},{lo},{hi},{}\n",
                c.key.replace('"', "\"\""),
                c.what,
                c.old,
                c.new,
                c.unit,
                c.ratio,
                c.verdict.name()
            ));
        }
        csv
    }
}

/// A time or rate the gate can divide by.
fn usable(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

/// The verdict for a ratio of rates: a lower ceiling is the regression.
fn rate_verdict(ci: (f64, f64), threshold: f64) -> Verdict {
    match verdict(ci, threshold) {
        Verdict::Slower => Verdict::Faster,
        Verdict::Faster => Verdict::Slower,
        v => v,
    }
}

/// A row before the correction is known: its values and what makes its
/// interval at a given level.
struct Pending<'a> {
    key: String,
    what: String,
    unit: Unit,
    old: f64,
    new: f64,
    source: Source<'a>,
}

/// The rows in common, then the keys only in the old file, only in the new.
type Rows<'a> = (Vec<Pending<'a>>, Vec<String>, Vec<String>);

enum Source<'a> {
    /// Old and new samples of a time.
    Samples(&'a [f64], &'a [f64]),
    /// Old and new relative noise of a rate.
    Noise(f64, f64),
}

fn check_samples(side: &str, key: &str, mode: &str, samples: &[f64]) -> Result<(), GateError> {
    match samples.iter().enumerate().find(|(_, x)| !usable(**x)) {
        Some((i, x)) => Err(GateError::BadValue(format!(
            "{side}: {key} {mode}: sample {i} is {x}; times must be finite and above 0"
        ))),
        None => Ok(()),
    }
}

fn timer_rows<'a>(old: &'a Report, new: &'a Report) -> Result<Rows<'a>, GateError> {
    for (side, r) in [("old", old), ("new", new)] {
        for rec in &r.records {
            for m in &rec.modes {
                check_samples(side, &rec.key(), m.mode.name(), &m.samples)?;
            }
        }
    }
    let mut rows = Vec::new();
    let mut only_old = Vec::new();
    for o in &old.records {
        let Some(n) = new.records.iter().find(|n| n.key() == o.key()) else {
            only_old.push(o.key());
            continue;
        };
        for om in &o.modes {
            let Some(nm) = n.mode(om.mode) else { continue };
            if om.samples.is_empty() || nm.samples.is_empty() {
                continue;
            }
            rows.push(Pending {
                key: o.key(),
                what: om.mode.name().to_owned(),
                unit: Unit::Seconds,
                old: crate::stats::median(&om.samples),
                new: crate::stats::median(&nm.samples),
                source: Source::Samples(&om.samples, &nm.samples),
            });
        }
    }
    let only_new = new
        .records
        .iter()
        .filter(|n| !old.records.iter().any(|o| o.key() == n.key()))
        .map(|n| n.key())
        .collect();
    Ok((rows, only_old, only_new))
}

fn ceiling_rows<'a>(old: &'a RooflineReport, new: &'a RooflineReport) -> Result<Rows<'a>, GateError> {
    for (side, r) in [("old", old), ("new", new)] {
        for c in &r.ceilings {
            if !usable(c.value) {
                return Err(GateError::BadValue(format!(
                    "{side}: ceiling {:?} is {}; ceilings must be finite and above 0",
                    c.name, c.value
                )));
            }
            if !(c.noise.is_finite() && c.noise >= 0.0) {
                return Err(GateError::BadValue(format!(
                    "{side}: ceiling {:?} has noise {}; noise must be finite and at least 0",
                    c.name, c.noise
                )));
            }
        }
    }
    let mut rows = Vec::new();
    let mut only_old = Vec::new();
    for o in &old.ceilings {
        let Some(n) = new.ceiling(&o.name) else {
            only_old.push(o.name.clone());
            continue;
        };
        let unit = match o.kind {
            crate::roofline::CeilingKind::Compute => Unit::FlopPerSecond,
            crate::roofline::CeilingKind::Memory(_) => Unit::BytesPerSecond,
        };
        rows.push(Pending {
            key: o.name.clone(),
            what: "ceiling".into(),
            unit,
            old: o.value,
            new: n.value,
            source: Source::Noise(o.noise, n.noise),
        });
    }
    let only_new =
        new.ceilings.iter().filter(|n| old.ceiling(&n.name).is_none()).map(|n| n.name.clone()).collect();
    Ok((rows, only_old, only_new))
}

/// Compares two results files under the rule of this module's docs.
///
/// # Errors
/// [`GateError`]: a bad threshold, a bad value (named), files of different
/// kinds or environments (unless allowed), nothing compared or nothing with
/// an interval.
pub fn compare(old: &Results, new: &Results, opts: GateOptions) -> Result<CompareReport, GateError> {
    if !(opts.threshold > 0.0 && opts.threshold < 1.0) {
        return Err(GateError::Threshold(format!("{} is not in (0, 1)", opts.threshold)));
    }
    let (old_env, new_env) = (old.env(), new.env());
    let mut differences: Vec<String> = old_env
        .iter()
        .zip(&new_env)
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, b)| format!("{}: old {}, new {}", a.0, a.1, b.1))
        .collect();
    if old_env.len() != new_env.len() && differences.is_empty() {
        differences.push("one file names its kernel driver, the other does not".into());
    }
    let (schema, (rows, only_old, only_new)) = match (old, new) {
        (Results::Timer(o), Results::Timer(n)) => (o.schema.clone(), timer_rows(o, n)?),
        (Results::Roofline(o, _), Results::Roofline(n, _)) => (o.schema.clone(), ceiling_rows(o, n)?),
        _ => {
            return Err(GateError::Unreadable(format!(
                "cannot compare a {} with a {}",
                old_env[0].1, new_env[0].1
            )));
        }
    };
    if !differences.is_empty() && !opts.allow_different_env {
        return Err(GateError::DifferentEnv(differences));
    }
    if rows.is_empty() {
        return Err(GateError::NothingCompared(format!(
            "no {} with samples in both files (old has {}, new has {})",
            if matches!(old, Results::Timer(_)) { "benchmark" } else { "ceiling" },
            only_old.len(),
            only_new.len()
        )));
    }
    let m = rows.len() as f64;
    let row_alpha = FAMILY_ALPHA / m;
    let comparisons: Vec<Comparison> = rows
        .into_iter()
        .map(|p| {
            let ratio = p.new / p.old;
            let (interval, samples, rate) = match p.source {
                Source::Samples(o, n) => {
                    // Each median at 1 − α/(2m): the ratio's at 1 − α/m.
                    let ci = median_interval(o, row_alpha / 2.0)
                        .zip(median_interval(n, row_alpha / 2.0))
                        .map(|((olo, ohi), (nlo, nhi))| (nlo / ohi, nhi / olo));
                    (ci, (o.len(), n.len()), false)
                }
                Source::Noise(no, nn) => {
                    let se = (no * no + nn * nn).sqrt();
                    let z = normal_quantile(1.0 - row_alpha / 2.0);
                    let ci = (se > 0.0).then(|| (ratio * (-z * se).exp(), ratio * (z * se).exp()));
                    (ci, (0, 0), true)
                }
            };
            let verdict = match interval {
                None => Verdict::TooFewSamples,
                Some(ci) if rate => rate_verdict(ci, opts.threshold),
                Some(ci) => verdict(ci, opts.threshold),
            };
            Comparison {
                key: p.key,
                what: p.what,
                unit: p.unit,
                old: p.old,
                new: p.new,
                samples,
                ratio,
                interval,
                verdict,
            }
        })
        .collect();
    if comparisons.iter().all(|c| c.interval.is_none()) {
        return Err(GateError::NothingCompared(format!(
            "none of the {} rows in common has enough samples for an interval at {:.4}% \
             (a median needs at least {} samples a side)",
            comparisons.len(),
            (1.0 - row_alpha) * 100.0,
            (1..64).find(|&n| super::interval::order_rank(n, row_alpha / 2.0).is_some()).unwrap_or(64)
        )));
    }
    Ok(CompareReport {
        schema,
        threshold: opts.threshold,
        row_level: 1.0 - row_alpha,
        comparisons,
        only_old,
        only_new,
        env_differences: differences,
    })
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
