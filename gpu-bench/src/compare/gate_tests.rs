//! The gate's refusals, its verdicts, and its false-verdict rate and power
//! on synthetic reports drawn from seeded lognormal noise.

use super::*;
use crate::record::{Mode, ModeResult, Record};
use crate::settings::Settings;
use crate::stats::{Summary, XorShift};

fn mode(mode: Mode, samples: Vec<f64>) -> ModeResult {
    ModeResult {
        mode,
        summary: Summary::of(&samples).unwrap_or_else(Summary::empty),
        samples,
        runs_per_sample: 1,
        stop: None,
        unmet: vec![],
        warmup_runs: 0,
        warmup_steady: true,
        low_clock_samples: 0,
        warmup_s: 0.0,
        sampling_s: 0.0,
        counters: vec![],
    }
}

fn record(name: &str, modes: Vec<ModeResult>) -> Record {
    let mut r = Record::new(name, &[("size", "1".into())]);
    r.modes = modes;
    r
}

fn device(name: &str) -> crate::info::DeviceInfo {
    crate::info::DeviceInfo {
        ordinal: 0,
        name: name.into(),
        compute_capability: (9, 0),
        sm_count: 1,
        sm_clock_mhz: 1.0,
        memory_clock_mhz: 1.0,
        memory_bus_bits: 1,
        l2_bytes: 1,
        total_memory_bytes: 1,
        driver_cuda_version: "13.0".into(),
        driver_origin: "test".into(),
        simulated: false,
        theoretical_bandwidth_gbs: 1.0,
        pcie: None,
    }
}

fn timer(records: Vec<Record>) -> Results {
    let mut r = Report::new("t", device("H100"), Settings::default());
    r.records = records;
    Results::Timer(Box::new(r))
}

/// A uniform draw in (0, 1).
fn uniform(rng: &mut XorShift) -> f64 {
    (rng.below(1 << 53) as f64 + 0.5) / (1u64 << 53) as f64
}

/// `n` lognormal samples around `level`, log-sd `sigma` (Box–Muller).
fn lognormal(rng: &mut XorShift, level: f64, sigma: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let (u, v) = (uniform(rng), uniform(rng));
            let z = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
            level * (sigma * z).exp()
        })
        .collect()
}

const OPTS: GateOptions = GateOptions { threshold: 0.05, allow_different_env: false };

