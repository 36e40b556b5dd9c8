//! The NCCL report as markdown, CSV and an SVG of busbw against size.

use super::{Collective, NcclReport, Row};
use std::fmt::Write as _;

/// A size as nccl-tests' `-b`/`-e` take it: `8 B`, `32 KiB`, `4 GiB`.
pub fn size_name(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 { format!("{v} {}", UNITS[u]) } else { format!("{v:.3} {}", UNITS[u]) }
}

/// Four significant figures.
fn sig4(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

impl NcclReport {
    /// A header, one table per collective headed by its launch mode
    /// (size, count, time, spread, algbw, busbw, the algorithm NCCL chose
    /// or `—`, and #wrong followed by the error if any: 8 columns), with
    /// the CUPTI check a second table after each (size, event µs, gpu µs,
    /// busy µs, event ÷ gpu), the summary and the notes.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let sim = if self.simulated { " (simulated)" } else { "" };
        let ranks = if self.ranks > 0 { self.ranks } else { self.devices.len() };
        let procs = if self.per_process { "one process per GPU" } else { "one process" };
        let _ = writeln!(s, "# NCCL collectives, {ranks} ranks, {procs}{sim}\n");
        for (name, ord) in self.devices.iter().zip(&self.ordinals) {
            let _ = writeln!(s, "- device {ord}: {name}");
        }
        let _ = writeln!(
            s,
            "- NCCL {}; {}; {} warmup, {} timed, {} checked iterations per size",
            self.nccl,
            self.dtype.name(),
            self.warmup_iters,
            self.iters,
            self.check_iters
        );
        if let Some(p) = self.peer_peak_gbs {
            let _ = writeln!(s, "- rows above the measured one-way peer peak, {p:.1} GB/s, are errors");
        }
        let mode = if self.blocking { "blocking" } else { "non-blocking" };
        let _ = writeln!(s, "- communicators: {mode}");
        let form = if self.in_place {
            "all-reduce in place (one buffer)"
        } else {
            "out of place (broadcast in place)"
        };
        let _ = writeln!(s, "- form: {form}");
        let _ = writeln!(s, "- captured in a CUDA graph: {}", self.graph);
        let _ = writeln!(s, "- algorithm and protocol: {}", self.algorithm);
        let _ = writeln!(s, "\nGB/s = 10^9 B/s; busbw as nccl-tests defines it (its PERFORMANCE notes).\n");
        if !self.summaries.is_empty() {
            let _ = writeln!(s, "## Summary{sim}\n");
            let _ = writeln!(s, "| collective | sizes | avg busbw GB/s | peak busbw GB/s | at | errors |");
            let _ = writeln!(s, "|---|---|---|---|---|---|");
            for m in &self.summaries {
                let errors = self.failed_rows().filter(|r| r.collective == m.collective).count();
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {errors} |",
                    m.collective,
                    m.rows,
                    sig4(m.avg_busbw_gbs),
                    sig4(m.peak_busbw_gbs),
                    size_name(m.peak_bytes)
                );
            }
        }
        for c in Collective::ALL {
            let rows: Vec<&Row> = self.rows.iter().filter(|r| r.collective == c).collect();
            if rows.is_empty() {
                continue;
            }
            // One launch mode per run: said in the heading (tables keep to 8
            // columns), and per row in the CSV and JSON.
            let _ = writeln!(s, "\n## {c}, {}{sim}\n", rows[0].launch.name());
            let _ = writeln!(
                s,
                "| size | count | time µs | spread % | algbw GB/s | busbw GB/s | algo | #wrong, error |"
            );
            let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
            for r in rows {
                let wrong = r.wrong.map_or("—".into(), |w| w.to_string());
                let err =
                    r.error.as_deref().map_or(String::new(), |e| format!(" **{}**", e.replace('|', "/")));
                let algo = r.algorithm.as_deref().map_or("—".into(), |a| a.replace('|', "/"));
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {:.1} | {} | {} | {algo} | {wrong}{err} |",
                    size_name(r.bytes),
                    r.count,
                    sig4(r.time_us),
                    r.spread_pct,
                    sig4(r.algbw_gbs),
                    sig4(r.busbw_gbs)
                );
            }
            self.cupti_table(&mut s, c);
        }
        if !self.notes.is_empty() {
            s.push_str("\nNotes:\n");
            for n in &self.notes {
                let _ = writeln!(s, "- {n}");
            }
        }
        s
    }

    /// Whether the rows carry the CUPTI check ([`super::NcclOptions::cupti`]).
    pub fn has_cupti(&self) -> bool {
        self.rows.iter().any(|r| r.gpu_us.is_some())
    }

    /// Collective `c`'s CUPTI check, when the run had it: a table of its
    /// own (the main one keeps to 8 columns) of the event time beside the
    /// kernels' span and busy time and the ratio.
    fn cupti_table(&self, s: &mut String, c: Collective) {
        let rows: Vec<&Row> = self.rows.iter().filter(|r| r.collective == c && r.gpu_us.is_some()).collect();
        if rows.is_empty() {
            return;
        }
        let _ =
            writeln!(s, "\n{c}, CUPTI check (per iteration; event ÷ gpu above 1: gaps between kernels):\n");
        let _ = writeln!(s, "| size | event µs | gpu µs | busy µs | event ÷ gpu |");
        let _ = writeln!(s, "|---|---|---|---|---|");
        for r in rows {
            let f = |v: Option<f64>| v.map_or("—".into(), sig4);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                size_name(r.bytes),
                sig4(r.time_us),
                f(r.gpu_us),
                f(r.busy_us),
                r.event_per_gpu().map_or("—".into(), |x| format!("{x:.2}"))
            );
        }
    }

    /// One row per collective and size; `algo` and `wrong` are empty
    /// where unknown. With the CUPTI check, three more columns: `gpu_us`,
    /// `busy_us`, `event_per_gpu`.
    pub fn to_csv(&self) -> String {
        let cupti = self.has_cupti();
        let mut s = String::from(
            "collective,launch,bytes,count,time_us,spread_pct,algbw_gbs,busbw_gbs,algo,wrong,error",
        );
        s.push_str(if cupti { ",gpu_us,busy_us,event_per_gpu\n" } else { "\n" });
        for r in &self.rows {
            let wrong = r.wrong.map_or(String::new(), |w| w.to_string());
            let err = r.error.as_deref().unwrap_or("").replace(['"', ','], ";");
            let algo = r.algorithm.as_deref().unwrap_or("").replace(['"', ','], ";");
            let _ = write!(
                s,
                "{},{},{},{},{},{},{},{},\"{algo}\",{wrong},\"{err}\"",
                r.collective,
                r.launch.name(),
                r.bytes,
                r.count,
                r.time_us,
                r.spread_pct,
                r.algbw_gbs,
                r.busbw_gbs
            );
            if cupti {
                let f = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
                let _ = write!(s, ",{},{},{}", f(r.gpu_us), f(r.busy_us), f(r.event_per_gpu()));
            }
            s.push('\n');
        }
        s
    }

    /// busbw against size (log 2 axis), one polyline per collective, rows
    /// in error marked with a red cross.
    pub fn busbw_svg(&self) -> String {
        let (w, h, left, right, top, bottom) = (720.0, 420.0, 60.0, 150.0, 30.0, 40.0);
        let (pw, ph) = (w - left - right, h - top - bottom);
        let sizes: Vec<f64> =
            self.rows.iter().filter(|r| r.bytes > 0).map(|r| (r.bytes as f64).log2()).collect();
        let (lo, hi) =
            sizes.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
        let (lo, hi) = if lo.is_finite() && hi > lo { (lo, hi) } else { (0.0, 1.0) };
        let top_bw = self.rows.iter().map(|r| r.busbw_gbs).fold(0.0_f64, f64::max).max(1e-9) * 1.05;
        let x = |b: u64| left + ((b.max(1) as f64).log2() - lo) / (hi - lo) * pw;
        let y = |v: f64| top + ph - v / top_bw * ph;
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n"
        );
        let sim = if self.simulated { " (simulated)" } else { "" };
        let _ = writeln!(
            s,
            "<text x=\"{left}\" y=\"18\">busbw GB/s against size, {} ranks, {}{sim}</text>",
            self.devices.len(),
            self.dtype.name()
        );
        let _ = writeln!(
            s,
            "<rect x=\"{left}\" y=\"{top}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#888\"/>"
        );
        for k in 0..=4 {
            let v = top_bw * f64::from(k) / 4.0;
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                left - 4.0,
                y(v) + 4.0,
                sig4(v)
            );
        }
        let mut e = lo.ceil() as i32;
        while f64::from(e) <= hi {
            let b = 2f64.powi(e) as u64;
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                x(b),
                h - bottom + 16.0,
                size_name(b).replace(' ', "")
            );
            e += 4;
        }
        const COLORS: [&str; 6] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
        for (k, c) in Collective::ALL.iter().enumerate() {
            let rows: Vec<&Row> = self.rows.iter().filter(|r| r.collective == *c).collect();
            if rows.is_empty() {
                continue;
            }
            let color = COLORS[k % COLORS.len()];
            let points: Vec<String> =
                rows.iter().map(|r| format!("{:.1},{:.1}", x(r.bytes), y(r.busbw_gbs))).collect();
            let _ = writeln!(
                s,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
                points.join(" ")
            );
            for r in rows.iter().filter(|r| r.error.is_some()) {
                let (cx, cy) = (x(r.bytes), y(r.busbw_gbs));
                let _ = writeln!(
                    s,
                    "<path d=\"M{} {} L{} {} M{} {} L{} {}\" stroke=\"red\" stroke-width=\"2\"/>",
                    cx - 4.0,
                    cy - 4.0,
                    cx + 4.0,
                    cy + 4.0,
                    cx - 4.0,
                    cy + 4.0,
                    cx + 4.0,
                    cy - 4.0
                );
            }
            let ly = top + 16.0 * k as f64 + 10.0;
            let _ = writeln!(
                s,
                "<line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"/><text x=\"{}\" y=\"{}\">{c}</text>",
                w - right + 10.0,
                w - right + 30.0,
                w - right + 36.0,
                ly + 4.0
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_figures_read_at_a_glance() {
        assert_eq!(size_name(8), "8 B");
        assert_eq!(size_name(32 << 10), "32 KiB");
        assert_eq!(size_name(4 << 30), "4 GiB");
        assert_eq!(size_name(960), "960 B");
        assert_eq!(sig4(328.456), "328.5");
        assert_eq!(sig4(13.6049), "13.60");
        assert_eq!(sig4(0.0123456), "0.01235");
    }

    fn row(c: Collective, algorithm: Option<&str>, error: Option<&str>) -> Row {
        Row {
            collective: c,
            launch: super::super::Launch::Eager,
            bytes: 4096,
            count: 1024,
            time_us: 10.0,
            spread_pct: 1.0,
            algbw_gbs: 0.4096,
            busbw_gbs: 0.4096,
            wrong: Some(0),
            error: error.map(str::to_owned),
            algorithm: algorithm.map(str::to_owned),
            gpu_us: None,
            busy_us: None,
        }
    }

    #[test]
    fn the_algorithm_column_names_the_choice_or_a_dash() {
        let report = NcclReport {
            schema: super::super::SCHEMA.into(),
            devices: vec!["a".into()],
            ranks: 2,
            per_process: true,
            ordinals: vec![0],
            simulated: false,
            nccl: "2.28.9".into(),
            dtype: super::super::Dtype::F32,
            warmup_iters: 1,
            iters: 1,
            check_iters: 1,
            peer_peak_gbs: None,
            blocking: false,
            in_place: false,
            graph: "eager".into(),
            algorithm: "from the log".into(),
            rows: vec![
                row(Collective::AllReduce, Some("RING/LL (2 ch), 3 of 4"), None),
                row(Collective::SendRecv, None, Some("busbw above the peak")),
            ],
            summaries: vec![],
            notes: vec![],
        };
        let md = report.to_markdown();
        // Rank 0's report of two processes names the clique, not its device.
        assert!(md.starts_with("# NCCL collectives, 2 ranks, one process per GPU\n"), "{md}");
        assert!(md.contains("| busbw GB/s | algo | #wrong, error |"), "{md}");
        assert!(md.contains("| RING/LL (2 ch), 3 of 4 | 0 |"), "{md}");
        assert!(md.contains("| — | 0 **busbw above the peak** |"), "{md}");
        assert!(md.lines().filter(|l| l.starts_with('|')).all(|l| l.matches('|').count() <= 9), "8 columns");
        let csv = report.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert!(lines[0].contains(",busbw_gbs,algo,wrong,"));
        assert!(lines[1].ends_with(",\"RING/LL (2 ch); 3 of 4\",0,\"\""), "{}", lines[1]);
        assert!(lines[2].contains(",\"\",0,\"busbw above the peak\""), "{}", lines[2]);
    }
}
