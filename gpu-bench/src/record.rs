//! The data model: declared counters with a [`Unit`], keyed [`Record`]s,
//! and the [`Report`] that carries them with the device, clock and command.
//! Every number a renderer prints is computed here; renderers only format.
//!
//! [`Counter`]'s page has the example.

use crate::info::{ClockCheck, DeviceInfo, Resolution};
use crate::settings::Settings;
use crate::stats::{Summary, sig4};
use crate::stop::{Rule, StopReason};
use crate::warmup::WarmupCurve;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the JSON layout ([`Report`]). 2: records of modes and
/// counters (1 was the roofline's and overhead's own layouts); 3: a record
/// may carry its warm-up curve ([`Record::warmup`]).
pub const SCHEMA_VERSION: u32 = 3;
/// The oldest layout [`Report::from_json`] reads: version 2, which is
/// version 3 without warm-up curves.
pub const SCHEMA_VERSION_OLDEST: u32 = 2;
/// The `schema` field of every report.
pub const SCHEMA: &str = "gpu-bench.report";

/// The unit of a counter.
///
/// [`Counter`]'s page has the example.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// Seconds.
    Seconds,
    /// Bytes.
    Bytes,
    /// Bytes per second (printed in GB/s, 10⁹).
    BytesPerSecond,
    /// Floating-point operations per second (printed in GFLOP/s or TFLOP/s).
    FlopPerSecond,
    /// Hertz (printed in MHz).
    Hertz,
    /// A count.
    Count,
    /// A fraction, printed in percent.
    Fraction,
    /// A ratio, printed as `1.234x`.
    Ratio,
}

/// A named value with a unit, and optionally its relative noise.
///
/// ```
/// use gpu_bench::{Counter, Unit};
/// let c = Counter::new("bandwidth", 2.5e11, Unit::BytesPerSecond);
/// assert_eq!(c.display(), "250.0 GB/s");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    /// Name (`median`, `bandwidth`, `launch overhead`).
    pub name: String,
    /// Value in the unit's base (seconds, bytes/s, …). Not finite where it
    /// could not be computed (JSON writes `null`, read back as NaN).
    #[serde(deserialize_with = "f64_or_nan")]
    pub value: f64,
    /// Unit.
    pub unit: Unit,
    /// Relative noise of the value (a fraction), where measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
}

impl Counter {
    /// A counter without a noise figure.
    pub fn new(name: impl Into<String>, value: f64, unit: Unit) -> Counter {
        Counter { name: name.into(), value, unit, noise: None }
    }

    /// The same counter with a relative noise.
    pub fn with_noise(mut self, noise: f64) -> Counter {
        self.noise = Some(noise);
        self
    }

    /// The value in its unit, 4 significant figures (`12.34 µs`, `51.80 GB/s`).
    pub fn display(&self) -> String {
        format_value(self.value, self.unit)
    }
}

/// A number, or `null` (what serde_json writes for NaN and infinities) as NaN.
fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// `value` in `unit`, 4 significant figures.
pub fn format_value(value: f64, unit: Unit) -> String {
    if !value.is_finite() {
        return "—".into();
    }
    match unit {
        Unit::Seconds => {
            let a = value.abs();
            if a >= 1.0 {
                format!("{} s", sig4(value))
            } else if a >= 1e-3 {
                format!("{} ms", sig4(value * 1e3))
            } else if a >= 1e-6 || a == 0.0 {
                format!("{} µs", sig4(value * 1e6))
            } else {
                format!("{} ns", sig4(value * 1e9))
            }
        }
        Unit::Bytes => {
            if value >= (1u64 << 30) as f64 {
                format!("{} GiB", sig4(value / (1u64 << 30) as f64))
            } else if value >= (1u64 << 20) as f64 {
                format!("{} MiB", sig4(value / (1u64 << 20) as f64))
            } else if value >= 1024.0 {
                format!("{} KiB", sig4(value / 1024.0))
            } else {
                format!("{value} B")
            }
        }
        Unit::BytesPerSecond => format!("{:.1} GB/s", value / 1e9),
        Unit::FlopPerSecond => {
            if value >= 1e12 {
                format!("{} TFLOP/s", sig4(value / 1e12))
            } else {
                format!("{} GFLOP/s", sig4(value / 1e9))
            }
        }
        Unit::Hertz => format!("{:.0} MHz", value / 1e6),
        Unit::Count => format!("{value}"),
        Unit::Fraction => format!("{:.2}%", value * 100.0),
        Unit::Ratio => format!("{value:.3}x"),
    }
}

