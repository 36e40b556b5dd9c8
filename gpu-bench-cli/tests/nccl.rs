//! `gpu-bench nccl` on two and four simulated devices and cuda-sim's
//! simulated NCCL: every collective at every size checked with 0 wrong
//! elements (eager, and captured in graphs with --graph), the rows
//! well-formed in JSON and CSV with their launch mode, the four outputs
//! written; a planted wrong reference and a busbw above the peer peak are
//! errors (exit 4, the rows written and flagged); --min-busbw exits 1;
//! NCCL_NVLS_ENABLE other than 0 is refused before anything runs (exit 2);
//! every table has its algo column, "—" where NCCL's tuning log says
//! nothing (cuda-sim writes none; a log that is missing, unreadable or
//! without a tuning line never fails the run; NCCL_DEBUG set by the user or
//! --no-algorithms leave it off, the report saying why); --cupti adds the
//! kernels' span and busy time (within the event time) to the rows, the
//! CSV and a table of its own, and is refused with --host-cost.

mod support;

use gpu_bench::nccl::{Collective, Launch, NcclReport};
use std::path::PathBuf;
use std::process::{Command, Output};

fn nccl(devices: u32, name: &str, nvls: Option<&str>, extra: &[&str]) -> (Output, PathBuf) {
    nccl_env(devices, name, nvls, &[], extra)
}