#[test]
fn thresholds_are_a_percentage_or_a_fraction_and_nothing_else() {
    assert_eq!(parse_threshold("5%"), Ok(0.05));
    assert_eq!(parse_threshold(" 2.5 % "), Ok(0.025));
    assert_eq!(parse_threshold("0.05"), Ok(0.05));
    for (bad, says) in [
        ("5", "ambiguous"),
        ("50", "ambiguous"),
        ("1", "ambiguous"),
        ("0", "not in (0, 1)"),
        ("-0.1", "not in (0, 1)"),
        ("-3%", "not in (0%, 100%)"),
        ("0%", "not in (0%, 100%)"),
        ("100%", "not in (0%, 100%)"),
        ("abc", "expected a percentage"),
        ("x%", "not a percentage"),
        ("NaN", "expected a percentage"),
        ("inf%", "not a percentage"),
    ] {
        let e = parse_threshold(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
    let e = compare(&timer(vec![]), &timer(vec![]), GateOptions { threshold: 5.0, ..OPTS }).unwrap_err();
    assert!(matches!(e, GateError::Threshold(_)), "{e}");
}

#[test]
fn bad_times_are_refused_with_the_record_named() {
    let good = timer(vec![record("k", vec![mode(Mode::Hot, vec![1e-5; 20])])]);
    for x in [f64::NAN, f64::INFINITY, -1e-5, 0.0] {
        let mut s = vec![1e-5; 20];
        s[3] = x;
        let bad = timer(vec![record("k", vec![mode(Mode::Hot, s)])]);
        let e = compare(&good, &bad, OPTS).unwrap_err();
        assert!(matches!(e, GateError::BadValue(_)), "{x}: {e}");
        let e = e.to_string();
        assert!(e.starts_with("new: k{size=1} hot: sample 3 is"), "{x}: {e}");
        let e = compare(&bad, &good, OPTS).unwrap_err().to_string();
        assert!(e.starts_with("old: k{size=1} hot"), "{x}: {e}");
    }
    // 0 → 10 µs is not "same": the zero is refused.
    let zero = timer(vec![record("k", vec![mode(Mode::Hot, vec![0.0; 20])])]);
    assert!(matches!(compare(&zero, &good, OPTS), Err(GateError::BadValue(_))));
}

#[test]
fn nothing_compared_is_an_error_not_a_pass() {
    let a = timer(vec![record("a", vec![mode(Mode::Hot, vec![1.0; 30])])]);
    let b = timer(vec![record("b", vec![mode(Mode::Hot, vec![1.0; 30])])]);
    for (o, n) in [(&a, &b), (&timer(vec![]), &timer(vec![])), (&a, &timer(vec![]))] {
        let e = compare(o, n, OPTS).unwrap_err();
        assert!(matches!(e, GateError::NothingCompared(_)), "{e}");
    }
    // Only one-sample modes in common: nothing has an interval, no verdict.
    let first = |x: f64| timer(vec![record("k", vec![mode(Mode::FirstCall, vec![x])])]);
    let e = compare(&first(1.0), &first(2.0), OPTS).unwrap_err();
    assert!(e.to_string().contains("enough samples"), "{e}");
}

#[test]
fn a_one_sample_mode_is_reported_and_never_decides() {
    let mut rng = XorShift::new(11);
    let mut run = |first: f64| {
        let hot = lognormal(&mut rng, 1e-5, 0.01, 100);
        timer(vec![record("k", vec![mode(Mode::FirstCall, vec![first]), mode(Mode::Hot, hot)])])
    };
    // The first call 3x slower: jitter of one sample, no verdict.
    let c = compare(&run(1e-3), &run(3e-3), OPTS).unwrap();
    assert_eq!(c.comparisons.len(), 2);
    let fc = c.comparisons.iter().find(|c| c.what == "first-call").unwrap();
    assert_eq!((fc.verdict, fc.interval), (Verdict::TooFewSamples, None));
    assert_eq!(c.comparisons.iter().find(|c| c.what == "hot").unwrap().verdict, Verdict::Same);
    assert!(!c.regressed());
    assert!(c.to_markdown().contains("too few samples"), "{}", c.to_markdown());
}

#[test]
fn slower_faster_and_same_at_the_threshold() {
    let mut rng = XorShift::new(5);
    let mut at =
        |level: f64| timer(vec![record("k", vec![mode(Mode::Hot, lognormal(&mut rng, level, 0.01, 200))])]);
    let old = at(1.0);
    let v = |new: &Results, t: f64| {
        compare(&old, new, GateOptions { threshold: t, ..OPTS }).unwrap().comparisons[0].verdict
    };
    assert_eq!(v(&at(1.10), 0.05), Verdict::Slower);
    assert_eq!(v(&at(0.90), 0.05), Verdict::Faster);
    assert_eq!(v(&at(1.0), 0.05), Verdict::Same);
    // A 3 % slowdown is real but under a 5 % threshold.
    let slight = at(1.03);
    assert_eq!(v(&slight, 0.05), Verdict::Same);
    assert_eq!(v(&slight, 0.01), Verdict::Slower);
}

#[test]
fn different_environments_are_refused_unless_allowed() {
    let rec = || vec![record("k", vec![mode(Mode::Hot, vec![1e-5; 30])])];
    let a = timer(rec());
    let with = |f: &dyn Fn(&mut Report)| {
        let mut r = Report::new("t", device("H100"), Settings::default());
        r.records = rec();
        f(&mut r);
        Results::Timer(Box::new(r))
    };
    for (b, names) in [
        (with(&|r| r.device.name = "H200".into()), "GPU: old H100 (sm_90), new H200 (sm_90)"),
        (with(&|r| r.device.driver_cuda_version = "12.8".into()), "CUDA driver: old 13.0, new 12.8"),
        (with(&|r| r.schema_version = 2), "schema: old gpu-bench.report v3, new gpu-bench.report v2"),
    ] {
        let e = compare(&a, &b, OPTS).unwrap_err();
        assert!(matches!(e, GateError::DifferentEnv(_)), "{e}");
        assert!(e.to_string().contains(names) && e.to_string().contains("--allow-different-env"), "{e}");
        let c = compare(&a, &b, GateOptions { allow_different_env: true, ..OPTS }).unwrap();
        assert_eq!(c.env_differences, [names]);
        assert!(c.to_markdown().contains(&format!("**different environment**: {names}")));
    }
}

/// The committed H100 roofline, or `None` (the test then skips, saying so)
/// where the sources are not there: a test binary copied to the GPU machine.
fn roofline() -> Option<(RooflineReport, u32)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/results/2026-11-26-final/verify-after-review/roofline/results.json"
    );
    let Ok(text) = std::fs::read_to_string(path) else {
        println!("skipped: sources not found at {path}");
        return None;
    };
    match Results::from_json(&text).expect("reads") {
        Results::Roofline(r, v) => Some((*r, v)),
        Results::Timer(_) => panic!("a roofline"),
    }
}