/// A way of timing the same work (see [`crate::Bench`]).
///
/// [`Bench`](crate::Bench)'s example runs several modes and reads the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The very first run, host clock around synchronized work (module load
    /// included when the first-call closure loads it).
    FirstCall,
    /// L2 flushed before each sample, each run isolated.
    Cold,
    /// Events around each run after warmup: the steady state.
    Hot,
    /// Runs queued back to back behind a spin gate; time per run = span / N.
    Batch,
    /// The work captured once into a CUDA graph and replayed.
    Graph,
    /// The GPU's own start and end of each device operation of a run, from
    /// CUPTI activity records (no events): the span from the first start to
    /// the last end per run. The reference the event modes are held against.
    Kernel,
}

impl Mode {
    /// Every mode, in report order.
    pub const ALL: [Mode; 6] =
        [Mode::FirstCall, Mode::Cold, Mode::Hot, Mode::Batch, Mode::Graph, Mode::Kernel];

    /// The mode's name (`first-call`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::FirstCall => "first-call",
            Mode::Cold => "cold",
            Mode::Hot => "hot",
            Mode::Batch => "batch",
            Mode::Graph => "graph",
            Mode::Kernel => "kernel",
        }
    }

    /// The mode named `name`.
    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Something a reader should know, naming the rule that fired.
///
/// Carried by a [`Record`]; [`Bench`](crate::Bench)'s example makes one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    /// The rule.
    pub rule: Rule,
    /// The mode it concerns, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// What happened, with the figures.
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.mode {
            Some(m) => write!(f, "[{}] {}: {}", self.rule.name(), m.name(), self.message),
            None => write!(f, "[{}] {}", self.rule.name(), self.message),
        }
    }
}

/// One mode's samples and what they say.
///
/// [`Bench`](crate::Bench)'s example runs several modes and reads the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeResult {
    /// The mode.
    pub mode: Mode,
    /// Seconds per run of each sample, in the order taken (kept raw,
    /// outliers included).
    pub samples: Vec<f64>,
    /// Their summary.
    pub summary: Summary,
    /// Runs per sample (1, or the batch size).
    pub runs_per_sample: usize,
    /// Why sampling ended (`None` for first-call: one sample by definition).
    pub stop: Option<StopReason>,
    /// Rules not met when sampling ended (empty when converged).
    pub unmet: Vec<Rule>,
    /// Warmup runs before sampling, and whether they reached a steady state.
    pub warmup_runs: usize,
    /// Whether warmup ended because the last runs agreed.
    pub warmup_steady: bool,
    /// Samples taken while the SM clock was below 90 % of its steady value.
    pub low_clock_samples: usize,
    /// Wall-clock seconds the warmup took (0 for first-call). Absent in
    /// reports written before it was added (read as 0).
    #[serde(default)]
    pub warmup_s: f64,
    /// Wall-clock seconds sampling took after warmup, until the stopping
    /// rule ended it (for first-call: the one run). Absent in reports
    /// written before it was added (read as 0).
    #[serde(default)]
    pub sampling_s: f64,
    /// Median time, throughput (from the declared bytes and FLOPs).
    pub counters: Vec<Counter>,
}

impl ModeResult {
    /// The median seconds per run.
    pub fn median(&self) -> f64 {
        self.summary.median
    }
}

/// The clock that timed a record's figures. Figures of different clocks
/// never share a column: the renderers put a [`TimedBy::Host`] record's
/// counters in a table of their own, labelled with its clock.
///
/// ```
/// use gpu_bench::{Record, TimedBy};
/// let r = Record::new("stream synchronize (idle)", &[]).timed_by(TimedBy::Host);
/// assert_eq!(r.timed_by, TimedBy::Host);
/// assert_eq!(Record::new("read", &[]).timed_by, TimedBy::Events); // the engine's modes
/// assert_eq!(TimedBy::Host.label(true), "host clock");
/// assert_eq!(TimedBy::Events.label(true), "simulated");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimedBy {
    /// CUDA events, the device's clock: the engine's modes and what is
    /// computed from them. On the simulator, simulated time.
    #[default]
    Events,
    /// The host's clock (`std::time::Instant`): real CPU time, on the
    /// simulator too (the software driver's own cost, not simulated).
    Host,
}

