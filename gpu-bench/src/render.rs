//! Renderers: a [`Report`] as markdown (tables of at most 8 columns, 4
//! significant figures, noise in percent), CSV (one row per counter) or
//! JSON (everything, with the schema version). Renderers only format:
//! every number comes from the records.

use crate::record::{Counter, Record, Report, TimedBy, Unit, format_value};
use std::path::Path;

/// An output format (`--format`).
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::{Report, Settings, device_info, render::Format};
/// let info = device_info(&gpu_sync::Device::get(0)?)?;
/// let report = Report::new("nightly", info, Settings::quick());
/// let format = Format::from_name("json").unwrap(); // `--format json`
/// assert_eq!(format.extension(), "json");
/// assert!(format.render(&report).contains("\"schema\""));
/// assert_eq!(Format::from_name("markdown"), Some(Format::Md));
/// assert!(Format::from_name("xml").is_none());
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Markdown tables.
    Md,
    /// JSON with the schema version.
    Json,
    /// CSV, one row per counter.
    Csv,
}

impl Format {
    /// The format named `md`, `json` or `csv`.
    pub fn from_name(name: &str) -> Option<Format> {
        match name {
            "md" | "markdown" => Some(Format::Md),
            "json" => Some(Format::Json),
            "csv" => Some(Format::Csv),
            _ => None,
        }
    }

    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Md => "md",
            Format::Json => "json",
            Format::Csv => "csv",
        }
    }

    /// `report` in this format.
    pub fn render(self, report: &Report) -> String {
        match self {
            Format::Md => markdown(report),
            Format::Json => json(report),
            Format::Csv => csv(report),
        }
    }
}

pub use crate::record::{command_line, utc_date};

/// A markdown table from a header and rows.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!("| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len()));
    for r in rows {
        s.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    s
}

fn noise(c: &Counter) -> String {
    c.noise.map_or_else(|| "—".into(), |n| format!("{:.2}%", n * 100.0))
}

