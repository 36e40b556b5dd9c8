//! `key_averages`: a [`Trace`] summed per name (torch.profiler's op table).
//!
//! Each occurrence of a name is one of:
//! - a host range: host time its duration, self host time less its child
//!   ranges; device time the spans of every operation launched inside it
//!   (children included), self device time those launched directly in it;
//! - a host operation: host time the driver call; device time every span it
//!   enqueued (a graph replay's kernels), self device time the span that is
//!   the operation itself (none for a graph launch, whose kernels are rows of
//!   their own); an operation captured into a graph is "NAME (captured)",
//!   host time only;
//! - a device span no host operation of the trace names as itself (a kernel
//!   inside a replayed graph, another library's work): device time only.
//!
//! A row per name (or per name and shape, [`KeyAverages::group_by_shape`]):
//! calls, device total and self, average, min and max per call, self device
//! time as a percentage of all device time, host total and self. Sorted by
//! any [`Column`]; rendered as markdown (8 columns) or JSON (every field).

use super::trace::Trace;
use crate::record::{Unit, format_value};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The JSON schema name of a table.
pub const TABLE_SCHEMA: &str = "gpu-bench.key-averages";
/// Its version.
pub const TABLE_SCHEMA_VERSION: u32 = 1;

/// What a row sums.
///
/// Each [`Row`] says its kind; [`Profiler`](crate::profile::Profiler)'s
/// example builds the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// Host ranges.
    Range,
    /// Host operations (and the device spans that are them).
    Op,
    /// Device spans without a host operation of their own.
    Device,
}

/// One occurrence (see the module docs).
#[derive(Debug, Clone)]
struct Occurrence {
    kind: RowKind,
    name: String,
    shape: Option<String>,
    device_ns: u64,
    device_self_ns: u64,
    host_ns: u64,
    host_self_ns: u64,
}

/// One row of the table. Times in seconds.
///
/// A row of [`KeyAverages`]; [`Profiler`](crate::profile::Profiler)'s
/// example builds the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Range, operation or device span.
    pub kind: RowKind,
    /// The name.
    pub name: String,
    /// The shape, when grouped by shape.
    pub shape: Option<String>,
    /// Occurrences.
    pub calls: u64,
    /// Device time of every occurrence, children included.
    pub device_total_s: f64,
    /// Device time of the occurrences themselves.
    pub device_self_s: f64,
    /// `device_total_s / calls`.
    pub device_avg_s: f64,
    /// Smallest device time of one occurrence.
    pub device_min_s: f64,
    /// Largest.
    pub device_max_s: f64,
    /// Self device time as a percentage of all device time in the trace.
    pub device_pct: f64,
    /// Host time of every occurrence.
    pub host_total_s: f64,
    /// Host time less child ranges.
    pub host_self_s: f64,
}

impl Row {
    /// The row's value in `column` (for sorting); the name sorts apart.
    pub fn value(&self, column: Column) -> f64 {
        match column {
            Column::Name => 0.0,
            Column::Calls => self.calls as f64,
            Column::DeviceTotal => self.device_total_s,
            Column::DeviceSelf => self.device_self_s,
            Column::DeviceAvg => self.device_avg_s,
            Column::DeviceMin => self.device_min_s,
            Column::DeviceMax => self.device_max_s,
            Column::DevicePct => self.device_pct,
            Column::HostTotal => self.host_total_s,
            Column::HostSelf => self.host_self_s,
        }
    }

    /// The name with its shape, as the markdown shows it.
    pub fn label(&self) -> String {
        match &self.shape {
            Some(s) => format!("{} [{s}]", self.name),
            None => self.name.clone(),
        }
    }
}

/// A column to sort by: numbers largest first, names A to Z.
///
/// Taken by [`KeyAverages::sort_by`]; [`Profiler`](crate::profile::Profiler)'s example builds the table it sorts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Column {
    /// Name (then shape).
    Name,
    /// Calls.
    Calls,
    /// Device total.
    DeviceTotal,
    /// Self device time.
    DeviceSelf,
    /// Average device time per call.
    DeviceAvg,
    /// Smallest device time of a call.
    DeviceMin,
    /// Largest.
    DeviceMax,
    /// Percentage of all device time.
    DevicePct,
    /// Host total.
    HostTotal,
    /// Self host time.
    HostSelf,
}

impl Column {
    /// Every column.
    pub const ALL: [Column; 10] = [
        Column::Name,
        Column::Calls,
        Column::DeviceTotal,
        Column::DeviceSelf,
        Column::DeviceAvg,
        Column::DeviceMin,
        Column::DeviceMax,
        Column::DevicePct,
        Column::HostTotal,
        Column::HostSelf,
    ];