impl TimedBy {
    /// Whether this is [`TimedBy::Events`] (the JSON leaves that out).
    pub fn is_events(&self) -> bool {
        *self == TimedBy::Events
    }

    /// The clock's name for a column header: `simulated` for events on the
    /// simulator, `device events` on a GPU, `host clock` for the host.
    pub fn label(self, simulated: bool) -> &'static str {
        match (self, simulated) {
            (TimedBy::Events, true) => "simulated",
            (TimedBy::Events, false) => "device events",
            (TimedBy::Host, _) => "host clock",
        }
    }
}

/// The result of one benchmark: a name, its parameters (the key), the modes
/// it ran in, counters derived across modes, warnings.
///
/// [`Bench`](crate::Bench)'s example runs several modes and reads the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Benchmark name (a variant, in [`crate::Compare`]'s terms).
    pub name: String,
    /// Parameters (axes: size, dtype …), part of the key.
    pub params: BTreeMap<String, String>,
    /// Bytes moved per run, as declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_run: Option<u64>,
    /// FLOPs per run, as declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops_per_run: Option<u64>,
    /// One entry per mode measured.
    pub modes: Vec<ModeResult>,
    /// Counters of the record as a whole: differences between modes (launch
    /// overhead = hot − batch, cache effect = cold − hot, first-call cost =
    /// first call − hot), or a benchmark's own figures.
    pub counters: Vec<Counter>,
    /// Warnings, each naming its rule.
    pub warnings: Vec<Warning>,
    /// The first runs, each timed, until steady: the warm-up of the first
    /// sampled mode measured on the record. Absent in reports of schema
    /// version 2 and for a record of first-call mode only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupCurve>,
    /// The clock that timed the record's figures; absent in the JSON for
    /// [`TimedBy::Events`] (and in reports written before it existed, all
    /// of whose records were rendered as events).
    #[serde(default, skip_serializing_if = "TimedBy::is_events")]
    pub timed_by: TimedBy,
}

impl Record {
    /// An empty record named `name` with parameters `params`.
    pub fn new(name: impl Into<String>, params: &[(&str, String)]) -> Record {
        Record {
            name: name.into(),
            params: params.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect(),
            bytes_per_run: None,
            flops_per_run: None,
            modes: Vec::new(),
            counters: Vec::new(),
            warnings: Vec::new(),
            warmup: None,
            timed_by: TimedBy::Events,
        }
    }

    /// The same record, marked as timed by `clock`.
    pub fn timed_by(mut self, clock: TimedBy) -> Record {
        self.timed_by = clock;
        self
    }

    /// The key: name and parameters (`read{size=1 GiB}`).
    pub fn key(&self) -> String {
        if self.params.is_empty() {
            return self.name.clone();
        }
        let p: Vec<String> = self.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{}{{{}}}", self.name, p.join(","))
    }

    /// The result of `mode`, if measured.
    pub fn mode(&self, mode: Mode) -> Option<&ModeResult> {
        self.modes.iter().find(|m| m.mode == mode)
    }

    /// The counter named `name`.
    pub fn counter(&self, name: &str) -> Option<&Counter> {
        self.counters.iter().find(|c| c.name == name)
    }

    /// The headline mode: hot if measured, else the first measured.
    pub fn primary(&self) -> Option<&ModeResult> {
        self.mode(Mode::Hot)
            .or_else(|| self.modes.iter().find(|m| m.mode != Mode::FirstCall))
            .or(self.modes.first())
    }
}