/// The timing table of `records`: one row per (record, mode). The `stop`
/// column says which rule ended sampling and the wall time sampling took
/// after warmup (`converged in 0.61 s`), by the host's clock. Modes are
/// timed by events: on the simulator (`simulated`) the median, IQR and
/// throughput headers say `simulated`.
pub fn records_markdown(records: &[Record], simulated: bool) -> String {
    let mut rows = Vec::new();
    for r in records {
        for m in &r.modes {
            let median = m.counters.iter().find(|c| c.name == "median");
            let thr = m
                .counters
                .iter()
                .filter(|c| matches!(c.unit, Unit::BytesPerSecond | Unit::FlopPerSecond))
                .map(Counter::display)
                .collect::<Vec<_>>()
                .join(", ");
            rows.push(vec![
                r.key(),
                m.mode.name().to_owned(),
                format_value(m.summary.median, Unit::Seconds),
                median.map_or_else(|| "—".into(), noise),
                format_value(m.summary.iqr(), Unit::Seconds),
                if m.runs_per_sample > 1 {
                    format!("{} x{}", m.summary.n, m.runs_per_sample)
                } else {
                    m.summary.n.to_string()
                },
                if thr.is_empty() { "—".into() } else { thr },
                match m.stop {
                    Some(s) => format!("{} in {:.2} s", s.name(), m.sampling_s),
                    None => "one run".to_owned(),
                },
            ]);
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let (median, iqr, throughput) = if simulated {
        ("median (simulated)", "IQR (simulated)", "throughput (simulated)")
    } else {
        ("median", "IQR", "throughput")
    };
    // The sampling time in `stop` is the host's (std::time::Instant), on
    // the simulator too.
    table(&["benchmark", "mode", median, "noise", iqr, "samples", throughput, "stop (host clock)"], &rows)
}

/// The counters of the records timed by `clock`, one table. Its value
/// header names the clock wherever a reader could take it for another:
/// always for the host clock, and for events on the simulator or when the
/// report also has host-clock figures.
fn counters_markdown(records: &[Record], clock: TimedBy, simulated: bool, mixed: bool) -> String {
    let rows: Vec<Vec<String>> = records
        .iter()
        .filter(|r| r.timed_by == clock)
        .flat_map(|r| r.counters.iter().map(move |c| vec![r.key(), c.name.clone(), c.display(), noise(c)]))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let value = if clock == TimedBy::Host || simulated || mixed {
        format!("value ({})", clock.label(simulated))
    } else {
        "value".to_owned()
    };
    table(&["benchmark", "counter", &value, "noise"], &rows)
}

/// The header lines: device, driver, clock, resolution, date, command.
pub fn header(report: &Report) -> String {
    let d = &report.device;
    let mut s = format!("# {}\n\n", report.title);
    if report.simulated {
        s.push_str("**SIMULATED TIMES** — the software driver cuda-sim ran this; no GPU was measured.");
        if report.records.iter().any(|r| r.timed_by == TimedBy::Host) {
            s.push_str(
                " Every figure is simulated except those of the host-clock table, which are real CPU \
                 times of the software driver: the two do not compare.",
            );
        }
        s.push_str("\n\n");
    }
    s.push_str(&format!("{} · CUDA {} · {}", d.name, d.driver_cuda_version, report.date));
    match &report.clock {
        Some(c) => s.push_str(&format!(
            " · SM clock {:.0} MHz measured (min {:.0}, driver max {:.0})",
            c.steady_mhz, c.min_mhz, c.reported_max_mhz
        )),
        None => s.push_str(&format!(" · SM clock not measured (driver max {:.0} MHz)", d.sm_clock_mhz)),
    }
    if let Some(r) = &report.resolution {
        s.push_str(&format!(
            " · event floor {}{}{}",
            format_value(r.floor_s, Unit::Seconds),
            r.step_s.map_or(String::new(), |t| format!(", tick {}", format_value(t, Unit::Seconds))),
            r.busy_floor_s
                .map_or(String::new(), |t| format!(", {} on a busy stream", format_value(t, Unit::Seconds)))
        ));
    }
    if let Some(p) = &d.pcie {
        s.push_str(&format!(
            " · PCIe gen {} x{} ({:.1} GB/s per direction)",
            p.generation(),
            p.width,
            p.theoretical_gbs
        ));
    }
    s.push_str(&format!("\n\n`{}`\n\n", report.command));
    s
}

/// One line per record with a warm-up curve: `- key: warm-up (hot): 5
/// runs, 412.0 µs → 13.10 µs, steady after run 3`.
pub fn warmup_markdown(records: &[Record]) -> String {
    records
        .iter()
        .filter_map(|r| r.warmup.as_ref().map(|w| format!("- {}: {}\n", r.key(), w.line())))
        .collect()
}

/// The whole report as markdown.
pub fn markdown(report: &Report) -> String {
    let mut s = header(report);
    let t = records_markdown(&report.records, report.simulated);
    if !t.is_empty() {
        s.push_str(&t);
        s.push('\n');
    }
    let mixed = report.records.iter().any(|r| r.timed_by == TimedBy::Host);
    for clock in [TimedBy::Events, TimedBy::Host] {
        let c = counters_markdown(&report.records, clock, report.simulated, mixed);
        if !c.is_empty() {
            s.push_str(&c);
            s.push('\n');
        }
    }
    let w = warmup_markdown(&report.records);
    if !w.is_empty() {
        s.push_str(&w);
        s.push('\n');
    }
    for n in &report.notes {
        s.push_str(&format!("- {n}\n"));
    }
    let warnings: Vec<_> = report.warnings().collect();
    if !warnings.is_empty() {
        s.push_str("\n**Warnings**\n\n");
        for (r, w) in warnings {
            s.push_str(&format!("- {}: {w}\n", r.key()));
        }
    }
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_owned() }
}

/// The report as CSV: `benchmark,params,mode,counter,value,unit,noise,clock`,
/// one row per counter (a mode's median, quartiles, sample count and
/// throughput; a record's own counters with an empty mode); `clock` names
/// the clock of the row's value ([`TimedBy::label`]: `simulated`, `device
/// events` or `host clock`).
pub fn csv(report: &Report) -> String {
    let mut s = String::from("benchmark,params,mode,counter,value,unit,noise,clock\n");
    let unit = |u: Unit| {
        serde_json::to_value(u).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
    };
    let mut row = |r: &Record, mode: &str, name: &str, value: f64, u: &str, noise: Option<f64>| {
        let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{}\n",
            csv_field(&r.name),
            csv_field(&params.join(";")),
            mode,
            csv_field(name),
            value,
            u,
            noise.map_or(String::new(), |n| n.to_string()),
            r.timed_by.label(report.simulated)
        ));
    };
    for r in &report.records {
        for m in &r.modes {
            for c in &m.counters {
                row(r, m.mode.name(), &c.name, c.value, &unit(c.unit), c.noise);
            }
            let sec = unit(Unit::Seconds);
            row(r, m.mode.name(), "q1", m.summary.q1, &sec, None);
            row(r, m.mode.name(), "q3", m.summary.q3, &sec, None);
            row(r, m.mode.name(), "min", m.summary.min, &sec, None);
            row(r, m.mode.name(), "samples", m.summary.n as f64, &unit(Unit::Count), None);
        }
        for c in &r.counters {
            row(r, "", &c.name, c.value, &unit(c.unit), c.noise);
        }
    }
    s
}

/// The report as pretty JSON.
pub fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")) + "\n"
}

/// Writes `value` as pretty JSON to `path`, creating its folder.
///
/// # Errors
/// An I/O or serialization error, naming the path.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| format!("serializing {}: {e}", path.display()))?;
    write_text(path, &(text + "\n"))
}

/// Writes `text` to `path`, creating its folder.
///
/// # Errors
/// An I/O error, naming the path.
pub fn write_text(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_iso() {
        let d = utc_date();
        assert_eq!(d.len(), 10);
        assert_eq!(&d[4..5], "-");
        assert!(d.as_str() >= "2024-01-01", "{d}");
    }

    #[test]
    fn tables_have_a_separator_per_column() {
        let t = table(&["a", "b"], &[vec!["1".into(), "2".into()]]);
        assert_eq!(t, "| a | b |\n|---|---|\n| 1 | 2 |\n");
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(Format::from_name("md"), Some(Format::Md));
        assert_eq!(Format::from_name("xml"), None);
    }
}
