//! The p2p report as markdown, CSV and a heat-map SVG.

use super::{Figure, P2pReport, PairResult};
use crate::record::TimedBy;
use std::fmt::Write as _;

/// The columns of the CSV: header, clock, accessor.
type Column = (&'static str, TimedBy, fn(&PairResult) -> &Figure);

const COLUMNS: [Column; 17] = [
    ("copy off (staged) GB/s", TimedBy::Events, |p| &p.copy_off_gbs),
    ("copy off both ways GB/s", TimedBy::Events, |p| &p.copy_both_off_gbs),
    ("copy on GB/s", TimedBy::Events, |p| &p.copy_on_gbs),
    ("copy on both ways GB/s", TimedBy::Events, |p| &p.copy_both_on_gbs),
    ("raw cuMemcpyPeerAsync on GB/s", TimedBy::Events, |p| &p.raw_on_gbs),
    ("raw both ways GB/s", TimedBy::Events, |p| &p.raw_both_on_gbs),
    ("SM push GB/s", TimedBy::Events, |p| &p.sm_push_gbs),
    ("SM push raw GB/s", TimedBy::Events, |p| &p.sm_push_raw_gbs),
    ("SM pull GB/s", TimedBy::Events, |p| &p.sm_pull_gbs),
    ("SM pull raw GB/s", TimedBy::Events, |p| &p.sm_pull_raw_gbs),
    ("4 B latency on, GPU µs", TimedBy::Events, |p| &p.latency_gpu_on_us),
    ("4 B latency off, GPU µs", TimedBy::Events, |p| &p.latency_gpu_off_us),
    ("4 B round trip on, host µs", TimedBy::Host, |p| &p.latency_host_on_us),
    ("handoff GPU µs/hop", TimedBy::Events, |p| &p.handoff_gpu_us),
    ("handoff raw GPU µs/hop", TimedBy::Events, |p| &p.handoff_raw_gpu_us),
    ("handoff host µs/hop", TimedBy::Host, |p| &p.handoff_host_us),
    ("handoff raw host µs/hop", TimedBy::Host, |p| &p.handoff_raw_host_us),
];

/// A cell of a pair table: a figure, or one computed from two.
enum Cell {
    /// A figure as measured.
    Fig(fn(&PairResult) -> &Figure),
    /// `first / second`, three decimals.
    Ratio(fn(&PairResult) -> &Figure, fn(&PairResult) -> &Figure),
    /// `first − second`, two decimals with a sign.
    Diff(fn(&PairResult) -> &Figure, fn(&PairResult) -> &Figure),
}

/// A pair table: its title, the clock of every figure in it (one clock a
/// table: figures of two clocks never share one), the headers of the
/// columns naming the pair, those cells, and the figures' columns.
struct Table {
    title: &'static str,
    clock: TimedBy,
    lead: &'static [&'static str],
    pair: fn(&PairResult) -> String,
    columns: &'static [(&'static str, Cell)],
}

fn one_way(p: &PairResult) -> String {
    format!("{} → {}", p.src, p.dst)
}

