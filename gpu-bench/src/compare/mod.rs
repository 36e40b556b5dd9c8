//! Comparing measurements: [`Compare`] tables (variants as rows, a
//! parameter as columns, the fastest per column marked, relative times),
//! the regression gate between two results files ([`gate`]: timer reports
//! or rooflines, every row's interval corrected for the number of rows),
//! the A/A calibration of a threshold ([`calibrate`]) and paired,
//! interleaved A/B runs ([`paired`]).
//!
//! The verdict is *slower* only when the whole interval of new/old lies
//! above `1 + threshold` (*faster*: below `1 − threshold`); anything else is
//! *same*. nvbench flags a difference as soon as it exceeds the noise, so
//! identical reruns come out SLOW or FAST; here a difference must be both
//! significant and larger than the threshold. Between two reports the
//! interval of each row is widened for the many rows of a report (see
//! [`gate`]'s rule), so a report of identical code gets any verdict at most
//! 5 % of the time; [`calibrate`] measures how often the same benchmark run
//! twice still gets a verdict on this GPU.
//!
//! [`Verdict`]'s page has the example.

pub mod gate;
pub mod interval;

pub use gate::{
    CompareReport, Comparison, FAMILY_ALPHA, GateError, GateOptions, Results, compare as compare_results,
    parse_threshold,
};

use crate::bench::{Bench, Timer};
use crate::record::{Mode, Record, Unit, format_value};
use crate::settings::Settings;
use crate::stats::{XorShift, median, quantile_sorted, ratio_ci};
use gpu_sync::{Result, Stream};
use serde::{Deserialize, Serialize};

/// Bootstrap resamples for every interval here.
const RESAMPLES: usize = 1000;

/// A regression verdict.
///
/// ```
/// use gpu_bench::compare::{Verdict, verdict};
/// assert_eq!(verdict((1.08, 1.12), 0.05), Verdict::Slower);
/// assert_eq!(verdict((0.99, 1.07), 0.05), Verdict::Same);
/// assert_eq!(verdict((0.90, 0.94), 0.05), Verdict::Faster);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// New is faster by more than the threshold, with 95 % confidence.
    Faster,
    /// No difference beyond the threshold that the data support.
    Same,
    /// New is slower by more than the threshold, with 95 % confidence.
    Slower,
    /// Too few samples for an interval at the level asked: no verdict, and
    /// the row never decides a comparison.
    TooFewSamples,
}

impl Verdict {
    /// The verdict as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Same => "same",
            Verdict::Slower => "SLOWER",
            Verdict::TooFewSamples => "too few samples",
        }
    }
}

/// The verdict for a 95 % interval `ci` of new/old time and a relative
/// `threshold` (0.05 = 5 %).
pub fn verdict(ci: (f64, f64), threshold: f64) -> Verdict {
    if ci.0 > 1.0 + threshold {
        Verdict::Slower
    } else if ci.1 < 1.0 - threshold {
        Verdict::Faster
    } else {
        Verdict::Same
    }
}

/// One cell of a [`Compare`] table; [`Compare`]'s example reads them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Median seconds.
    pub median: f64,
    /// Median over the column's fastest median.
    pub relative: f64,
    /// Whether this is the column's fastest.
    pub fastest: bool,
}

/// Variants as rows, one parameter's values as columns, like
/// `torch.utils.benchmark.Compare`.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::{Bench, Compare, Mode, Settings};
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let stream = Stream::new(&Device::get(0)?)?;
/// let mut records = Vec::new();
/// for mib in [1, 4] {
///     let src = DeviceBuffer::<u8>::zeroed(&stream, mib << 20)?;
///     let mut dst = DeviceBuffer::<u8>::alloc(&stream, mib << 20)?;
///     let bench = |name| Bench::new(name).param("size", format!("{mib} MiB")).modes(&[Mode::Hot]).settings(Settings::quick());
///     records.push(bench("fill").run(&stream, |s| s.fill_bytes(&mut dst, 0))?);
///     records.push(bench("copy").run(&stream, |s| s.copy(&src, &mut dst))?);
/// }
/// let table = Compare::new(&records, "size", Mode::Hot);
/// assert_eq!(table.rows, ["fill", "copy"]);
/// assert_eq!(table.columns, ["1 MiB", "4 MiB"]);
/// for j in 0..2 { // one fastest per column, the others relative to it
///     assert_eq!(table.cells.iter().filter(|row| row[j].unwrap().fastest).count(), 1);
///     assert!(table.cells.iter().all(|row| row[j].unwrap().relative >= 1.0));
/// }
/// println!("{}", table.to_markdown());
/// # Ok::<(), gpu_bench::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compare {
    /// The parameter whose values are the columns.
    pub column_param: String,
    /// The mode compared.
    pub mode: Mode,
    /// Row labels: record name plus the other parameters.
    pub rows: Vec<String>,
    /// Column labels: values of `column_param`, in first-seen order.
    pub columns: Vec<String>,
    /// `cells[row][column]`.
    pub cells: Vec<Vec<Option<Cell>>>,
}