#[test]
fn the_roofline_is_compared_per_ceiling_a_lower_ceiling_regressing() {
    let Some((r, v)) = roofline() else { return };
    assert_eq!(v, 2);
    let same =
        compare(&Results::Roofline(Box::new(r.clone()), v), &Results::Roofline(Box::new(r.clone()), v), OPTS)
            .unwrap();
    assert_eq!(same.comparisons.len(), r.ceilings.len());
    assert!(same.comparisons.iter().all(|c| matches!(c.verdict, Verdict::Same | Verdict::TooFewSamples)));
    assert!(same.comparisons.iter().any(|c| c.verdict == Verdict::Same));
    assert!(!same.regressed());
    let scaled = |f: f64| {
        let mut n = r.clone();
        n.ceilings[0].value *= f;
        compare(&Results::Roofline(Box::new(r.clone()), v), &Results::Roofline(Box::new(n), v), OPTS).unwrap()
    };
    let low = scaled(0.90);
    assert_eq!(low.comparisons[0].verdict, Verdict::Slower, "{}", low.to_markdown());
    assert!(low.regressed());
    assert_eq!(scaled(1.10).comparisons[0].verdict, Verdict::Faster);
    assert_eq!(scaled(0.98).comparisons[0].verdict, Verdict::Same);
    // A bad ceiling is named; a timer report is not a roofline.
    let mut bad = r.clone();
    bad.ceilings[1].value = -1.0;
    let e = compare(&Results::Roofline(Box::new(r.clone()), v), &Results::Roofline(Box::new(bad), v), OPTS)
        .unwrap_err();
    assert!(e.to_string().contains(&format!("new: ceiling {:?}", r.ceilings[1].name)), "{e}");
    let t = timer(vec![record("k", vec![mode(Mode::Hot, vec![1e-5; 30])])]);
    let e = compare(
        &t,
        &Results::Roofline(Box::new(r.clone()), v),
        GateOptions { allow_different_env: true, ..OPTS },
    )
    .unwrap_err();
    assert!(e.to_string().contains("cannot compare"), "{e}");
    // Another version is another environment.
    let e = compare(&Results::Roofline(Box::new(r.clone()), 1), &Results::Roofline(Box::new(r), v), OPTS)
        .unwrap_err();
    assert!(e.to_string().contains("gpu-bench.roofline v1"), "{e}");
}

/// Reports of `rows` rows (hot mode, `n` samples each, the rows at
/// different levels), every sample lognormal with log-sd `sigma`; row
/// `planted` (if any) `factor` slower in the new report.
fn pair(
    rng: &mut XorShift,
    rows: usize,
    n: usize,
    sigma: f64,
    planted: Option<(usize, f64)>,
) -> (Results, Results) {
    let mut old = Vec::new();
    let mut new = Vec::new();
    for i in 0..rows {
        let level = 1e-6 * (1.0 + i as f64);
        let f = planted.filter(|p| p.0 == i).map_or(1.0, |p| p.1);
        old.push(record(&format!("b{i}"), vec![mode(Mode::Hot, lognormal(rng, level, sigma, n))]));
        new.push(record(&format!("b{i}"), vec![mode(Mode::Hot, lognormal(rng, level * f, sigma, n))]));
    }
    (timer(old), timer(new))
}

/// Reports (of `pairs`) with any verdict other than same.
fn false_reports(pairs: usize, threshold: f64, seed: u64) -> usize {
    let mut rng = XorShift::new(seed);
    (0..pairs)
        .filter(|_| {
            let (o, n) = pair(&mut rng, 30, 50, 0.02, None);
            let c = compare(&o, &n, GateOptions { threshold, ..OPTS }).unwrap();
            c.comparisons.iter().any(|c| c.verdict != Verdict::Same)
        })
        .count()
}

#[test]
fn a_a_reports_of_thirty_rows_get_a_verdict_at_most_five_percent_of_the_time() {
    // 200 pairs of 30-row reports from the same noise (2 % log-sd, 50
    // samples a side). At the default 5 % threshold; and at a threshold
    // so small that only the correction stands between noise and a
    // verdict.
    let at5 = false_reports(200, 0.05, 1);
    let tiny = false_reports(200, 1e-9, 2);
    eprintln!("A/A false-verdict reports: {at5}/200 at 5%, {tiny}/200 at 1e-9");
    assert!(at5 <= 10, "{at5}/200 at 5%");
    assert!(tiny <= 10, "{tiny}/200 with the threshold out of the way");
}

#[test]
fn a_planted_ten_percent_regression_is_caught_in_ninety_five_percent_of_reports() {
    let mut rng = XorShift::new(3);
    let mut caught = 0;
    let mut others = 0;
    for i in 0..200 {
        let row = i % 30;
        let (o, n) = pair(&mut rng, 30, 50, 0.02, Some((row, 1.10)));
        let c = compare(&o, &n, OPTS).unwrap();
        caught += usize::from(c.comparisons[row].verdict == Verdict::Slower);
        others +=
            c.comparisons.iter().enumerate().filter(|(j, c)| *j != row && c.verdict != Verdict::Same).count();
    }
    eprintln!("planted +10%: caught {caught}/200; other rows with a verdict: {others}");
    assert!(caught >= 190, "caught {caught}/200");
    assert!(others <= 10, "{others} false verdicts beside the planted row");
}