    /// Its name on the command line and in JSON (`device_total`, …).
    pub fn name(self) -> &'static str {
        match self {
            Column::Name => "name",
            Column::Calls => "calls",
            Column::DeviceTotal => "device_total",
            Column::DeviceSelf => "device_self",
            Column::DeviceAvg => "device_avg",
            Column::DeviceMin => "device_min",
            Column::DeviceMax => "device_max",
            Column::DevicePct => "device_pct",
            Column::HostTotal => "host_total",
            Column::HostSelf => "host_self",
        }
    }

    /// The column of that name.
    pub fn from_name(name: &str) -> Option<Column> {
        Column::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// The table (see the module docs).
///
/// [`Profiler`](crate::profile::Profiler)'s example uses one.
#[derive(Debug, Clone)]
pub struct KeyAverages {
    occurrences: Vec<Occurrence>,
    total_device_ns: u64,
    by_shape: bool,
    sort: Column,
    rows: Vec<Row>,
}

impl KeyAverages {
    /// The table of `trace`, grouped by name, sorted by device total.
    pub fn new(trace: &Trace) -> KeyAverages {
        let mut occ = Vec::new();
        let total_device_ns: u64 = trace.spans.iter().map(|s| s.duration_ns()).sum();
        // Ranges: children, and the spans of the ops launched in each.
        let mut child_host: HashMap<u64, u64> = HashMap::new();
        for r in &trace.ranges {
            if let Some(p) = r.parent {
                *child_host.entry(p).or_default() += r.end_ns.saturating_sub(r.start_ns);
            }
        }
        let mut span_ns_of_op: HashMap<u64, u64> = HashMap::new();
        let mut self_ns_of_op: HashMap<u64, u64> = HashMap::new();
        let ops: HashMap<u64, &super::trace::OpRecord> = trace.ops.iter().map(|o| (o.id, o)).collect();
        for s in &trace.spans {
            let own = s.op.and_then(|id| ops.get(&id).map(|o| (id, o)));
            match own {
                Some((id, o)) => {
                    *span_ns_of_op.entry(id).or_default() += s.duration_ns();
                    if o.name == s.name {
                        *self_ns_of_op.entry(id).or_default() += s.duration_ns();
                    } else {
                        occ.push(Occurrence {
                            kind: RowKind::Device,
                            name: s.name.clone(),
                            shape: s.kind.shape(),
                            device_ns: s.duration_ns(),
                            device_self_ns: s.duration_ns(),
                            host_ns: 0,
                            host_self_ns: 0,
                        });
                    }
                }
                None => occ.push(Occurrence {
                    kind: RowKind::Device,
                    name: s.name.clone(),
                    shape: s.kind.shape(),
                    device_ns: s.duration_ns(),
                    device_self_ns: s.duration_ns(),
                    host_ns: 0,
                    host_self_ns: 0,
                }),
            }
        }
        let mut range_total: HashMap<u64, u64> = HashMap::new();
        let mut range_self: HashMap<u64, u64> = HashMap::new();
        for o in &trace.ops {
            let d = span_ns_of_op.get(&o.id).copied().unwrap_or(0);
            if let Some(r) = o.range {
                *range_self.entry(r).or_default() += d;
            }
            for a in trace.ancestors(o.range) {
                *range_total.entry(a).or_default() += d;
            }
            let host = o.host_end_ns.saturating_sub(o.host_start_ns);
            occ.push(Occurrence {
                kind: RowKind::Op,
                // A captured call ran nothing then (its kernels run at each
                // replay): a row of its own, so a kernel's calls and average
                // are those of its launches.
                name: if o.captured { format!("{} (captured)", o.name) } else { o.name.clone() },
                shape: o.kind.shape(),
                device_ns: d,
                device_self_ns: self_ns_of_op.get(&o.id).copied().unwrap_or(0),
                host_ns: host,
                host_self_ns: host,
            });
        }
        for r in &trace.ranges {
            let host = r.end_ns.saturating_sub(r.start_ns);
            occ.push(Occurrence {
                kind: RowKind::Range,
                name: r.name.clone(),
                shape: None,
                device_ns: range_total.get(&r.id).copied().unwrap_or(0),
                device_self_ns: range_self.get(&r.id).copied().unwrap_or(0),
                host_ns: host,
                host_self_ns: host.saturating_sub(child_host.get(&r.id).copied().unwrap_or(0)),
            });
        }
        let mut t = KeyAverages {
            occurrences: occ,
            total_device_ns,
            by_shape: false,
            sort: Column::DeviceTotal,
            rows: vec![],
        };
        t.rebuild();
        t
    }

    /// Regroups by name and shape (grid and block of kernels, bytes of
    /// copies and memsets).
    pub fn group_by_shape(mut self) -> KeyAverages {
        self.by_shape = true;
        self.rebuild();
        self
    }

    /// Sorts by `column`: numbers largest first (ties by name), names A to
    /// Z.
    pub fn sort_by(mut self, column: Column) -> KeyAverages {
        self.sort = column;
        self.sort_rows();
        self
    }

    /// The rows, in order.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// The row of `name` (the first, when grouped by shape) of `kind`.
    pub fn row(&self, kind: RowKind, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.kind == kind && r.name == name)
    }

    /// All device time in the trace, seconds (the percentages' base).
    pub fn total_device_s(&self) -> f64 {
        self.total_device_ns as f64 * 1e-9
    }

    fn rebuild(&mut self) {
        let mut groups: Vec<(RowKind, String, Option<String>, Vec<&Occurrence>)> = Vec::new();
        let mut index: HashMap<(RowKind, String, Option<String>), usize> = HashMap::new();
        for o in &self.occurrences {
            let key = (o.kind, o.name.clone(), if self.by_shape { o.shape.clone() } else { None });
            let i = *index.entry(key.clone()).or_insert_with(|| {
                groups.push((key.0, key.1, key.2, Vec::new()));
                groups.len() - 1
            });
            groups[i].3.push(o);
        }
        let s = |ns: u64| ns as f64 * 1e-9;
        self.rows = groups
            .into_iter()
            .map(|(kind, name, shape, os)| {
                let calls = os.len() as u64;
                let total: u64 = os.iter().map(|o| o.device_ns).sum();
                let selfd: u64 = os.iter().map(|o| o.device_self_ns).sum();
                Row {
                    kind,
                    name,
                    shape,
                    calls,
                    device_total_s: s(total),
                    device_self_s: s(selfd),
                    device_avg_s: if calls > 0 { s(total) / calls as f64 } else { 0.0 },
                    device_min_s: s(os.iter().map(|o| o.device_ns).min().unwrap_or(0)),
                    device_max_s: s(os.iter().map(|o| o.device_ns).max().unwrap_or(0)),
                    device_pct: if self.total_device_ns > 0 {
                        selfd as f64 / self.total_device_ns as f64 * 100.0
                    } else {
                        0.0
                    },
                    host_total_s: s(os.iter().map(|o| o.host_ns).sum()),
                    host_self_s: s(os.iter().map(|o| o.host_self_ns).sum()),
                }
            })
            .collect();
        self.sort_rows();
    }

    fn sort_rows(&mut self) {
        let c = self.sort;
        self.rows.sort_by(|a, b| {
            let by_name = a.name.cmp(&b.name).then_with(|| a.shape.cmp(&b.shape)).then(a.kind.cmp(&b.kind));
            if c == Column::Name { by_name } else { b.value(c).total_cmp(&a.value(c)).then(by_name) }
        });
    }

    /// The table as markdown: name, calls, device total, self device,
    /// average, min / max, % of device time, host total. Ranges read
    /// "range: NAME", device spans without a launch of their own (a graph
    /// replay's kernels) "device: NAME".
    pub fn markdown(&self) -> String {
        let t = |v: f64| format_value(v, Unit::Seconds);
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let name = match r.kind {
                    RowKind::Range => format!("range: {}", r.label()),
                    // Kernels of a graph replay, or work no recorded
                    // operation launched.
                    RowKind::Device => format!("device: {}", r.label()),
                    RowKind::Op => r.label(),
                };
                vec![
                    name.replace('|', "\\|"),
                    r.calls.to_string(),
                    t(r.device_total_s),
                    t(r.device_self_s),
                    t(r.device_avg_s),
                    format!("{} / {}", t(r.device_min_s), t(r.device_max_s)),
                    format!("{:.1} %", r.device_pct),
                    t(r.host_total_s),
                ]
            })
            .collect();
        let mut s = crate::render::table(
            &["name", "calls", "device total", "self device", "avg", "min / max", "% device", "host total"],
            &rows,
        );
        s.push_str(&format!(
            "\nAll device time: {}; sorted by {}{}.\n",
            t(self.total_device_s()),
            self.sort.name(),
            if self.by_shape { ", grouped by shape" } else { "" }
        ));
        s
    }

    /// The table as JSON: schema, version, sort, grouping, total and every
    /// field of every row.
    pub fn json(&self) -> String {
        let v = serde_json::json!({
            "schema": TABLE_SCHEMA,
            "schema_version": TABLE_SCHEMA_VERSION,
            "sort_by": self.sort.name(),
            "group_by_shape": self.by_shape,
            "total_device_s": self.total_device_s(),
            "rows": self.rows,
        });
        serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")) + "\n"
    }
}