impl Compare {
    /// Builds the table from `records`, comparing `mode`'s medians.
    pub fn new(records: &[Record], column_param: &str, mode: Mode) -> Compare {
        let label = |r: &Record| {
            let rest: Vec<String> = r
                .params
                .iter()
                .filter(|(k, _)| k.as_str() != column_param)
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if rest.is_empty() { r.name.clone() } else { format!("{} ({})", r.name, rest.join(", ")) }
        };
        let col = |r: &Record| r.params.get(column_param).cloned().unwrap_or_else(|| "—".into());
        let mut rows: Vec<String> = Vec::new();
        let mut columns: Vec<String> = Vec::new();
        for r in records {
            if !rows.contains(&label(r)) {
                rows.push(label(r));
            }
            if !columns.contains(&col(r)) {
                columns.push(col(r));
            }
        }
        let mut cells = vec![vec![None; columns.len()]; rows.len()];
        for r in records {
            let Some(m) = r.mode(mode) else { continue };
            let (i, j) = (
                rows.iter().position(|x| *x == label(r)).unwrap_or(0),
                columns.iter().position(|x| *x == col(r)).unwrap_or(0),
            );
            cells[i][j] = Some(Cell { median: m.summary.median, relative: 1.0, fastest: false });
        }
        for j in 0..columns.len() {
            let best = (0..rows.len())
                .filter_map(|i| cells[i][j].map(|c| (i, c.median)))
                .filter(|(_, m)| m.is_finite())
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((bi, bm)) = best {
                for row in cells.iter_mut() {
                    if let Some(c) = row[j].as_mut() {
                        c.relative = c.median / bm;
                    }
                }
                if let Some(c) = cells[bi][j].as_mut() {
                    c.fastest = true;
                }
            }
        }
        Compare { column_param: column_param.to_owned(), mode, rows, columns, cells }
    }

    /// The table as markdown: the fastest per column in bold, others with
    /// their time relative to it.
    pub fn to_markdown(&self) -> String {
        let header: Vec<String> = std::iter::once(format!("variant \\ {}", self.column_param))
            .chain(self.columns.iter().cloned())
            .collect();
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .zip(&self.cells)
            .map(|(label, cells)| {
                std::iter::once(label.clone())
                    .chain(cells.iter().map(|c| match c {
                        None => "—".into(),
                        Some(c) if c.fastest => format!("**{}**", format_value(c.median, Unit::Seconds)),
                        Some(c) => format!("{} ({:.2}x)", format_value(c.median, Unit::Seconds), c.relative),
                    }))
                    .collect()
            })
            .collect();
        let h: Vec<&str> = header.iter().map(String::as_str).collect();
        format!("{} times, median; fastest in bold\n\n{}", self.mode.name(), crate::render::table(&h, &rows))
    }
}