/// As [`nccl`], with `envs` set (NCCL's log variables unset otherwise).
fn nccl_env(
    devices: u32,
    name: &str,
    nvls: Option<&str>,
    envs: &[(&str, &str)],
    extra: &[&str],
) -> (Output, PathBuf) {
    let dir = std::env::temp_dir().join(format!("gpu-bench-nccl-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut c = Command::new(support::gpu_bench());
    c.env_remove("RUST_LOG").env_remove("NCCL_NVLS_ENABLE").env("CUDA_SIM_DEVICES", devices.to_string());
    for v in ["NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "GPU_BENCH_NCCL_TUNING_LOG"] {
        c.env_remove(v);
    }
    c.envs(envs.iter().copied());
    if let Some(v) = nvls {
        c.env("NCCL_NVLS_ENABLE", v);
    }
    let out = c
        .args([
            "--driver",
            "sim",
            "--format",
            "json",
            "nccl",
            "--max-bytes",
            "256K",
            "--factor",
            "4",
            "--out",
        ])
        .arg(&dir)
        .args(extra)
        .output()
        .expect("gpu-bench runs");
    (out, dir)
}

fn report(out: &Output) -> NcclReport {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("JSON on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)))
}

/// The sweep over `devices`, eager or (`graph`) captured in graphs
/// launched twice (`--graph 2`).
fn check(devices: u32, graph: bool) {
    let flags: &[&str] =
        if graph { &["--check-iters", "2", "--graph", "2"] } else { &["--check-iters", "2"] };
    let (out, dir) = nccl(devices, &format!("ok{devices}{graph}"), Some("0"), flags);
    assert!(out.status.success(), "{:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    let n = devices as usize;
    assert!(r.simulated && r.devices.len() == n && r.ordinals == (0..n as i32).collect::<Vec<_>>());
    let (state, launch) =
        if graph { ("measured", Launch::Graph) } else { ("not measured in this run (eager", Launch::Eager) };
    assert!(r.graph.starts_with(state), "{}", r.graph);
    assert!(r.rows.iter().all(|x| x.launch == launch));
    for c in Collective::ALL {
        let rows: Vec<_> = r.rows.iter().filter(|x| x.collective == c).collect();
        // 8 B to 256 KiB by 4: 9 sizes, fewer where a rank's block rounds
        // to nothing.
        assert!((5..=9).contains(&rows.len()), "{c}: {} rows", rows.len());
        for x in rows {
            assert_eq!(x.wrong, Some(0), "{c} {} B", x.bytes);
            assert!(x.error.is_none() && x.time_us > 0.0 && x.busbw_gbs > 0.0);
            assert!((x.busbw_gbs / x.algbw_gbs - c.bus_factor(n)).abs() < 1e-9);
        }
    }
    for f in ["report.md", "results.json", "results.csv", "busbw.svg"] {
        assert!(dir.join(f).is_file(), "{f} written");
    }
    let csv = std::fs::read_to_string(dir.join("results.csv")).expect("csv");
    assert_eq!(csv.lines().count(), 1 + r.rows.len(), "a row per collective and size");
    assert!(csv.starts_with(
        "collective,launch,bytes,count,time_us,spread_pct,algbw_gbs,busbw_gbs,algo,wrong,error\n"
    ));
    let md = std::fs::read_to_string(dir.join("report.md")).expect("md");
    assert!(md.lines().filter(|l| l.starts_with('|')).all(|l| l.matches('|').count() <= 9), "<= 8 columns");
    // The simulator's NCCL writes no tuning log: every row's algo is "—".
    assert!(r.rows.iter().all(|x| x.algorithm.is_none()));
    let heads = md.lines().filter(|l| l.starts_with("| size |")).count();
    assert_eq!(heads, 6, "a table per collective");
    assert_eq!(md.matches("| busbw GB/s | algo | #wrong, error |").count(), heads);
    let algo_cells = md.lines().filter(|l| l.starts_with("| ") && l.split('|').nth(7) == Some(" — ")).count();
    assert_eq!(algo_cells, r.rows.len(), "every row's algo is —");
    assert!(r.algorithm.starts_with("not reported: NCCL wrote no tuning log"), "{}", r.algorithm);
    assert!(r.notes.iter().any(|n| n.starts_with("NCCL's tuning log on")), "{:?}", r.notes);
    let svg = std::fs::read_to_string(dir.join("busbw.svg")).expect("svg");
    assert_eq!(svg.matches("<polyline").count(), 6, "a line per collective");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_collective_on_two_simulated_devices() {
    check(2, false);
}

#[test]
fn every_collective_captured_in_graphs_on_two_simulated_devices() {
    check(2, true);
}

#[test]
fn every_collective_on_four_simulated_devices() {
    check(4, true);
}

#[test]
fn a_planted_wrong_reference_fails_the_run_with_its_rows_counted() {
    let (out, dir) = nccl(
        2,
        "plant",
        Some("0"),
        &["--collectives", "all-reduce,alltoall", "--dtype", "u8", "--plant-wrong", "1"],
    );
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    assert!(!r.rows.is_empty());
    for x in &r.rows {
        let blocks = if x.collective == Collective::AllToAll { 2 } else { 1 };
        assert_eq!(x.wrong, Some(blocks), "{} {} B", x.collective, x.bytes);
        assert!(x.error.is_some());
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrong elements"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_busbw_above_the_peer_peak_is_an_error_not_a_result() {
    let (out, dir) = nccl(2, "peak", Some("0"), &["--collectives", "sendrecv", "--peer-peak", "0.5"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    let (above, below): (Vec<_>, Vec<_>) = r.rows.iter().partition(|x| x.busbw_gbs > 0.5);
    assert!(!above.is_empty() && !below.is_empty(), "the sweep crosses 0.5 GB/s");
    assert!(above.iter().all(|x| x.error.as_deref().is_some_and(|e| e.contains("peer peak"))));
    assert!(below.iter().all(|x| x.error.is_none()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn min_busbw_exits_1_below_it() {
    let (out, dir) = nccl(2, "min", Some("0"), &["--collectives", "all-reduce", "--min-busbw", "100000"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("below --min-busbw"));
    let _ = std::fs::remove_dir_all(&dir);
    let (out, dir) = nccl(2, "min-ok", Some("0"), &["--collectives", "all-reduce", "--min-busbw", "0.001"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn multicast_left_on_is_refused_before_anything_runs() {
    for v in [None, Some("1")] {
        let (out, dir) = nccl(2, "nvls", v, &[]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(
                "export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1"
            )
        );
        assert!(!dir.join("results.json").exists(), "nothing ran");
    }
}

#[test]
fn bad_device_lists_are_usage_errors() {
    for (list, says) in [("0,0", "given twice"), ("0,5", "not present"), ("1", "two devices")] {
        let (out, _) = nccl(2, "devs", Some("0"), &["--devices", list]);
        assert_eq!(out.status.code(), Some(2), "--devices {list}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "--devices {list}");
    }
    let (out, _) = nccl(2, "sizes", Some("0"), &["--min-bytes", "1M"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--min-bytes 1048576 is above --max-bytes"));
}

#[test]
fn procs_blocking_refuses_point_to_point_and_a_runtime_connect_left_on() {
    // Argument rules, checked before the simulator's own refusal of --procs.
    let (out, dir) = nccl(2, "pblk", Some("0"), &["--blocking", "--procs"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--procs --blocking: sendrecv connects its peers on first use"), "{err}");
    assert!(!dir.join("results.json").exists(), "nothing ran");
    let ar = ["--blocking", "--collectives", "all-reduce", "--procs"];
    let (out, _) = nccl_env(2, "pblk-rc", Some("0"), &[("NCCL_RUNTIME_CONNECT", "1")], &ar);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("NCCL_RUNTIME_CONNECT=1 is set"), "{err}");
    // Left unset, the ranks would get 0: the simulator's refusal comes next.
    let (out, _) = nccl(2, "pblk-ok", Some("0"), &ar);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cuda-sim's NCCL joins no other process"));
    // --host-cost runs all-reduce alone: no point-to-point to refuse.
    let (out, _) = nccl(2, "pblk-hc", Some("0"), &["--blocking", "--host-cost", "--procs"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cuda-sim's NCCL joins no other process"), "{err}");
}

#[test]
#[ignore = "needs two CUDA GPUs and NCCL (one process per GPU: cuda-sim's NCCL joins no other process)"]
fn one_process_per_gpu_host_cost_on_gpus() {
    // Each rank's raw ncclAllReduce call against its tracked all-reduce;
    // rank 0 writes every rank's rows (gathered by NCCL), one call each.
    let out = Command::new(support::gpu_bench())
        .env_remove("RUST_LOG")
        .env_remove("NCCL_RUNTIME_CONNECT")
        .env("NCCL_NVLS_ENABLE", "0")
        .args(["--driver", "cuda", "--format", "json", "nccl", "--procs", "2", "--host-cost", "--blocking"])
        .args(["--min-bytes", "8", "--max-bytes", "64", "--iters", "20", "--batches", "3"])
        .output()
        .expect("gpu-bench runs");
    assert!(out.status.success(), "{:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON rows on stdout");
    // 8 B to 64 B by a factor of 2: 4 sizes, for each of 2 ranks.
    assert_eq!(rows.len(), 8, "{rows:?}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["rank"], i / 4, "{r}");
        assert_eq!(r["calls"], 1, "{r}");
        for k in [
            "raw_host_us",
            "ours_host_us",
            "raw_gpu_us",
            "ours_gpu_us",
            "raw_legacy_host_us",
            "raw_legacy_gpu_us",
        ] {
            assert!(r[k].as_f64().is_some_and(|v| v > 0.0), "{k}: {r}");
        }
    }
}

#[test]
fn in_place_all_reduce_is_exact_and_refused_with_other_collectives_or_graphs() {
    // In place, each timed iteration sums the last one's output; the
    // checked one starts from the input again, so every row is exact.
    let ar = ["--collectives", "all-reduce", "--in-place", "--check-iters", "2"];
    let (out, dir) = nccl(2, "inplace", Some("0"), &ar);
    assert!(out.status.success(), "{:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    assert!(r.in_place && r.notes.iter().any(|n| n.starts_with("all-reduce in place")), "{:?}", r.notes);
    let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md written");
    assert!(md.contains("- form: all-reduce in place"), "{md}");
    assert!(
        !r.rows.is_empty() && r.rows.iter().all(|x| x.wrong == Some(0) && x.error.is_none()),
        "{:?}",
        r.rows
    );
    for (name, flags, says) in [
        (
            "inplace-ag",
            &["--collectives", "all-reduce,all-gather", "--in-place"][..],
            "all_gather was asked for",
        ),
        ("inplace-all", &["--in-place"][..], "all-reduce only"),
    ] {
        let (out, dir) = nccl(2, name, Some("0"), flags);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("in place: all-reduce only") && err.contains(says), "{name}: {err}");
        assert!(!dir.join("results.json").exists(), "{name}: nothing ran");
    }
    // With graphs: clap's conflict (exit 2, before anything runs).
    let (out, _) =
        nccl(2, "inplace-g", Some("0"), &["--collectives", "all-reduce", "--in-place", "--graph", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
}

/// `gpu-bench --driver cuda --format json nccl --procs 2 ARGS` on the GPUs
/// (NCCL's log variables and `NCCL_RUNTIME_CONNECT` unset, multicast off):
/// it succeeds, and its report's rows are exact.
fn procs_on_gpus(args: &[&str]) -> NcclReport {
    let out = Command::new(support::gpu_bench())
        .env_remove("RUST_LOG")
        .env_remove("NCCL_DEBUG")
        .env_remove("GPU_BENCH_NCCL_TUNING_LOG")
        .env_remove("NCCL_RUNTIME_CONNECT")
        .env("NCCL_NVLS_ENABLE", "0")
        .args(["--driver", "cuda", "--format", "json", "nccl", "--procs", "2"])
        .args(args)
        .output()
        .expect("gpu-bench runs");
    assert!(out.status.success(), "{:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    assert!(r.notes.iter().any(|n| n.contains("one process per GPU: 2 ranks")), "{:?}", r.notes);
    assert!(!r.rows.is_empty());
    for x in &r.rows {
        assert_eq!(x.wrong, Some(0), "{} {} B", x.collective, x.bytes);
        assert!(x.error.is_none() && x.time_us > 0.0, "{x:?}");
    }
    r
}

#[test]
#[ignore = "needs two CUDA GPUs and NCCL (one process per GPU: cuda-sim's NCCL joins no other process)"]
fn one_process_per_gpu_blocking_on_gpus() {
    // `--blocking`: the ranks split blocking communicators from their
    // non-blocking ones (NCCL_RUNTIME_CONNECT=0 given them), exact.
    let r = procs_on_gpus(&[
        "--blocking",
        "--no-algorithms",
        "--collectives",
        "all-reduce,all-gather,reduce-scatter,broadcast",
        "--max-bytes",
        "1M",
    ]);
    assert!(r.blocking, "the report says the communicators were blocking");
}

#[test]
#[ignore = "needs two CUDA GPUs and NCCL (one process per GPU: cuda-sim's NCCL joins no other process)"]
fn one_process_per_gpu_on_gpus() {
    // `--procs 2` spawns two ranks of this command; rank 0 writes the rows,
    // reduced over both ranks, exact, with the note naming the mode, and
    // names the algorithm NCCL's rank 0 logged for every collective that
    // has one.
    let r = procs_on_gpus(&["--max-bytes", "1M", "--factor", "16"]);
    for x in &r.rows {
        let p2p = matches!(x.collective, Collective::SendRecv | Collective::AllToAll);
        assert_eq!(x.algorithm.is_none(), p2p, "{x:?}");
    }
    assert!(r.algorithm.starts_with("NCCL's tuning log (rank 0)"), "{}", r.algorithm);
}

/// NCCL's log variables as a `gpu-bench nccl` parent passes them to its
/// ranks, pointing at `log`.
fn inherited(log: &std::path::Path) -> [(&'static str, String); 4] {
    let p = log.display().to_string();
    [
        ("NCCL_DEBUG", "INFO".into()),
        ("NCCL_DEBUG_SUBSYS", "TUNING".into()),
        ("NCCL_DEBUG_FILE", p.clone()),
        ("GPU_BENCH_NCCL_TUNING_LOG", p),
    ]
}

#[test]
fn a_tuning_log_without_tuning_lines_or_unreadable_leaves_dashes_and_succeeds() {
    let base = std::env::temp_dir().join(format!("gpu-bench-nccl-{}-logs", std::process::id()));
    std::fs::create_dir_all(&base).expect("temp dir");
    // Garbage, invalid UTF-8 and NCCL lines of other kinds: nothing to name.
    let garbage = base.join("garbage.log");
    std::fs::write(
        &garbage,
        b"\xff\xfe not a line\nh:1:1 [0] NCCL INFO Channel 00/02 : 0 1\nAllReduce: x Bytes\n",
    )
    .expect("write");
    let env = inherited(&garbage);
    let envs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (out, dir) = nccl_env(2, "garbage", Some("0"), &envs, &["--collectives", "all-reduce,sendrecv"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    assert!(!r.rows.is_empty() && r.rows.iter().all(|x| x.algorithm.is_none()));
    assert!(r.algorithm.starts_with("not reported: no tuning line in"), "{}", r.algorithm);
    let copied = std::fs::read(dir.join("nccl-tuning.log")).expect("the log kept beside the report");
    assert_eq!(copied, std::fs::read(&garbage).expect("log"));
    let md = std::fs::read_to_string(dir.join("report.md")).expect("md");
    assert!(md.contains("| — | 0 |"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);

    // A log that cannot be read: the name (`%h` standing for any host)
    // finds a directory.
    std::fs::create_dir_all(base.join("sub").join("hostdir")).expect("dir");
    let env = inherited(&base.join("sub").join("%hdir"));
    let envs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (out, dir) = nccl_env(2, "unreadable", Some("0"), &envs, &["--collectives", "all-reduce"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    assert!(!r.rows.is_empty() && r.rows.iter().all(|x| x.algorithm.is_none()));
    assert!(r.algorithm.starts_with("not read: ") && r.algorithm.contains("hostdir"), "{}", r.algorithm);
    assert!(r.notes.iter().any(|n| n.starts_with("NCCL's tuning log not kept")), "{:?}", r.notes);
    assert!(!dir.join("nccl-tuning.log").exists());
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn the_users_nccl_debug_and_no_algorithms_leave_the_log_off_and_say_why() {
    let (out, dir) =
        nccl_env(2, "user-debug", Some("0"), &[("NCCL_DEBUG", "WARN")], &["--collectives", "all-reduce"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    assert!(r.rows.iter().all(|x| x.algorithm.is_none()));
    assert!(r.algorithm.starts_with("not read: NCCL_DEBUG is set by the user"), "{}", r.algorithm);
    assert!(!r.notes.iter().any(|n| n.starts_with("NCCL's tuning log on")));
    let _ = std::fs::remove_dir_all(&dir);
    let (out, dir) = nccl(2, "no-algos", Some("0"), &["--collectives", "all-reduce", "--no-algorithms"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    assert_eq!(r.algorithm, "not read: --no-algorithms");
    assert!(r.rows.iter().all(|x| x.algorithm.is_none()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cupti_adds_the_kernels_view_and_refuses_host_cost() {
    let flags = ["--collectives", "all-reduce,sendrecv", "--cupti", "--graph", "2"];
    let (out, dir) = nccl(2, "cupti", Some("0"), &flags);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    assert!(!r.rows.is_empty() && r.rows.iter().all(|x| x.launch == Launch::Graph));
    for x in &r.rows {
        let (gpu, busy) = (x.gpu_us.expect("gpu µs"), x.busy_us.expect("busy µs"));
        // The events' f32 milliseconds: good to 1e-7 of the span.
        assert!(0.0 < busy && busy <= gpu && gpu <= x.time_us * (1.0 + 1e-6), "{x:?}");
    }
    let csv = std::fs::read_to_string(dir.join("results.csv")).expect("csv");
    assert!(csv.lines().next().is_some_and(|h| h.ends_with(",error,gpu_us,busy_us,event_per_gpu")), "{csv}");
    assert!(csv.lines().skip(1).all(|l| l.split(',').count() == 14), "{csv}");
    let md = std::fs::read_to_string(dir.join("report.md")).expect("md");
    assert_eq!(md.matches("| size | event µs | gpu µs | busy µs | event ÷ gpu |").count(), 2, "{md}");
    assert!(md.lines().filter(|l| l.starts_with('|')).all(|l| l.matches('|').count() <= 9), "<= 8 columns");
    let _ = std::fs::remove_dir_all(&dir);
    let (out, dir) = nccl(2, "cupti-host", Some("0"), &["--cupti", "--host-cost"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--cupti") && err.contains("--host-cost"), "{err}");
    assert!(!dir.join("results.json").exists(), "nothing ran");
    // Serialized kernel records: the same view, the kind named in the notes.
    let (out, _) = nccl(
        2,
        "cupti-serial",
        Some("0"),
        &["--collectives", "all-reduce", "--cupti", "--kernel-records", "serial"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    assert!(r.rows.iter().all(|x| x.gpu_us.is_some()), "{:?}", r.rows);
    assert!(r.notes.iter().any(|n| n.contains("CUPTI_ACTIVITY_KIND_KERNEL records on")), "{:?}", r.notes);
    // Without --cupti there is nothing for it to choose.
    let (out, _) = nccl(2, "records-alone", Some("0"), &["--kernel-records", "serial"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cupti"));
}

#[test]
fn host_cost_takes_its_batch_count_and_refuses_it_alone_or_zero() {
    let flags = ["--host-cost", "--batches", "3", "--min-bytes", "256K", "--iters", "2", "--blocking"];
    let (out, dir) = nccl(2, "host-batches", Some("0"), &flags);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let md = std::fs::read_to_string(dir.join("host-cost.md")).expect("host-cost.md");
    assert!(md.contains("Medians of 3 interleaved batches of 2 iterations"), "{md}");
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("host-cost.json")).expect("json"))
            .expect("rows");
    assert!(!rows.is_empty(), "{md}");
    // One process driving 2 devices: 2 calls an iteration, the added cost
    // per call half the iteration's.
    assert!(md.contains("| added µs | added µs per call |") && md.contains("Added µs: median"), "{md}");
    for r in &rows {
        assert_eq!(r["calls"], 2, "{r}");
        assert!(r.get("rank").is_none(), "{r}");
        let added = r["ours_host_us"].as_f64().expect("ours") - r["raw_host_us"].as_f64().expect("raw");
        let line = format!("| {} | 2 |", r["bytes"]);
        let row = md.lines().find(|l| l.starts_with(&line)).unwrap_or_else(|| panic!("{line} in {md}"));
        assert!(row.contains(&format!("{:+.2} | {:+.2} |", added, added / 2.0)), "{row}");
        // The raw calls on cuMemAlloc buffers ran too (the simulator's NCCL
        // accepts any device memory of its driver).
        assert!(r["raw_legacy_host_us"].as_f64().is_some_and(|v| v > 0.0), "{r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    for (name, extra) in
        [("batches-alone", &["--batches", "3"][..]), ("batches-zero", &["--host-cost", "--batches", "0"])]
    {
        let (out, dir) = nccl(2, name, Some("0"), extra);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--batches"), "{name}: {err}");
        assert!(
            !dir.join("host-cost.json").exists() && !dir.join("results.json").exists(),
            "{name}: nothing ran"
        );
    }
}
