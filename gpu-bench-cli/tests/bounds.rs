//! The bound test (issue 27): every CLI input outside its documented range
//! is refused with exit status 2, the flag and the bound named, before
//! anything runs. The flags come from clap's own definition
//! (`gpu_bench_cli::cli::command`), so a new flag is covered as soon as it
//! exists: every numeric flag of every subcommand at its minimum − 1,
//! maximum + 1, 0, a negative number, NaN, infinity and a non-number; every
//! file argument missing, empty, malformed and with negative or non-finite
//! values; every pair of flags that clap says cannot go together, and the
//! measuring flags with the commands that measure nothing. Each case runs
//! the binary with `--driver sim` and an `--out` folder: a value accepted
//! by mistake would run (and write a report there), a refused one must exit
//! within seconds with nothing written.

mod support;

use gpu_bench_cli::bounds::{Range, range_of};
use gpu_bench_cli::cli::{MEASURING_GLOBALS, command};
use std::any::TypeId;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const REPLAY: &str = "docs/results/2026-11-26-final/verify-after-review/roofline/results.json";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpu-bench-bounds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

/// One bad input: the arguments, and what stderr must say.
struct Case {
    args: Vec<String>,
    says: Vec<String>,
}

/// Runs every case in parallel threads; returns the failures.
fn run_all(cases: Vec<Case>, dir: &Path) -> Vec<String> {
    let limit = Duration::from_secs(20);
    let threads = 8;
    let cases: Vec<(usize, Case)> = cases.into_iter().enumerate().collect();
    let chunks: Vec<Vec<&(usize, Case)>> =
        (0..threads).map(|t| cases.iter().skip(t).step_by(threads).collect()).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    let mut bad = Vec::new();
                    for (i, case) in chunk {
                        let out = dir.join(format!("out-{i}"));
                        // `--driver sim` where something would run (with
                        // `compare` and `--replay` it is itself refused).
                        let measures = !case.args.iter().any(|a| a == "compare" || a == "--replay");
                        let mut args =
                            if measures { vec!["--driver".to_owned(), "sim".to_owned()] } else { vec![] };
                        args.extend(case.args.iter().cloned());
                        // `--out` goes last where it can (globals are taken
                        // after the subcommand too); not where the case
                        // tries `--out` itself.
                        if !case.args.iter().any(|a| a == "--out") {
                            args.extend(["--out".to_owned(), out.display().to_string()]);
                        }
                        let t0 = Instant::now();
                        let mut child = Command::new(support::gpu_bench())
                            .args(&args)
                            .current_dir(root())
                            .env_remove("RUST_LOG")
                            .env_remove("GPU_BENCH_DRIVER")
                            .env_remove("GPU_SYNC_DRIVER")
                            .stdout(Stdio::null())
                            .stderr(Stdio::piped())
                            .spawn()
                            .expect("gpu-bench runs");
                        let code = loop {
                            if let Some(st) = child.try_wait().expect("wait") {
                                break st.code();
                            }
                            if t0.elapsed() > limit {
                                let _ = child.kill();
                                let _ = child.wait();
                                break None;
                            }
                            std::thread::sleep(Duration::from_millis(5));
                        };
                        let mut err = String::new();
                        if let Some(mut e) = child.stderr.take() {
                            use std::io::Read;
                            let _ = e.read_to_string(&mut err);
                        }
                        let wrote = ["report.md", "results.json"].iter().any(|f| out.join(f).exists());
                        let missing: Vec<&String> =
                            case.says.iter().filter(|w| !err.contains(w.as_str())).collect();
                        if code != Some(2) || wrote || !missing.is_empty() {
                            bad.push(format!(
                                "gpu-bench {}: exit {code:?}{}, should say {missing:?}\n  {}",
                                args.join(" "),
                                if wrote { ", wrote a report" } else { "" },
                                err.trim().replace('\n', "\n  ")
                            ));
                        }
                    }
                    bad
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a case thread")).collect()
    })
}

fn is_numeric(a: &clap::Arg) -> bool {
    let t = a.get_value_parser().type_id();
    [
        TypeId::of::<usize>(),
        TypeId::of::<f64>(),
        TypeId::of::<i32>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
    ]
    .iter()
    .any(|id| t == *id)
}