/// What an A/A calibration found: the same benchmark measured several
/// times, every pair compared at the threshold.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::{Bench, Settings, Timer, compare::calibrate};
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let stream = Stream::new(&Device::get(0)?)?;
/// let mut buf = DeviceBuffer::<u8>::alloc(&stream, 1 << 20)?;
/// let mut timer = Timer::new(&stream, None)?;
/// let bench = Bench::new("memset").settings(Settings::quick());
/// let cal = calibrate(&mut timer, &bench, 3, 0.05, |s| s.fill_bytes(&mut buf, 0))?;
/// assert_eq!((cal.pairs, cal.medians.len()), (3, 3)); // every pair of 3 repeats
/// assert_eq!(cal.false_rate, cal.false_verdicts as f64 / 3.0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The threshold tested, a fraction.
    pub threshold: f64,
    /// Pairs compared.
    pub pairs: usize,
    /// Pairs that got a verdict other than "same" (all false: A equals A).
    pub false_verdicts: usize,
    /// `false_verdicts / pairs`.
    pub false_rate: f64,
    /// The largest |ratio − 1| between two repeats.
    pub max_deviation: f64,
    /// The median of each repeat, seconds.
    pub medians: Vec<f64>,
}

/// Runs `bench` (hot mode) `repeats` times on `timer` and compares every
/// pair of repeats at `threshold`: the rate of false verdicts this GPU
/// gives at that threshold.
///
/// # Errors
/// A driver error or `f`'s error.
pub fn calibrate(
    timer: &mut Timer,
    bench: &Bench,
    repeats: usize,
    threshold: f64,
    mut f: impl FnMut(&Stream) -> Result<()>,
) -> crate::Result<Calibration> {
    let bench = bench.clone().modes(&[Mode::Hot]);
    let mut runs = Vec::new();
    for _ in 0..repeats.max(2) {
        let r = bench.run_on(timer, None, &mut f)?;
        runs.push(r.mode(Mode::Hot).map(|m| m.samples.clone()).unwrap_or_default());
    }
    let (mut pairs, mut false_verdicts, mut max_dev) = (0, 0, 0.0f64);
    for i in 0..runs.len() {
        for j in i + 1..runs.len() {
            let (r, ci) = ratio_ci(&runs[j], &runs[i], RESAMPLES);
            pairs += 1;
            false_verdicts += usize::from(verdict(ci, threshold) != Verdict::Same);
            if r.is_finite() {
                max_dev = max_dev.max((r - 1.0).abs());
            }
        }
    }
    Ok(Calibration {
        threshold,
        pairs,
        false_verdicts,
        false_rate: if pairs > 0 { false_verdicts as f64 / pairs as f64 } else { 0.0 },
        max_deviation: max_dev,
        medians: runs.iter().map(|s| median(s)).collect(),
    })
}

/// A paired, interleaved A/B comparison.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::{Settings, Timer, Verdict, compare::paired};
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let stream = Stream::new(&Device::get(0)?)?;
/// let (mut small, mut big) = (DeviceBuffer::<u8>::alloc(&stream, 1 << 20)?, DeviceBuffer::<u8>::alloc(&stream, 16 << 20)?);
/// let mut timer = Timer::new(&stream, None)?;
/// let p = paired(&mut timer, &Settings::quick(), 8, 0.05,
///     |s| s.fill_bytes(&mut small, 0), |s| s.fill_bytes(&mut big, 0))?;
/// assert_eq!((p.a.len(), p.b.len()), (8, 8));
/// assert!(p.ratio > 1.0 && p.verdict == Verdict::Slower); // B writes 16× the bytes
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// A's times, seconds, one per round.
    pub a: Vec<f64>,
    /// B's times, seconds, one per round.
    pub b: Vec<f64>,
    /// Median over rounds of b/a.
    pub ratio: f64,
    /// Bootstrap 95 % interval of that median.
    pub ci95: (f64, f64),
    /// The verdict (B against A) at the threshold.
    pub verdict: Verdict,
}