/// A report: what ran, where, and the records. Serialized as JSON with
/// [`SCHEMA`] and [`SCHEMA_VERSION`].
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::{Bench, Report, Settings, device_info, render};
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let mut buf = DeviceBuffer::<u8>::alloc(&stream, 1 << 20)?;
/// let mut report = Report::new("my kernels", device_info(&device)?, Settings::quick());
/// report.records.push(Bench::new("memset 1 MiB").settings(Settings::quick()).run(&stream, |s| s.fill_bytes(&mut buf, 0))?);
/// assert!(report.simulated); // the report says its times are simulated
/// let json = render::json(&report); // what `gpu-bench compare` reads
/// assert!(json.contains("memset 1 MiB"));
/// print!("{}", render::markdown(&report));
/// # Ok::<(), gpu_bench::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// [`SCHEMA_VERSION`] at writing.
    pub schema_version: u32,
    /// Title (`sync-costs`).
    pub title: String,
    /// UTC date of the run.
    pub date: String,
    /// The command line that produced it.
    pub command: String,
    /// Whether the times come from the simulator (cuda-sim), not a GPU.
    pub simulated: bool,
    /// The device.
    pub device: DeviceInfo,
    /// The SM clock measured around the run, if instruments were loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockCheck>,
    /// The event timer's resolution on this device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
    /// The sampling settings.
    pub settings: Settings,
    /// The results.
    pub records: Vec<Record>,
    /// Explanations printed under the tables.
    pub notes: Vec<String>,
}

impl Report {
    /// A report with no records yet, dated now, with this process's command line.
    pub fn new(title: impl Into<String>, device: DeviceInfo, settings: Settings) -> Report {
        Report {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            title: title.into(),
            date: utc_date(),
            command: command_line(),
            simulated: device.simulated,
            device,
            clock: None,
            resolution: None,
            settings,
            records: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Every warning of every record.
    pub fn warnings(&self) -> impl Iterator<Item = (&Record, &Warning)> {
        self.records.iter().flat_map(|r| r.warnings.iter().map(move |w| (r, w)))
    }

    /// Parses a report written by `crate::render::json`.
    ///
    /// # Errors
    /// A message naming what is wrong: not JSON, another schema, or a
    /// schema version outside [`SCHEMA_VERSION_OLDEST`]..=[`SCHEMA_VERSION`]
    /// (a version-2 report reads as one without warm-up curves; its
    /// `schema_version` stays 2).
    pub fn from_json(text: &str) -> Result<Report, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != SCHEMA {
            return Err(format!("not a {SCHEMA} file (schema {schema:?})"));
        }
        let version = v.get("schema_version").and_then(serde_json::Value::as_u64).unwrap_or(0);
        if !(u64::from(SCHEMA_VERSION_OLDEST)..=u64::from(SCHEMA_VERSION)).contains(&version) {
            return Err(format!(
                "schema version {version}; this gpu-bench reads versions {SCHEMA_VERSION_OLDEST} to {SCHEMA_VERSION}"
            ));
        }
        serde_json::from_value(v).map_err(|e| format!("malformed report: {e}"))
    }
}

/// Today's UTC date as `YYYY-MM-DD` (from the system clock).
pub fn utc_date() -> String {
    let secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let days = (secs / 86_400) as i64;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The command line this process was started with.
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_format() {
        assert_eq!(format_value(12.3456e-6, Unit::Seconds), "12.35 µs");
        assert_eq!(format_value(1.5e-3, Unit::Seconds), "1.500 ms");
        assert_eq!(format_value(42e-9, Unit::Seconds), "42.00 ns");
        assert_eq!(format_value(51.8e9, Unit::BytesPerSecond), "51.8 GB/s");
        assert_eq!(format_value(2.0e12, Unit::FlopPerSecond), "2.000 TFLOP/s");
        assert_eq!(format_value(0.0123, Unit::Fraction), "1.23%");
        assert_eq!(format_value((4u64 << 20) as f64, Unit::Bytes), "4.000 MiB");
        assert_eq!(format_value(f64::NAN, Unit::Seconds), "—");
    }

    #[test]
    fn counters_that_could_not_be_computed_survive_json() {
        let c = Counter::new("bandwidth", f64::INFINITY, Unit::BytesPerSecond);
        let text = serde_json::to_string(&c).unwrap();
        let back: Counter = serde_json::from_str(&text).unwrap();
        assert!(back.value.is_nan());
        assert_eq!(back.display(), "—");
    }

    #[test]
    fn keys_and_mode_names() {
        let r = Record::new("read", &[("size", "1 GiB".into()), ("dtype", "u32".into())]);
        assert_eq!(r.key(), "read{dtype=u32,size=1 GiB}");
        for m in Mode::ALL {
            assert_eq!(Mode::from_name(m.name()), Some(m));
        }
    }
}