fn is_path(a: &clap::Arg) -> bool {
    a.get_value_parser().type_id() == TypeId::of::<PathBuf>()
}

fn show(v: f64) -> String {
    format!("{v}")
}

/// The values outside `r` the issue lists, each a string as typed.
fn outside(r: &Range) -> Vec<String> {
    let mut v = vec![
        show(r.lo - 1.0),
        show(r.hi + 1.0),
        "-1".into(),
        "NaN".into(),
        "inf".into(),
        "-inf".into(),
        "lots".into(),
    ];
    if r.lo > 0.0 || r.lo_open {
        v.push("0".into());
    }
    if r.lo_open {
        v.push(show(r.lo));
    }
    if !r.whole {
        v.push(format!("{}", r.hi * 1.5));
    } else {
        v.push("1.5".into());
    }
    v
}

/// A value the flag accepts (for pairs of flags).
fn good_value(a: &clap::Arg) -> Option<String> {
    if !a.get_action().takes_values() {
        return None;
    }
    if let Some(r) = a.get_long().and_then(range_of) {
        return Some(show(if r.lo_open { r.hi } else { r.lo }));
    }
    if is_path(a) {
        return Some(root().join(REPLAY).display().to_string());
    }
    a.get_possible_values().first().map(|p| p.get_name().to_owned())
}

fn flag_args(a: &clap::Arg) -> Vec<String> {
    let mut v = vec![format!("--{}", a.get_long().expect("a long flag"))];
    v.extend(good_value(a));
    v
}