/// Times `a` and `b` alternately, `rounds` rounds (order A B, then B A, …,
/// so a drift hits both alike), after `settings.warmup_min` warmup runs of
/// each; the ratio is the median of the per-round ratios b/a, which cancels
/// drift slower than a round.
///
/// # Errors
/// A driver error or a closure's error.
pub fn paired(
    timer: &mut Timer,
    settings: &Settings,
    rounds: usize,
    threshold: f64,
    mut a: impl FnMut(&Stream) -> Result<()>,
    mut b: impl FnMut(&Stream) -> Result<()>,
) -> Result<Paired> {
    for _ in 0..settings.warmup_min.max(1) {
        timer.time(&mut a)?;
        timer.time(&mut b)?;
    }
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for round in 0..rounds.max(2) {
        if round % 2 == 0 {
            ta.push(timer.time(&mut a)?);
            tb.push(timer.time(&mut b)?);
        } else {
            tb.push(timer.time(&mut b)?);
            ta.push(timer.time(&mut a)?);
        }
    }
    let ratios: Vec<f64> = ta.iter().zip(&tb).map(|(x, y)| y / x).filter(|r| r.is_finite()).collect();
    let ratio = median(&ratios);
    let mut rng = XorShift::new(0x5eed ^ ratios.len() as u64);
    let mut boot: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let re: Vec<f64> = (0..ratios.len()).map(|_| ratios[rng.below(ratios.len())]).collect();
            median(&re)
        })
        .filter(|x| x.is_finite())
        .collect();
    boot.sort_by(f64::total_cmp);
    let ci = if boot.is_empty() {
        (f64::NAN, f64::NAN)
    } else {
        (quantile_sorted(&boot, 0.025), quantile_sorted(&boot, 0.975))
    };
    Ok(Paired { a: ta, b: tb, ratio, ci95: ci, verdict: verdict(ci, threshold) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ModeResult;
    use crate::record::Report;
    use crate::stats::Summary;

    fn record(name: &str, size: &str, samples: Vec<f64>) -> Record {
        let mut r = Record::new(name, &[("size", size.into())]);
        r.modes.push(ModeResult {
            mode: Mode::Hot,
            summary: Summary::of(&samples).unwrap(),
            samples,
            runs_per_sample: 1,
            stop: None,
            unmet: vec![],
            warmup_runs: 0,
            warmup_steady: true,
            low_clock_samples: 0,
            warmup_s: 0.0,
            sampling_s: 0.0,
            counters: vec![],
        });
        r
    }

    fn noisy(level: f64, seed: u64) -> Vec<f64> {
        let mut rng = XorShift::new(seed);
        (0..200).map(|_| level * (1.0 + 0.01 * (rng.below(1000) as f64 / 1000.0 - 0.5))).collect()
    }

    #[test]
    fn compare_table_marks_the_fastest_per_column() {
        let recs = [
            record("naive", "1K", vec![2.0; 5]),
            record("tiled", "1K", vec![1.0; 5]),
            record("naive", "1M", vec![3.0; 5]),
            record("tiled", "1M", vec![6.0; 5]),
        ];
        let c = Compare::new(&recs, "size", Mode::Hot);
        assert_eq!(c.rows, ["naive", "tiled"]);
        assert_eq!(c.columns, ["1K", "1M"]);
        let cell = |i: usize, j: usize| c.cells[i][j].unwrap();
        assert!(cell(1, 0).fastest && !cell(0, 0).fastest);
        assert!(cell(0, 1).fastest && !cell(1, 1).fastest);
        assert_eq!(cell(0, 0).relative, 2.0);
        assert_eq!(cell(1, 1).relative, 2.0);
        let md = c.to_markdown();
        assert!(md.contains("**1.000 s**") && md.contains("(2.00x)"), "{md}");
    }

    fn report(records: Vec<Record>) -> Report {
        let device = crate::info::DeviceInfo {
            ordinal: 0,
            name: "test".into(),
            compute_capability: (9, 0),
            sm_count: 1,
            sm_clock_mhz: 1.0,
            memory_clock_mhz: 1.0,
            memory_bus_bits: 1,
            l2_bytes: 1,
            total_memory_bytes: 1,
            driver_cuda_version: "13.0".into(),
            driver_origin: "test".into(),
            simulated: true,
            theoretical_bandwidth_gbs: 1.0,
            pcie: None,
        };
        let mut r = Report::new("t", device, Settings::default());
        r.records = records;
        r
    }

    #[test]
    fn reports_round_trip_through_json_and_reject_other_schemas() {
        let r = report(vec![record("k", "1", noisy(1.0, 1))]);
        let back = Report::from_json(&crate::render::json(&r)).unwrap();
        assert_eq!(back, r);
        assert!(Report::from_json("{}").unwrap_err().contains("not a gpu-bench.report"));
        let newer = crate::render::json(&r).replace("\"schema_version\": 3", "\"schema_version\": 99");
        assert!(Report::from_json(&newer).unwrap_err().contains("99"));
    }
}