/// The pair tables, each at most eight columns.
const TABLES: [Table; 6] = [
    Table {
        clock: TimedBy::Events,
        title: "Copy-engine bandwidth, gpu-sync `Stream::copy` (GB/s)",
        lead: &["pair", "link", "peer", "rank"],
        pair: |p| {
            format!(
                "{} | {} | {} | {}",
                one_way(p),
                p.link,
                p.can_access_peer,
                p.performance_rank.map_or("—".into(), |r| r.to_string())
            )
        },
        columns: &[
            ("off (staged)", Cell::Fig(|p| &p.copy_off_gbs)),
            ("off both ways", Cell::Fig(|p| &p.copy_both_off_gbs)),
            ("on", Cell::Fig(|p| &p.copy_on_gbs)),
            ("on both ways", Cell::Fig(|p| &p.copy_both_on_gbs)),
        ],
    },
    Table {
        clock: TimedBy::Events,
        title: "Peer access on: gpu-sync against a raw `cuMemcpyPeerAsync` loop (GB/s)",
        lead: &["pair"],
        pair: one_way,
        columns: &[
            ("ours", Cell::Fig(|p| &p.copy_on_gbs)),
            ("raw", Cell::Fig(|p| &p.raw_on_gbs)),
            ("ours / raw", Cell::Ratio(|p| &p.copy_on_gbs, |p| &p.raw_on_gbs)),
            ("ours both ways", Cell::Fig(|p| &p.copy_both_on_gbs)),
            ("raw both ways", Cell::Fig(|p| &p.raw_both_on_gbs)),
            ("ours / raw", Cell::Ratio(|p| &p.copy_both_on_gbs, |p| &p.raw_both_on_gbs)),
        ],
    },
    Table {
        clock: TimedBy::Events,
        title: "SM copy kernel (`copy_u32x4`) across the link: gpu-sync's launch against the same function by `cuLaunchKernel` (GB/s)",
        lead: &["pair"],
        pair: one_way,
        columns: &[
            ("push", Cell::Fig(|p| &p.sm_push_gbs)),
            ("push raw", Cell::Fig(|p| &p.sm_push_raw_gbs)),
            ("ours / raw", Cell::Ratio(|p| &p.sm_push_gbs, |p| &p.sm_push_raw_gbs)),
            ("pull", Cell::Fig(|p| &p.sm_pull_gbs)),
            ("pull raw", Cell::Fig(|p| &p.sm_pull_raw_gbs)),
            ("ours / raw", Cell::Ratio(|p| &p.sm_pull_gbs, |p| &p.sm_pull_raw_gbs)),
        ],
    },
    Table {
        clock: TimedBy::Events,
        title: "4-byte latency, GPU time by events (µs)",
        lead: &["pair"],
        pair: one_way,
        columns: &[
            ("access on", Cell::Fig(|p| &p.latency_gpu_on_us)),
            ("access off", Cell::Fig(|p| &p.latency_gpu_off_us)),
        ],
    },
    Table {
        clock: TimedBy::Events,
        title: "Cross-device handoff, gpu-sync's automatic waits against raw events and waits, GPU time by events (µs per hop)",
        lead: &["chain"],
        pair: |p| format!("{} → {} → {}", p.src, p.dst, p.src),
        columns: &[
            ("ours", Cell::Fig(|p| &p.handoff_gpu_us)),
            ("raw", Cell::Fig(|p| &p.handoff_raw_gpu_us)),
            ("ours − raw", Cell::Diff(|p| &p.handoff_gpu_us, |p| &p.handoff_raw_gpu_us)),
        ],
    },
    Table {
        clock: TimedBy::Host,
        title: "Host time: the 4-byte copy's round trip (a copy and a stream synchronize, access on) and the handoff chains' submission (µs)",
        lead: &["pair"],
        pair: one_way,
        columns: &[
            ("4 B round trip", Cell::Fig(|p| &p.latency_host_on_us)),
            ("handoff ours, per hop", Cell::Fig(|p| &p.handoff_host_us)),
            ("handoff raw, per hop", Cell::Fig(|p| &p.handoff_raw_host_us)),
            ("handoff ours / raw", Cell::Ratio(|p| &p.handoff_host_us, |p| &p.handoff_raw_host_us)),
        ],
    },
];

impl Cell {
    fn render(&self, p: &PairResult) -> String {
        match self {
            Cell::Fig(f) => cell(f(p)),
            Cell::Ratio(a, b) => ratio(a(p), b(p)).map_or("—".into(), |r| format!("{r:.3}")),
            Cell::Diff(a, b) => match (a(p).value(), b(p).value()) {
                (Some(a), Some(b)) => format!("{:+.2}", a - b),
                _ => "—".into(),
            },
        }
    }
}

fn cell(f: &Figure) -> String {
    match f {
        Figure::Value(v) if *v >= 100.0 => format!("{v:.1}"),
        Figure::Value(v) => format!("{v:.2}"),
        Figure::Missing(why) => format!("— ({})", why.replace('|', "/")),
    }
}

/// `ours / raw`, where both were measured.
fn ratio(ours: &Figure, raw: &Figure) -> Option<f64> {
    Some(ours.value()? / raw.value()?)
}

