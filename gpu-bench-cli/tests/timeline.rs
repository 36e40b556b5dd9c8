//! `gpu-bench timeline` on the simulator writes its five files; the trace
//! parses back with both runs, their chunks, the three streams and a flow
//! per device span; the table has the pipeline's kernels.

use std::path::PathBuf;
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpu-bench-timeline-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn check_folder(dir: &std::path::Path) {
    for f in ["trace.json", "table.md", "table.json", "timeline.svg", "summary.json"] {
        assert!(dir.join(f).is_file(), "{f} missing in {}", dir.display());
    }
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("trace.json")).unwrap()).expect("trace JSON");
    let ev = trace["traceEvents"].as_array().unwrap();
    let slices = |cat: &str| ev.iter().filter(|e| e["ph"] == "X" && e["cat"] == cat).count();
    for name in ["pinned", "pageable"] {
        assert!(ev.iter().any(|e| e["cat"] == "range" && e["name"] == name), "range {name}");
    }
    // 4 chunks x 2 runs: a scale and a spin each, an upload and a download
    // each; then two graph replays (one span each with events, their two
    // kernels each with CUPTI).
    let source = trace["otherData"]["source"].as_str().unwrap().to_owned();
    if source == "cupti" {
        assert_eq!(slices("kernel"), 20);
        assert_eq!(slices("graph launch"), 0);
    } else {
        assert_eq!(slices("kernel"), 16);
        assert_eq!(slices("graph launch"), 2);
    }
    assert_eq!(slices("memcpy"), 16);
    let streams = ev
        .iter()
        .filter(|e| e["ph"] == "M" && e["args"]["name"].as_str().is_some_and(|n| n.starts_with("stream")))
        .count();
    assert!(streams >= 3, "{streams} stream tracks");
    let flows = ev.iter().filter(|e| e["ph"] == "s").count();
    assert_eq!(flows, ev.iter().filter(|e| e["ph"] == "f").count());
    assert!(flows >= 32);
    let table: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("table.json")).unwrap()).unwrap();
    let rows = table["rows"].as_array().unwrap();
    for k in ["scale_f32", "spin_cycles"] {
        let r =
            rows.iter().find(|r| r["name"] == k && r["kind"] == "op").unwrap_or_else(|| panic!("{k} row"));
        assert_eq!(r["calls"], 8);
    }
    let replay = rows.iter().find(|r| r["name"] == "graph launch").expect("graph launch row");
    assert_eq!(replay["calls"], 2);
    let svg = std::fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("SIMULATED TIMES"));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    // Overlap per run (its figures are simulated here: the simulator's
    // device clock is not the host's, so only their presence is checked).
    for run in ["pinned", "pageable"] {
        for f in ["wall_s", "copy_s", "kernel_s", "overlap_s", "overlap_of_copy"] {
            assert!(summary["runs"][run][f].is_f64(), "{run}.{f}");
        }
    }
    assert!(summary["spin_cycles"].as_u64().unwrap() > 0);
}

#[test]
fn timeline_writes_its_files_on_the_simulator() {
    let dir = scratch("flag");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-bench"))
        .env_remove("RUST_LOG")
        .args(["--driver", "sim", "--out", dir.to_str().unwrap(), "timeline", "--backend", "events"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    check_folder(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn timeline_takes_the_driver_from_the_environment_and_writes_both_backends() {
    let dir = scratch("env");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-bench"))
        .env_remove("RUST_LOG")
        .env_remove("GPU_BENCH_DRIVER")
        .env("GPU_SYNC_DRIVER", "sim")
        .args(["--out", dir.to_str().unwrap(), "timeline", "--backend", "both", "--sort-by", "calls"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    check_folder(&dir.join("events"));
    check_folder(&dir.join("cupti"));
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cupti/table.json")).unwrap()).unwrap();
    assert_eq!(t["sort_by"], "calls");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_sort_column_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-bench"))
        .args(["--driver", "sim", "timeline", "--sort-by", "speed"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a column"));
}

#[test]
fn check_timer_puts_kernel_mode_beside_each_backends_table_exactly_on_the_simulator() {
    let dir = scratch("check");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-bench"))
        .env_remove("RUST_LOG")
        .args([
            "--driver",
            "sim",
            "--out",
            dir.to_str().unwrap(),
            "timeline",
            "--backend",
            "both",
            "--check-timer",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("compare.json")).unwrap()).unwrap();
    let rows = c["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "two kernels x two backends");
    // The simulator's times are exact: every backend's table reads what
    // kernel mode reads.
    for r in rows {
        assert!(r["relative_difference"].as_f64().unwrap().abs() < 1e-9, "{r}");
        assert!(r["pageable_run_relative_difference"].as_f64().unwrap().abs() < 1e-9, "{r}");
        assert_eq!(r["calls"], 8);
    }
    assert!(std::fs::read_to_string(dir.join("compare.md")).unwrap().contains("| spin_cycles |"));
    let _ = std::fs::remove_dir_all(&dir);
}
