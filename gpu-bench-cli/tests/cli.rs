//! The `gpu-bench` binary on the simulator: every subcommand runs with
//! `--driver sim --quick` and writes a report of the versioned schema,
//! marked simulated, in all three formats; the exit codes mean what the docs
//! say (`compare`'s gate: tests/compare.rs).

mod support;

use gpu_bench::{Mode, Report};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    let mut c = Command::new(support::gpu_bench());
    c.env_remove("RUST_LOG");
    c
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpu-bench-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("gpu-bench runs")
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {:?}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn report_at(dir: &Path) -> Report {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    Report::from_json(&text).expect("a gpu-bench report")
}

#[test]
fn every_subcommand_runs_on_the_simulator() {
    // `roofline` writes its own schema (gpu-bench.roofline): tests/roofline.rs.
    for cmd in ["timer", "overhead", "sync-costs", "bandwidth", "overlap"] {
        let dir = scratch(cmd);
        let out = run(&["--driver", "sim", "--quick", "--out", dir.to_str().unwrap(), cmd]);
        ok(&out, cmd);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("SIMULATED TIMES"), "{cmd}: simulated times must be labelled:\n{stdout}");
        let r = report_at(&dir);
        assert!(r.simulated, "{cmd}");
        assert!(!r.records.is_empty(), "{cmd}: no records");
        assert!(std::fs::read_to_string(dir.join("report.md")).unwrap().starts_with("# "));
        let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
        assert!(
            csv.starts_with("benchmark,params,mode,counter,value,unit,noise,clock\n")
                && csv.lines().count() > 1
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn timer_check_finds_the_spin_kernel_length_in_every_mode() {
    let out = run(&["--driver", "sim", "--quick", "--format", "json", "timer"]);
    ok(&out, "timer");
    let r = Report::from_json(&String::from_utf8_lossy(&out.stdout)).expect("json on stdout");
    let spin = r.records.iter().find(|r| r.name == "spin").expect("spin record");
    for m in Mode::ALL {
        assert!(spin.mode(m).is_some(), "mode {} missing", m.name());
    }
    // The simulator's clock is exact: the hot median is the kernel's length.
    let err = spin.counter("hot vs expected").expect("hot vs expected").value;
    assert!(err.abs() < 1e-3, "hot median off by {err}");
    assert!(r.clock.as_ref().is_some_and(|c| (c.steady_mhz - 1980.0).abs() < 1.0), "{:?}", r.clock);
}

#[test]
fn exit_codes_mean_what_they_say() {
    // Bad arguments: 2.
    assert_eq!(run(&["roofline", "--array-mib", "lots"]).status.code(), Some(2));
    assert_eq!(run(&["compare", "a.json", "b.json", "--threshold", "x"]).status.code(), Some(2));
    assert_eq!(run(&["compare", "/nonexistent/a.json", "/nonexistent/b.json"]).status.code(), Some(2));
    // No driver: 3, one message naming libcuda and the simulator.
    let out = bin().env("CUDA_SYS_LIBCUDA", "/nonexistent/libcuda.so.1").args(["info"]).output().unwrap();
    if out.status.code() != Some(0) {
        assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("libcuda") && err.contains("--driver sim"), "{err}");
        assert_eq!(err.matches("gpu-bench:").count(), 1, "one message: {err}");
        // The hint names the command that was typed, and the library's
        // variable.
        assert!(err.contains("gpu-bench info --driver sim") && err.contains("GPU_SYNC_DRIVER=sim"), "{err}");
        let out = bin()
            .env("CUDA_SYS_LIBCUDA", "/nonexistent/libcuda.so.1")
            .env("GPU_BENCH_INVOKED_AS", "cargo xtask roofline")
            .args(["roofline", "--quick"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cargo xtask roofline --driver sim"), "{err}");
    }
}

#[test]
fn output_is_quiet_when_not_a_terminal() {
    // stdout is a pipe here: no progress bar escapes on stderr.
    let out = run(&["--driver", "sim", "--quick", "--format", "csv", "overhead"]);
    ok(&out, "overhead");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\u{1b}'), "terminal escapes on a pipe: {err:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("benchmark,"));
}

#[test]
fn the_prefetcher_overlaps_copies_and_compute_on_the_simulator() {
    // The simulator's copy and kernel times are exact, so the pipelined
    // schedule is reached when no wait covers more than it must: a wait on
    // upload *i* that took the copy stream's newest marker (recorded behind
    // upload *i + 1*, itself waiting for a compute) serialized the pipeline
    // (72 % of ideal here, 69 % on an H200) before each stream kept its
    // recent markers.
    let out = run(&["--driver", "sim", "--quick", "--format", "json", "overlap"]);
    ok(&out, "overlap");
    let r = Report::from_json(&String::from_utf8_lossy(&out.stdout)).expect("json on stdout");
    let pf = r.records.iter().find(|r| r.name.starts_with("prefetcher")).expect("prefetcher record");
    let eff = pf.counter("efficiency ideal / achieved").expect("efficiency").value;
    assert!(eff >= 0.95, "prefetcher efficiency {eff}");
    let pageable = r.records.iter().find(|r| r.name.starts_with("same loop, pageable")).expect("pageable");
    let saved = pageable.counter("time saved vs serial").expect("saved").value;
    assert!(saved <= 0.01, "pageable uploads must not overlap (saved {saved})");
}