#[test]
fn every_input_outside_its_range_is_refused_naming_the_flag_and_the_bound() {
    let dir = scratch();
    let root_cmd = command();
    let mut cases = Vec::new();
    let mut numeric = 0;

    // Numeric flags: the globals once (with `info`), each subcommand's own.
    let mut scopes: Vec<(Option<String>, Vec<clap::Arg>)> =
        vec![(None, root_cmd.get_arguments().cloned().collect())];
    for sub in root_cmd.get_subcommands() {
        scopes.push((Some(sub.get_name().to_owned()), sub.get_arguments().cloned().collect()));
    }
    for (sub, args) in &scopes {
        for a in args.iter().filter(|a| is_numeric(a)) {
            let long = a.get_long().expect("numeric flags are long flags");
            let r = range_of(long).unwrap_or_else(|| {
                panic!("--{long} is numeric but has no documented range in gpu_bench_cli::bounds::RANGES")
            });
            numeric += 1;
            // The range is the one the parser enforces: both ends accepted.
            for ok in [show(if r.lo_open { r.lo + 1e-9 } else { r.lo }), show(r.hi)] {
                let mut argv = vec!["gpu-bench".to_owned()];
                match sub {
                    Some(s) => argv.extend([s.clone(), format!("--{long}"), ok.clone()]),
                    None => argv.extend([format!("--{long}"), ok.clone(), "info".into()]),
                }
                if let Err(e) = command().try_get_matches_from(&argv) {
                    panic!("{argv:?}: a value inside the documented range is refused: {e}");
                }
            }
            // A flag whose value is optional (`--procs [N]`) takes no
            // value that starts with a hyphen as a word of its own (it
            // would be the next flag): given as `--procs=-inf`.
            let optional = a.get_num_args().is_some_and(|n| n.min_values() == 0);
            for v in outside(&r) {
                let flag = if optional && v.starts_with('-') {
                    vec![format!("--{long}={v}")]
                } else {
                    vec![format!("--{long}"), v]
                };
                let args = match sub {
                    Some(s) => [vec![s.clone()], flag].concat(),
                    None => [flag, vec!["info".into()]].concat(),
                };
                cases.push(Case { args, says: vec![format!("--{long}"), r.expected()] });
            }
        }
    }
    assert!(numeric >= 18, "only {numeric} numeric flags found: is the enumeration broken?");
    // Inside the range but refused: an odd handoff (the chain must end on
    // A, where its events are).
    let hops = range_of("handoff-hops").expect("--handoff-hops has a range");
    cases.push(Case {
        args: vec!["p2p".into(), "--handoff-hops".into(), "3".into()],
        says: vec!["--handoff-hops".into(), "odd".into(), hops.expected()],
    });

    // File arguments: missing, empty, malformed, negative, non-finite.
    let good = root().join(REPLAY);
    let text = std::fs::read_to_string(&good).expect("the committed roofline result");
    let edit = |name: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&text).expect("json");
        f(&mut v);
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_string(&v).expect("json")).expect("write");
        p
    };
    let missing = dir.join("missing.json");
    let empty = dir.join("empty.json");
    std::fs::write(&empty, "").expect("write");
    let malformed = dir.join("malformed.json");
    std::fs::write(&malformed, "{\"schema\": ").expect("write");
    let negative = edit("negative.json", &|v| v["ceilings"][0]["value"] = (-5.0).into());
    let negative_noise = edit("negative-noise.json", &|v| v["ceilings"][1]["noise"] = (-1.0).into());
    let non_finite = edit("null.json", &|v| v["ceilings"][0]["value"] = serde_json::Value::Null);
    let huge = dir.join("huge.json");
    std::fs::write(&huge, text.replacen("\"value\": ", "\"value\": 1e999, \"was\": ", 1)).expect("write");
    let report_files: Vec<(&Path, &str)> = vec![
        (&missing, "missing.json"),
        (&empty, "empty.json"),
        (&malformed, "malformed.json"),
        (&negative, "ceilings[0].value"),
        (&negative_noise, "noise"),
        (&non_finite, "ceilings[0].value"),
        (&huge, "huge.json"),
    ];
    let peers = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).expect("write");
        p
    };
    let peer_files = vec![
        (missing.clone(), "missing.json".to_owned()),
        (empty.clone(), "empty.json".into()),
        (malformed.clone(), "malformed.json".into()),
        (
            peers("p-neg.json", r#"[{"name": "torch sum", "value": -3e12, "unit": "B/s"}]"#),
            "peers[0].value".into(),
        ),
        (
            peers("p-null.json", r#"[{"name": "torch sum", "value": null, "unit": "B/s"}]"#),
            "peers[0].value".into(),
        ),
        (
            peers("p-huge.json", r#"[{"name": "torch sum", "value": 1e999, "unit": "B/s"}]"#),
            "p-huge.json".into(),
        ),
        (
            peers("p-unit.json", r#"[{"name": "torch sum", "value": 3e12, "unit": "GB/s"}]"#),
            "peers[0].unit".into(),
        ),
    ];
    // `nccl --peers`: a p2p results.json (one pair, its one-way copy).
    let p2p = |copy_on: &str| {
        format!(
            r#"{{"devices": ["a", "b"], "simulated": true, "bytes": 16, "repeats": 1, "notes": [], "pairs": [{{
            "src": 0, "dst": 1, "link": "unknown", "can_access_peer": true, "performance_rank": null,
            "copy_off_gbs": {{"missing": "x"}}, "copy_both_off_gbs": {{"missing": "x"}}, "copy_on_gbs": {copy_on},
            "copy_both_on_gbs": {{"missing": "x"}}, "raw_on_gbs": {{"missing": "x"}}, "raw_both_on_gbs": {{"missing": "x"}},
            "sm_push_gbs": {{"missing": "x"}}, "sm_pull_gbs": {{"missing": "x"}}, "latency_gpu_on_us": {{"missing": "x"}},
            "latency_gpu_off_us": {{"missing": "x"}}, "latency_host_on_us": {{"missing": "x"}}}}]}}"#
        )
    };
    let p2p_files = vec![
        (missing.clone(), "missing.json".to_owned()),
        (empty.clone(), "empty.json".into()),
        (malformed.clone(), "malformed.json".into()),
        (peers("n-neg.json", &p2p(r#"{"value": -3.0}"#)), "pairs[0].copy_on_gbs is -3".into()),
        (peers("n-null.json", &p2p(r#"{"value": null}"#)), "n-null.json".into()),
        (peers("n-huge.json", &p2p(r#"{"value": 1e999}"#)), "n-huge.json".into()),
        (peers("n-none.json", &p2p(r#"{"missing": "no access"}"#)), "no pair has a one-way copy".into()),
    ];
    let s = |p: &Path| p.display().to_string();
    let mut files_seen = Vec::new();
    for (sub, args) in &scopes {
        for a in args.iter().filter(|a| is_path(a)) {
            let id = a.get_id().as_str().to_owned();
            files_seen.push(id.clone());
            match (sub.as_deref(), id.as_str()) {
                (None, "out") => cases.push(Case {
                    args: vec!["--out".into(), "/proc/gpu-bench-cannot-write".into(), "info".into()],
                    says: vec!["--out".into(), "cannot write there".into()],
                }),
                (Some("compare"), "old" | "new") => {
                    for (bad, says) in &report_files {
                        let (o, n) = if id == "old" { (s(bad), s(&good)) } else { (s(&good), s(bad)) };
                        // compare names a ceiling by its name.
                        let says = if *bad == negative.as_path() { "\"HBM read\" is -5" } else { says };
                        cases.push(Case { args: vec!["compare".into(), o, n], says: vec![says.to_owned()] });
                    }
                }
                (Some("roofline"), "replay") => {
                    for (bad, says) in &report_files {
                        cases.push(Case {
                            args: vec!["roofline".into(), "--replay".into(), s(bad)],
                            says: vec!["--replay".into(), (*says).to_owned()],
                        });
                    }
                }
                (Some("roofline"), "peers") => {
                    for (bad, says) in &peer_files {
                        cases.push(Case {
                            args: vec![
                                "roofline".into(),
                                "--replay".into(),
                                s(&good),
                                "--peers".into(),
                                s(bad),
                            ],
                            says: vec!["--peers".into(), says.clone()],
                        });
                    }
                }
                (Some("nccl"), "peers") => {
                    for (bad, says) in &p2p_files {
                        cases.push(Case {
                            args: vec!["nccl".into(), "--peers".into(), s(bad)],
                            says: vec!["--peers".into(), says.clone()],
                        });
                    }
                }
                other => panic!("file argument {other:?} has no bad-file cases in tests/bounds.rs"),
            }
        }
    }
    assert_eq!(files_seen.len(), 6, "file arguments: {files_seen:?}");

    // Pairs of flags that cannot go together, as clap defines them.
    let mut built = command();
    built.build();
    let mut pairs = std::collections::BTreeSet::new();
    for sub in built.get_subcommands() {
        for a in sub.get_arguments().filter(|a| !a.is_global_set() && a.get_long().is_some()) {
            for b in sub.get_arg_conflicts_with(a) {
                let key = (
                    sub.get_name().to_owned(),
                    a.get_id().min(b.get_id()).clone(),
                    a.get_id().max(b.get_id()).clone(),
                );
                if b.get_long().is_none() || !pairs.insert(key) {
                    continue;
                }
                let mut args = vec![sub.get_name().to_owned()];
                args.extend(flag_args(a));
                args.extend(flag_args(b));
                let says = vec![
                    format!("--{}", a.get_long().unwrap_or("")),
                    format!("--{}", b.get_long().unwrap_or("")),
                ];
                cases.push(Case { args, says });
            }
        }
    }
    assert!(pairs.len() >= 10, "only {} conflicting pairs found", pairs.len());
    // The flags of a measurement with the commands that measure nothing.
    let global = |id: &str| built.get_arguments().find(|a| a.get_id().as_str() == id).expect("a global flag");
    for id in MEASURING_GLOBALS {
        let a = global(id);
        let mut with_replay = flag_args(a);
        with_replay.extend(["roofline".into(), "--replay".into(), s(&good)]);
        let mut with_compare = flag_args(a);
        with_compare.extend(["compare".into(), s(&good), s(&good)]);
        let flag = format!("--{}", a.get_long().unwrap_or(""));
        cases.push(Case { args: with_replay, says: vec![flag.clone(), "--replay".into()] });
        cases.push(Case { args: with_compare, says: vec![flag, "compare".into()] });
    }

    let n = cases.len();
    let t0 = Instant::now();
    let failures = run_all(cases, &dir);
    eprintln!("{n} bad inputs tried in {:.1} s", t0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "{} of {n} bad inputs pass or mislead:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
