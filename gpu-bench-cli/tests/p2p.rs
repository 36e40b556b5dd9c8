//! `gpu-bench p2p` on two and four simulated devices: every ordered pair
//! measured and checked, the link taken only with peer access (the
//! simulator's model: the host link's 25 GB/s against NVLink's 450), ours
//! beside the raw loop, the SM copy beside its raw twin, the handoff of
//! both chains measured (the method checks each chain's buffer holds its
//! exact count, or the run fails; the simulator's race oracle reports
//! no unordered access), every markdown table at most eight
//! columns, all four outputs written; one device is a usage error; an odd
//! hop count is refused.

mod support;

use gpu_bench::p2p::P2pReport;
use std::process::Command;

fn p2p(devices: u32, extra: &[&str]) -> (std::process::Output, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("gpu-bench-p2p-{}-{devices}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(support::gpu_bench())
        .env_remove("RUST_LOG")
        .env("CUDA_SIM_DEVICES", devices.to_string())
        .args(["--driver", "sim", "p2p", "--bytes", "4194304", "--repeat", "3", "--out"])
        .arg(&dir)
        .args(extra)
        .output()
        .expect("gpu-bench runs");
    (out, dir)
}

fn check(devices: u32) {
    let (out, dir) = p2p(devices, &["--format", "json", "--handoff-hops", "6"]);
    assert!(out.status.success(), "{:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    // cuda-sim's race oracle logs every pair of unordered accesses: a chain
    // (ours or raw) missing a wait shows up here.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("data race"), "{err}");
    let r: P2pReport = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let n = devices as usize;
    assert!(r.simulated && r.devices.len() == n);
    assert_eq!(r.pairs.len(), n * (n - 1), "every ordered pair");
    for p in &r.pairs {
        let on = p.copy_on_gbs.value().expect("copy with peer access");
        let off = p.copy_off_gbs.value().expect("staged copy");
        assert!(on > 10.0 * off, "{} -> {}: the link only with access: {on} vs {off}", p.src, p.dst);
        let both = p.copy_both_on_gbs.value().expect("both ways");
        assert!(both > 1.9 * on, "both ways use both directions: {both} vs {on}");
        let raw = p.raw_on_gbs.value().expect("raw loop");
        assert!((on / raw - 1.0).abs() < 0.01, "ours {on} vs raw {raw}");
        assert!(p.latency_gpu_on_us.value().is_some() && p.latency_host_on_us.value().is_some());
        for (ours, raw) in [(&p.sm_push_gbs, &p.sm_push_raw_gbs), (&p.sm_pull_gbs, &p.sm_pull_raw_gbs)] {
            let (o, r) = (ours.value().expect("SM copy"), raw.value().expect("its raw twin"));
            assert!((o / r - 1.0).abs() < 0.01, "{} -> {}: SM ours {o} vs raw {r}", p.src, p.dst);
        }
        for f in [&p.handoff_gpu_us, &p.handoff_raw_gpu_us, &p.handoff_host_us, &p.handoff_raw_host_us] {
            let v = f.value().unwrap_or_else(|| panic!("{} -> {}: handoff figure {f:?}", p.src, p.dst));
            assert!(v.is_finite() && v >= 0.0, "{v}");
        }
        assert!(p.handoff_host_us.value() > Some(0.0) && p.handoff_raw_host_us.value() > Some(0.0));
    }
    assert_eq!(r.handoff_hops, 6);
    let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    for line in md.lines().filter(|l| l.starts_with('|')) {
        let cols = line.matches('|').count() - 1;
        assert!(cols <= 8, "a table of {cols} columns: {line}");
    }
    assert!(md.contains("Cross-device handoff") && md.contains("0 → 1 → 0"), "{md}");
    for f in ["report.md", "results.json", "results.csv", "heatmap.svg"] {
        assert!(dir.join(f).is_file(), "{f} written");
    }
    let svg = std::fs::read_to_string(dir.join("heatmap.svg")).expect("svg");
    assert_eq!(svg.matches("<rect").count(), n * n, "one cell per (src, dst)");
    let csv = std::fs::read_to_string(dir.join("results.csv")).expect("csv");
    assert_eq!(csv.lines().count(), 1 + n * (n - 1) * 17, "a row per pair and figure");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_ordered_pair_of_two_simulated_devices() {
    check(2);
}

#[test]
fn every_ordered_pair_of_four_simulated_devices() {
    check(4);
}

#[test]
fn one_device_is_a_usage_error() {
    let (out, _) = p2p(1, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("two devices"));
}

#[test]
fn an_odd_handoff_is_refused() {
    let (out, dir) = p2p(2, &["--handoff-hops", "7"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("odd"));
    assert!(!dir.join("report.md").exists());
}
