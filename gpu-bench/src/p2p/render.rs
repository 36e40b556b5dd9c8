//! The p2p report as markdown, CSV and a heat-map SVG.

use super::{Figure, P2pReport, PairResult};
use std::fmt::Write as _;

/// The columns of the pair table: header, unit, accessor.
type Column = (&'static str, fn(&PairResult) -> &Figure);

const COLUMNS: [Column; 17] = [
    ("copy off (staged) GB/s", |p| &p.copy_off_gbs),
    ("copy off both ways GB/s", |p| &p.copy_both_off_gbs),
    ("copy on GB/s", |p| &p.copy_on_gbs),
    ("copy on both ways GB/s", |p| &p.copy_both_on_gbs),
    ("raw cuMemcpyPeerAsync on GB/s", |p| &p.raw_on_gbs),
    ("raw both ways GB/s", |p| &p.raw_both_on_gbs),
    ("SM push GB/s", |p| &p.sm_push_gbs),
    ("SM push raw GB/s", |p| &p.sm_push_raw_gbs),
    ("SM pull GB/s", |p| &p.sm_pull_gbs),
    ("SM pull raw GB/s", |p| &p.sm_pull_raw_gbs),
    ("4 B latency on, GPU µs", |p| &p.latency_gpu_on_us),
    ("4 B latency off, GPU µs", |p| &p.latency_gpu_off_us),
    ("4 B round trip on, host µs", |p| &p.latency_host_on_us),
    ("handoff GPU µs/hop", |p| &p.handoff_gpu_us),
    ("handoff raw GPU µs/hop", |p| &p.handoff_raw_gpu_us),
    ("handoff host µs/hop", |p| &p.handoff_host_us),
    ("handoff raw host µs/hop", |p| &p.handoff_raw_host_us),
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

/// A pair table: its title, the headers of the columns naming the pair,
/// those cells, and the figures' columns.
struct Table {
    title: &'static str,
    lead: &'static [&'static str],
    pair: fn(&PairResult) -> String,
    columns: &'static [(&'static str, Cell)],
}

fn one_way(p: &PairResult) -> String {
    format!("{} → {}", p.src, p.dst)
}

/// The pair tables, each at most eight columns.
const TABLES: [Table; 5] = [
    Table {
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
        title: "4-byte latency (µs)",
        lead: &["pair"],
        pair: one_way,
        columns: &[
            ("GPU, access on", Cell::Fig(|p| &p.latency_gpu_on_us)),
            ("GPU, access off", Cell::Fig(|p| &p.latency_gpu_off_us)),
            ("host round trip, on", Cell::Fig(|p| &p.latency_host_on_us)),
        ],
    },
    Table {
        title: "Cross-device handoff, gpu-sync's automatic waits against raw events and waits (µs per hop)",
        lead: &["chain"],
        pair: |p| format!("{} → {} → {}", p.src, p.dst, p.src),
        columns: &[
            ("GPU ours", Cell::Fig(|p| &p.handoff_gpu_us)),
            ("GPU raw", Cell::Fig(|p| &p.handoff_raw_gpu_us)),
            ("GPU ours − raw", Cell::Diff(|p| &p.handoff_gpu_us, |p| &p.handoff_raw_gpu_us)),
            ("host ours", Cell::Fig(|p| &p.handoff_host_us)),
            ("host raw", Cell::Fig(|p| &p.handoff_raw_host_us)),
            ("host ours / raw", Cell::Ratio(|p| &p.handoff_host_us, |p| &p.handoff_raw_host_us)),
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
            let _ = writeln!(s, "\n## {}{sim}\n", t.title);
            if t.lead == ["chain"] {
                let _ = writeln!(
                    s,
                    "{} hops a chain (`bump_u32` on 64 words, the buffer on the first device), queued \
                     behind a spin gate, timed by events on the first device; host: the hops' \
                     submission.\n",
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

    /// One row per pair and figure: `src,dst,link,figure,value,missing`.
    pub fn to_csv(&self) -> String {
        let mut s = String::from("src,dst,link,figure,value,missing\n");
        for p in &self.pairs {
            for (h, get) in COLUMNS {
                let (v, why) = match get(p) {
                    Figure::Value(v) => (v.to_string(), String::new()),
                    Figure::Missing(w) => (String::new(), w.replace(['"', ','], ";")),
                };
                let _ = writeln!(s, "{},{},{},\"{h}\",{v},\"{why}\"", p.src, p.dst, p.link);
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
