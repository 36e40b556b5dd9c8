//! Bad input to the `gpu-bench` command, on the simulator: every numeric
//! flag has a range and says which bound a value broke; negative numbers
//! are values (refused by range), never unknown flags; NaN, infinities,
//! zero where a count is needed, min above max, sizes beyond host or device
//! memory, a device that is not there and an unwritable `--out` are all
//! usage errors (exit status 2) made before anything is allocated. A
//! property test then throws generated argument lists at the command: it
//! always ends within its limit with one of the documented exit statuses,
//! never a panic or an abort.

mod support;

use proptest::prelude::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let mut child = Command::new(support::gpu_bench())
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("GPU_BENCH_DRIVER")
        .env_remove("GPU_SYNC_DRIVER")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpu-bench runs");
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            return (status.code(), err);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gpu-bench {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn each_bad_value_is_a_usage_error_naming_the_problem() {
    let cases: &[(&[&str], &str)] = &[
        (&["overlap", "--chunk-mib", "99999999"], "above 16777216"),
        (&["overlap", "--chunk-mib", "20000", "--chunks", "16"], "of host memory"),
        (&["overlap", "--chunks", "0"], "0 is below 2"),
        (&["overlap", "--chunks", "1"], "1 is below 2"),
        (&["overlap", "--chunks", "-1"], "-1 is below 2"),
        (&["bandwidth", "--max-mib", "99999999"], "above 16777216"),
        (&["bandwidth", "--max-mib", "-4"], "-4 MiB is below 1"),
        (&["overhead", "--batches", "0"], "0 is below 1"),
        (&["overhead", "--per-batch", "-1"], "-1 is below 1"),
        (&["overhead", "--repeat", "0"], "0 is below 1"),
        (&["truth", "--launch-only", "-5"], "-5 is below 1"),
        // Launch-only builds no timer: no kernel mode to choose records for.
        (&["truth", "--kernel-records", "serial", "--launch-only", "2"], "cannot be used with"),
        (&["truth", "--kernel-records", "both"], "invalid value 'both'"),
        (&["timer", "--threshold-pct", "-2"], "-2 % is not above 0 %"),
        (&["timer", "--threshold-pct", "NaN"], "not a finite number"),
        (&["--timeout-s", "NaN", "timer"], "not a finite number"),
        (&["--timeout-s", "inf", "timer"], "not a finite number"),
        (&["--timeout-s", "0", "timer"], "0 s is not above 0 s"),
        (&["--min-time-s", "-1", "timer"], "-1 s is below 0 s"),
        (&["--min-samples", "0", "timer"], "0 is below 1"),
        (
            &["--min-samples", "10", "--max-samples", "5", "timer"],
            "--max-samples 5 is below --min-samples 10",
        ),
        (&["--warmup-min", "10", "--warmup-max", "2", "timer"], "--warmup-min 10 is above --warmup-max 2"),
        (&["--max-noise-pct", "0", "timer"], "expected a number above 0 and at most 100 %"),
        (&["--batch-runs", "0", "timer"], "0 is below 1"),
        (&["nccl", "--graph", "-1"], "-1 is below 0"),
        (&["nccl", "--graph", "10001"], "10001 is above 10000"),
        (&["nccl", "--graph", "20000"], "expected a whole number from 0 to 10000"),
        (&["--device", "5", "info"], "--device 5: there are 2 devices"),
        (&["--device", "-1", "info"], "-1 is below 0"),
        (&["--out", "/proc/gpu-bench-cannot-write", "info"], "cannot write there"),
        (&["nccl", "--procs", "1"], "1 is below 2"),
        (&["nccl", "--procs", "x"], "--procs"),
        (&["nccl", "--procs", "2", "--devices", "0,1"], "cannot be used with"),
        // One process per GPU needs a real NCCL: refused before any rank starts.
        (&["nccl", "--procs", "2"], "cuda-sim's NCCL joins no other process"),
        (&["nccl", "--procs"], "cuda-sim's NCCL joins no other process"),
        // `--procs` alone before another flag takes no value from it.
        (
            &["nccl", "--procs", "--blocking", "--collectives", "all-reduce"],
            "cuda-sim's NCCL joins no other process",
        ),
        (&["nccl", "--procs", "-1"], "-1 is below 2"),
    ];
    for (args, want) in cases {
        let mut all = vec!["--driver", "sim"];
        all.extend_from_slice(args);
        let (code, err) = run(&all, Duration::from_secs(60));
        assert_eq!(code, Some(2), "{all:?}: exit {code:?}\n{err}");
        assert!(err.contains(want), "{all:?}: the message should say {want:?}:\n{err}");
    }
}

#[test]
fn nccl_under_a_launcher_needs_procs() {
    // With RANK set, every process of a launcher would drive every device:
    // refused, naming --procs.
    let out = Command::new(support::gpu_bench())
        .args(["--driver", "sim", "nccl"])
        .env("RANK", "0")
        .env("NCCL_NVLS_ENABLE", "0")
        .output()
        .expect("gpu-bench runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("RANK is set") && err.contains("--procs"), "{err}");
}

#[test]
fn one_variable_chooses_the_driver_for_the_library_and_the_command() {
    let out = Command::new(support::gpu_bench())
        .args(["info"])
        .env_remove("GPU_BENCH_DRIVER")
        .env("GPU_SYNC_DRIVER", "sim")
        .output()
        .expect("gpu-bench runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("SIMULATED"));
    let out = Command::new(support::gpu_bench())
        .args(["info"])
        .env_remove("GPU_BENCH_DRIVER")
        .env("GPU_SYNC_DRIVER", "bogus")
        .output()
        .expect("gpu-bench runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected sim, cuda or auto"));
}

/// A flag and a value from a pool of good and bad ones.
fn flag() -> impl Strategy<Value = Vec<String>> {
    let value = prop::sample::select(vec![
        "-1", "0", "1", "2", "3", "NaN", "inf", "-inf", "0.5", "1e9", "99999999", "abc", "", "-0",
    ]);
    let name = prop::sample::select(vec![
        "--min-samples",
        "--max-samples",
        "--min-time-s",
        "--max-noise-pct",
        "--timeout-s",
        "--warmup-min",
        "--warmup-max",
        "--batch-runs",
        "--device",
    ]);
    (name, value).prop_map(|(n, v)| vec![n.to_owned(), v.to_owned()])
}

fn command() -> impl Strategy<Value = Vec<String>> {
    let v = || prop::sample::select(vec!["-1", "0", "1", "2", "NaN", "99999999", "x"]);
    prop_oneof![
        Just(vec!["info".to_owned()]),
        v().prop_map(|x| vec!["timer".into(), "--threshold-pct".into(), x.into()]),
        Just(vec!["sync-costs".to_owned()]),
        v().prop_map(|x| vec!["bandwidth".into(), "--max-mib".into(), x.into()]),
        (v(), v()).prop_map(|(a, b)| vec![
            "overlap".into(),
            "--chunk-mib".into(),
            a.into(),
            "--chunks".into(),
            b.into()
        ]),
        (v(), v()).prop_map(|(a, b)| vec![
            "overhead".into(),
            "--batches".into(),
            a.into(),
            "--per-batch".into(),
            b.into()
        ]),
        v().prop_map(|x| vec!["truth".into(), "--launch-only".into(), x.into()]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_arguments_end_with_a_documented_status(flags in prop::collection::vec(flag(), 0..3), cmd in command()) {
        let mut args: Vec<String> = vec!["--driver".into(), "sim".into(), "--quick".into()];
        args.extend(flags.into_iter().flatten());
        args.extend(cmd);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, err) = run(&refs, Duration::from_secs(120));
        prop_assert!(matches!(code, Some(0 | 2 | 3 | 4 | 5)), "{args:?}: exit {code:?} (a signal?)\n{err}");
        prop_assert!(!err.contains("panicked"), "{args:?}: a panic\n{err}");
    }
}