impl P2pReport {
    /// The one-way matrix (peer access on) and a row per ordered pair.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let sim = if self.simulated { " (simulated)" } else { "" };
        let _ = writeln!(s, "# Peer to peer{sim}\n");
        for (i, name) in self.devices.iter().enumerate() {
            let _ = writeln!(s, "- device {i}: {name}");
        }
        let _ = writeln!(
            s,
            "\n{} bytes per bandwidth copy, median of {} runs timed by events; GB/s = 10^9 B/s.\n",
            self.bytes, self.repeats
        );
        let n = self.devices.len();
        let _ = writeln!(s, "## One way, peer access on, gpu-sync `Stream::copy` (GB/s; row: source){sim}\n");
        let _ = write!(s, "| src \\ dst |");
        for j in 0..n {
            let _ = write!(s, " {j} |");
        }
        let _ = write!(s, "\n|---|");
        for _ in 0..n {
            let _ = write!(s, "---|");
        }
        s.push('\n');
        for i in 0..n {
            let _ = write!(s, "| {i} |");
            for j in 0..n {
                let v = self.pair(i as i32, j as i32).and_then(|p| p.copy_on_gbs.value());
                let _ = write!(s, " {} |", v.map_or("—".into(), |v| format!("{v:.1}")));
            }
            s.push('\n');
        }
        for t in &TABLES {
            let clock = match t.clock {
                TimedBy::Events => sim.to_owned(),
                TimedBy::Host if self.simulated => {
                    " (host clock: real CPU time of the software driver, not simulated)".to_owned()
                }
                TimedBy::Host => " (host clock)".to_owned(),
            };
            let _ = writeln!(s, "\n## {}{clock}\n", t.title);
            if t.lead == ["chain"] {
                let _ = writeln!(
                    s,
                    "{} hops a chain (`bump_u32` on 64 words, the buffer on the first device), queued \
                     behind a spin gate, timed by events on the first device; the host's time to \
                     submit the hops is in the host-time table.\n",
                    self.handoff_hops
                );
            }
            s.push('|');
            for h in t.lead.iter().chain(t.columns.iter().map(|(h, _)| h)) {
                let _ = write!(s, " {h} |");
            }
            s.push_str("\n|");
            for _ in 0..t.lead.len() + t.columns.len() {
                s.push_str("---|");
            }
            s.push('\n');
            for p in &self.pairs {
                let _ = write!(s, "| {} |", (t.pair)(p));
                for (_, c) in t.columns {
                    let _ = write!(s, " {} |", c.render(p));
                }
                s.push('\n');
            }
        }
        if !self.notes.is_empty() {
            s.push_str("\nNotes:\n");
            for n in &self.notes {
                let _ = writeln!(s, "- {n}");
            }
        }
        s
    }

    /// One row per pair and figure: `src,dst,link,figure,value,missing,clock`,
    /// where `clock` names the figure's clock (`simulated`, `device events`
    /// or `host clock`, as [`TimedBy::label`]).
    pub fn to_csv(&self) -> String {
        let mut s = String::from("src,dst,link,figure,value,missing,clock\n");
        for p in &self.pairs {
            for (h, clock, get) in COLUMNS {
                let (v, why) = match get(p) {
                    Figure::Value(v) => (v.to_string(), String::new()),
                    Figure::Missing(w) => (String::new(), w.replace(['"', ','], ";")),
                };
                let clock = clock.label(self.simulated);
                let _ = writeln!(s, "{},{},{},\"{h}\",{v},\"{why}\",{clock}", p.src, p.dst, p.link);
            }
        }
        s
    }

    /// A heat map of the one-way matrix (peer access on, gpu-sync's copy):
    /// one cell per ordered pair, darker for faster, GB/s written in it.
    pub fn heatmap_svg(&self) -> String {
        let n = self.devices.len();
        let (cell_px, margin) = (72.0, 60.0);
        let size = margin + cell_px * n as f64 + 20.0;
        let max = self.pairs.iter().filter_map(|p| p.copy_on_gbs.value()).fold(0.0_f64, f64::max);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{size}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n",
            h = size + 30.0
        );
        let sim = if self.simulated { " (simulated)" } else { "" };
        let _ = writeln!(
            s,
            "<text x=\"4\" y=\"16\">one way GB/s, peer access on{sim}; row: source, column: destination</text>"
        );
        for j in 0..n {
            let x = margin + cell_px * (j as f64 + 0.5);
            let _ = writeln!(s, "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{j}</text>", margin - 8.0);
            let y = margin + cell_px * (j as f64 + 0.5) + 4.0;
            let _ = writeln!(s, "<text x=\"{}\" y=\"{y}\" text-anchor=\"end\">{j}</text>", margin - 8.0);
        }
        for i in 0..n {
            for j in 0..n {
                let (x, y) = (margin + cell_px * j as f64, margin + cell_px * i as f64);
                let v = self.pair(i as i32, j as i32).and_then(|p| p.copy_on_gbs.value());
                let (fill, text) = match v {
                    Some(v) if max > 0.0 => {
                        let t = v / max;
                        let shade = (235.0 - 190.0 * t).round() as u8;
                        (format!("rgb({shade},{shade},255)"), format!("{v:.0}"))
                    }
                    _ => ("#eeeeee".to_owned(), "—".to_owned()),
                };
                let _ = writeln!(
                    s,
                    "<rect x=\"{x}\" y=\"{y}\" width=\"{cell_px}\" height=\"{cell_px}\" fill=\"{fill}\" stroke=\"white\"/>"
                );
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{text}</text>",
                    x + cell_px / 2.0,
                    y + cell_px / 2.0 + 4.0
                );
            }
        }
        s.push_str("</svg>\n");
        s
    }

    /// The pair `src → dst`.
    pub fn pair(&self, src: i32, dst: i32) -> Option<&PairResult> {
        self.pairs.iter().find(|p| p.src == src && p.dst == dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated two-device report whose host-clock figures are 777 µs
    /// and every event figure 5.
    fn simulated() -> P2pReport {
        let fig = |name: &str| if name.contains("host") { 777.0 } else { 5.0 };
        let names = [
            "copy_off_gbs",
            "copy_both_off_gbs",
            "copy_on_gbs",
            "copy_both_on_gbs",
            "raw_on_gbs",
            "raw_both_on_gbs",
            "sm_push_gbs",
            "sm_push_raw_gbs",
            "sm_pull_gbs",
            "sm_pull_raw_gbs",
            "latency_gpu_on_us",
            "latency_gpu_off_us",
            "latency_host_on_us",
            "handoff_gpu_us",
            "handoff_raw_gpu_us",
            "handoff_host_us",
            "handoff_raw_host_us",
        ];
        let figures: Vec<String> =
            names.iter().map(|n| format!("\"{n}\": {{\"value\": {}}}", fig(n))).collect();
        let json = format!(
            r#"{{"devices": ["a", "b"], "simulated": true, "bytes": 16, "repeats": 1, "handoff_hops": 2,
            "notes": [], "pairs": [{{"src": 0, "dst": 1, "link": "unknown", "can_access_peer": true,
            "performance_rank": null, {}}}]}}"#,
            figures.join(", ")
        );
        serde_json::from_str(&json).expect("a p2p report")
    }

    #[test]
    fn host_time_never_shares_a_table_with_simulated_figures() {
        let md = simulated().to_markdown();
        let mut host_sections = 0;
        for section in md.split("\n## ").skip(1) {
            let title = section.lines().next().unwrap_or("");
            if section.contains("777.0") {
                host_sections += 1;
                assert!(title.contains("host clock") && title.contains("not simulated"), "{section}");
                assert!(!section.contains("5.00"), "a simulated figure beside host time:\n{section}");
            } else {
                assert!(title.ends_with("(simulated)"), "{section}");
                assert!(!section.lines().any(|l| l.starts_with('|') && l.contains("host")), "{section}");
            }
        }
        assert_eq!(host_sections, 1, "{md}");
    }

    #[test]
    fn every_csv_row_names_its_clock() {
        let csv = simulated().to_csv();
        let mut lines = csv.lines();
        assert_eq!(lines.next(), Some("src,dst,link,figure,value,missing,clock"));
        let mut rows = 0;
        for line in lines {
            let clock = line.rsplit(',').next().unwrap_or("");
            let want = if line.contains(",777,") { "host clock" } else { "simulated" };
            assert_eq!(clock, want, "{line}");
            rows += 1;
        }
        assert_eq!(rows, COLUMNS.len());
    }
}
