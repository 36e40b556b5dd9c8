//! Figures of different clocks never share a column. On the simulator,
//! `gpu-bench sync-costs` times some rows with the host's clock (real CPU
//! time of the software driver) and others with events (simulated time):
//! each markdown table and each CSV row must say which clock its figures
//! are, and no table may hold both.

mod support;

use std::path::PathBuf;
use std::process::Command;

/// The rows of sync-costs timed with `std::time::Instant` (prefixes of the
/// benchmark column).
const HOST: [&str; 8] = [
    "1. host clock",
    "2. host clock",
    "timing event create",
    "sync-only event create",
    "event synchronize",
    "stream synchronize",
    "device synchronize",
    ".item() pattern",
];
/// The rows of sync-costs timed by events, simulated here.
const EVENTS: [&str; 2] = ["3. device events", "5 µs kernel: first call"];

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpu-bench-clocks-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The markdown tables of `text`: header cells and rows of cells.
fn tables(text: &str) -> Vec<(Vec<String>, Vec<Vec<String>>)> {
    let cells =
        |l: &str| l.trim().trim_matches('|').split('|').map(|c| c.trim().to_owned()).collect::<Vec<_>>();
    let lines: Vec<&str> = text.lines().collect();
    let (mut out, mut i) = (Vec::new(), 0);
    while i + 1 < lines.len() {
        if lines[i].starts_with('|') && lines[i + 1].starts_with("|---") {
            let header = cells(lines[i]);
            let mut rows = Vec::new();
            i += 2;
            while i < lines.len() && lines[i].starts_with('|') {
                rows.push(cells(lines[i]));
                i += 1;
            }
            out.push((header, rows));
        } else {
            i += 1;
        }
    }
    out
}

#[derive(PartialEq, Debug)]
enum Clock {
    Host,
    Simulated,
}

fn clock_of(benchmark: &str) -> Clock {
    if HOST.iter().any(|p| benchmark.starts_with(p)) {
        Clock::Host
    } else if EVENTS.iter().any(|p| benchmark.starts_with(p)) {
        Clock::Simulated
    } else {
        panic!("sync-costs row {benchmark:?} is of neither known clock: add it to HOST or EVENTS")
    }
}

#[test]
fn sync_costs_never_puts_host_and_simulated_figures_in_one_column() {
    let dir = scratch("sync-costs");
    let out = Command::new(support::gpu_bench())
        .env_remove("RUST_LOG")
        .args(["--driver", "sim", "--quick", "--out", dir.to_str().unwrap(), "sync-costs"])
        .output()
        .expect("gpu-bench runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    let mut seen = (0, 0);
    for (header, rows) in tables(&md) {
        // The columns holding timed figures, and the clock each header names.
        let timed: Vec<&String> = header
            .iter()
            .filter(|h| ["median", "IQR", "value", "throughput"].iter().any(|t| h.starts_with(t)))
            .collect();
        assert!(!timed.is_empty(), "a table without figures: {header:?}");
        for row in &rows {
            let want = match clock_of(&row[0]) {
                Clock::Host => {
                    seen.0 += 1;
                    "(host clock)"
                }
                Clock::Simulated => {
                    seen.1 += 1;
                    "(simulated)"
                }
            };
            for h in &timed {
                assert!(h.ends_with(want), "{:?} under a column `{h}`, not {want}:\n{md}", row[0]);
            }
        }
    }
    assert!(seen.0 >= HOST.len() && seen.1 >= EVENTS.len(), "rows missing ({seen:?}):\n{md}");
    // The banner no longer calls every figure simulated.
    assert!(md.contains("except those of the host-clock table"), "{md}");

    // CSV: each row names the clock of its value.
    let csv = std::fs::read_to_string(dir.join("results.csv")).expect("results.csv");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("benchmark,params,mode,counter,value,unit,noise,clock"));
    for line in lines {
        let (benchmark, clock) =
            (line.split(',').next().unwrap_or(""), line.rsplit(',').next().unwrap_or(""));
        let want = match clock_of(benchmark.trim_matches('"')) {
            Clock::Host => "host clock",
            Clock::Simulated => "simulated",
        };
        assert_eq!(clock, want, "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
