//! `gpu-bench compare` as a CI gate, run as a user runs it: exit 0 only
//! when something was compared and nothing regressed, 1 on a regression,
//! 2 for every refusal (a bad threshold, a bad time, nothing in common,
//! nothing with enough samples, another GPU, driver or schema), each with
//! a message naming what is wrong.

mod support;

use gpu_bench::Report;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn bin() -> Command {
    let mut c = Command::new(support::gpu_bench());
    c.env_remove("RUST_LOG");
    c
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpu-bench-compare-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("a scratch folder");
    d
}

fn compare(old: &Path, new: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let out: Output = bin().arg("compare").arg(old).arg(new).args(extra).output().expect("gpu-bench runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A timer report on the simulator with 30 samples a mode (enough for an
/// interval), made once for the file's tests.
fn timer_report() -> &'static Report {
    static R: OnceLock<Report> = OnceLock::new();
    R.get_or_init(|| {
        let dir = scratch("timer");
        let out = bin()
            .args(["--driver", "sim", "--quick", "--min-samples", "30", "--max-samples", "30", "--out"])
            .arg(&dir)
            .arg("timer")
            .output()
            .expect("gpu-bench runs");
        assert!(out.status.success(), "timer: {}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
        Report::from_json(&text).expect("a report")
    })
}

fn write(dir: &Path, name: &str, r: &Report) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, gpu_bench::render::json(r)).expect("written");
    p
}

fn edited(dir: &Path, name: &str, f: impl FnOnce(&mut Report)) -> PathBuf {
    let mut r = timer_report().clone();
    f(&mut r);
    write(dir, name, &r)
}

#[test]
fn identical_runs_pass_a_regression_fails_and_a_threshold_above_it_passes() {
    let dir = scratch("gate");
    let old = write(&dir, "old.json", timer_report());
    let (code, out, err) = compare(&old, &old, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("| same |") && out.contains("too few samples"), "{out}");
    // Every sample 20 % slower, except the one-sample first calls 3x
    // faster: a regression, exit 1; the first calls decide nothing.
    let slow = edited(&dir, "slow.json", |r| {
        for m in r.records.iter_mut().flat_map(|r| r.modes.iter_mut()) {
            let f = if m.samples.len() == 1 { 1.0 / 3.0 } else { 1.2 };
            m.samples.iter_mut().for_each(|x| *x *= f);
        }
    });
    let (code, out, _) = compare(&old, &slow, &["--threshold", "5%"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("SLOWER") && !out.contains("faster"), "{out}");
    let (code, out, _) = compare(&old, &slow, &["--threshold", "0.3"]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out, _) = compare(&old, &slow, &["--format", "json"]);
    assert_eq!(code, Some(1));
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(v["comparisons"].as_array().is_some_and(|a| !a.is_empty()), "{out}");
}

#[test]
fn every_refusal_is_exit_2_naming_the_problem() {
    let dir = scratch("refusals");
    let old = write(&dir, "old.json", timer_report());
    for (t, says) in [
        ("5", "ambiguous"),
        ("50", "ambiguous"),
        ("1", "ambiguous"),
        ("0", "not in (0, 1)"),
        ("-3%", "not in (0%, 100%)"),
        ("abc", "expected a percentage"),
    ] {
        let (code, _, err) = compare(&old, &old, &["--threshold", t]);
        assert_eq!(code, Some(2), "--threshold {t}: {err}");
        assert!(err.contains(says), "--threshold {t}: {err}");
    }
    let key = timer_report().records[0].key();
    for (x, name) in [("-1e-5", "negative"), ("0", "zero")] {
        let bad = edited(&dir, &format!("{name}.json"), |r| {
            r.records[0].modes[1].samples[2] = x.parse().expect("a number");
        });
        let (code, _, err) = compare(&old, &bad, &[]);
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(err.contains(&format!("new: {key}")) && err.contains("sample 2"), "{name}: {err}");
    }
    // NaN and infinity do not survive JSON (written as null): unreadable.
    let text = std::fs::read_to_string(&old).unwrap();
    let at = text.find("\"samples\": [").expect("samples") + "\"samples\": [".len();
    let first_value_end = at + text[at..].find([',', ']']).expect("a value");
    let nan = dir.join("nan.json");
    std::fs::write(&nan, format!("{}null{}", &text[..at], &text[first_value_end..])).unwrap();
    let (code, _, err) = compare(&old, &nan, &[]);
    assert_eq!(code, Some(2), "{err}");
    // Nothing in common, no records: nothing compared.
    let other = edited(&dir, "other.json", |r| r.records.iter_mut().for_each(|r| r.name = "other".into()));
    let empty = edited(&dir, "empty.json", |r| r.records.clear());
    for new in [&other, &empty] {
        let (code, _, err) = compare(&old, new, &[]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("nothing compared"), "{err}");
    }
    // Only one-sample modes in common: nothing had an interval.
    let firsts = edited(&dir, "firsts.json", |r| {
        r.records.iter_mut().for_each(|r| r.modes.retain(|m| m.samples.len() == 1));
    });
    let (code, _, err) = compare(&firsts, &firsts, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("enough samples"), "{err}");
}

#[test]
fn other_gpus_drivers_and_schemas_are_refused_unless_allowed() {
    let dir = scratch("env");
    let old = write(&dir, "old.json", timer_report());
    let gpu = edited(&dir, "gpu.json", |r| r.device.name = "another GPU".into());
    let driver = edited(&dir, "driver.json", |r| r.device.driver_cuda_version = "12.0".into());
    for new in [&gpu, &driver] {
        let (code, _, err) = compare(&old, new, &[]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("different environments") && err.contains("--allow-different-env"), "{err}");
        let (code, out, err) = compare(&old, new, &["--allow-different-env"]);
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains("**different environment**"), "{out}");
    }
    // A timer report against a roofline: refused even when allowed.
    let (code, _, err) = compare(&old, &roofline(), &["--allow-different-env"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot compare"), "{err}");
}

fn roofline() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/results/2026-11-26-final/verify-after-review/roofline/results.json")
}

#[test]
fn the_roofline_results_compare_per_ceiling() {
    let dir = scratch("roofline");
    let old = roofline();
    let (code, out, err) = compare(&old, &old, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("| HBM read | ceiling |") && out.contains("| same |"), "{out}");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&old).unwrap()).unwrap();
    let read = v["ceilings"][0]["value"].as_f64().expect("a value");
    v["ceilings"][0]["value"] = (read * 0.9).into();
    let lower = dir.join("lower.json");
    std::fs::write(&lower, serde_json::to_string(&v).unwrap()).unwrap();
    let (code, out, _) = compare(&old, &lower, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("SLOWER"), "{out}");
    v["version"] = 1.into();
    let v1 = dir.join("v1.json");
    std::fs::write(&v1, serde_json::to_string(&v).unwrap()).unwrap();
    let (code, _, err) = compare(&old, &v1, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("gpu-bench.roofline v1"), "{err}");
}
