//! `gpu_bench::nccl` on the simulator's two devices and its simulated
//! NCCL: every collective's outputs are exact (0 wrong elements) for
//! integer and float kinds, the rows are well-formed, a reference
//! planted wrong is counted element by element, and the sweep captured in
//! graphs (`graph_launches`) is exact and timed as the eager one.

use gpu_bench::nccl::{Collective, Dtype, Launch, NcclOptions, run};
use gpu_sync::Device;

/// The tests of this file run one at a time: a host synchronization of
/// one moves the simulated host clock they share, which would stretch
/// another's eager spans while they are being timed.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn sweep(dtype: Dtype, plant_wrong: usize) -> gpu_bench::nccl::NcclReport {
    sweep_with(dtype, plant_wrong, false)
}

/// The tests' sweep: 8 B to 64 KiB by 4, one warm-up, three timed and two
/// checked iterations.
fn small(dtype: Dtype, plant_wrong: usize, blocking: bool) -> NcclOptions {
    NcclOptions {
        dtype,
        min_bytes: 8,
        max_bytes: 64 << 10,
        factor: 4,
        warmup_iters: 1,
        iters: 3,
        check_iters: 2,
        plant_wrong,
        blocking,
        ..NcclOptions::default()
    }
}

fn sweep_with(dtype: Dtype, plant_wrong: usize, blocking: bool) -> gpu_bench::nccl::NcclReport {
    let _one = one_at_a_time();
    gpu_sync::sim::install().expect("the simulator");
    let devices = Device::all().expect("devices");
    assert!(devices.len() >= 2, "the simulator's default is two devices");
    let opts = small(dtype, plant_wrong, blocking);
    let mut steps = 0;
    let r = run(&devices[..2], &opts, &mut |_| steps += 1).expect("the sweep runs");
    assert!(steps > 10, "progress is reported ({steps} steps)");
    r
}

#[test]
fn every_collective_is_exact_and_its_rows_well_formed() {
    for dtype in [Dtype::I32, Dtype::U8, Dtype::Bf16, Dtype::F32] {
        let r = sweep(dtype, 0);
        assert!(r.simulated && r.devices.len() == 2 && r.dtype == dtype);
        for c in Collective::ALL {
            let rows: Vec<_> = r.rows.iter().filter(|x| x.collective == c).collect();
            assert!(rows.len() >= 4, "{dtype:?} {c}: {} rows", rows.len());
            let mut last = 0;
            for x in rows {
                assert_eq!(x.wrong, Some(0), "{dtype:?} {c} {} B: {:?}", x.bytes, x.error);
                assert!(x.error.is_none());
                assert!(x.bytes > last, "sizes grow");
                last = x.bytes;
                assert!(x.time_us > 0.0 && x.algbw_gbs > 0.0 && (0.0..=100.0).contains(&x.spread_pct));
                let factor = c.bus_factor(2);
                assert!((x.busbw_gbs - x.algbw_gbs * factor).abs() <= 1e-9 * x.busbw_gbs.max(1.0));
                let algbw = x.bytes as f64 / (x.time_us * 1e-6) / 1e9;
                assert!((x.algbw_gbs / algbw - 1.0).abs() < 1e-9, "algbw = S / t");
            }
        }
        assert_eq!(r.summaries.len(), 6);
        assert!(r.failed_rows().next().is_none());
    }
}

#[test]
fn a_planted_wrong_reference_is_counted() {
    let r = sweep(Dtype::I32, 3);
    for x in &r.rows {
        // Rank 0's first 3 references altered, in each of 2 checked
        // iterations (all-to-all: in each of its 2 blocks); fewer where the
        // output is shorter.
        let out = match x.collective {
            Collective::AllGather => 2 * x.count,
            _ => x.count,
        };
        let per = 3.min(out) as u64;
        let blocks = if x.collective == Collective::AllToAll { 2 } else { 1 };
        assert_eq!(x.wrong, Some(2 * blocks * per), "{} {} B", x.collective, x.bytes);
        assert!(x.error.as_deref().is_some_and(|e| e.contains("wrong elements")));
    }
}

#[test]
fn blocking_communicators_sweep_exactly_and_say_so() {
    let r = sweep_with(Dtype::F32, 0, true);
    assert!(r.blocking);
    assert!(r.to_markdown().contains("- communicators: blocking"));
    assert!(r.rows.iter().all(|x| x.wrong == Some(0) && x.error.is_none()), "{:?}", r.failed_rows().next());
    assert!(!sweep(Dtype::F32, 0).blocking, "non-blocking unless asked");
}

#[test]
fn the_host_cost_twin_runs_raw_and_tracked_alike() {
    use gpu_bench::nccl::{HostCostOptions, host_cost};
    let _one = one_at_a_time();
    gpu_sync::sim::install().expect("the simulator");
    let devices = Device::all().expect("devices");
    for blocking in [false, true] {
        let opts = HostCostOptions { sizes: vec![64, 4096], blocking, iters: 4, batches: 3 };
        let rows = host_cost(&devices[..2], &opts, &mut |_| {}).expect("host cost");
        assert_eq!(rows.iter().map(|r| r.bytes).collect::<Vec<_>>(), [64, 4096]);
        for r in &rows {
            assert!(r.raw_host_us > 0.0 && r.ours_host_us > 0.0, "{r:?}");
            // The same collective on the same simulated device: the same
            // simulated time, raw or tracked.
            assert!((r.raw_gpu_us / r.ours_gpu_us - 1.0).abs() < 0.05, "{r:?}");
        }
    }
    let bad = HostCostOptions { sizes: vec![6], blocking: false, iters: 1, batches: 1 };
    let e = host_cost(&devices[..2], &bad, &mut |_| {}).expect_err("6 B is no whole f32 count");
    assert!(e.to_string().contains("6 B"), "{e}");
}

#[test]
fn one_rank_per_thread_reduces_its_rows_over_the_ranks() {
    // One process per GPU, with threads standing in for processes (cuda-sim
    // joins no other process): each thread runs `run_rank` with its own
    // rank of one clique, as `gpu-bench nccl --procs` does in each process.
    // Only rank 0 plants wrong references, so rank 1 sees its rows' counts
    // only through the reduction; both ranks' rows are the same, and are
    // what the one-process sweep counts. With the CUPTI check each thread
    // reads its own stream's kernels, reduced over the ranks as the spans.
    for cupti in [false, true] {
        per_thread_ranks(cupti);
    }
}

fn per_thread_ranks(cupti: bool) {
    let one = one_at_a_time();
    gpu_sync::sim::install().expect("the simulator");
    let devices = Device::all().expect("devices");
    let comms = gpu_sync::nccl::Communicator::init_all(&devices[..2]).expect("communicators");
    let opts = NcclOptions { cupti, ..small(Dtype::I32, 3, false) };
    let (tx, rx) = std::sync::mpsc::channel();
    for comm in comms {
        let (tx, opts) = (tx.clone(), opts.clone());
        std::thread::spawn(move || {
            let rank = comm.rank();
            let _ = tx.send((rank, gpu_bench::nccl::run_rank(comm, &opts, &mut |_| {})));
        });
    }
    let mut reports = [None, None];
    for _ in 0..2 {
        let (rank, r) = rx.recv_timeout(std::time::Duration::from_secs(120)).expect("a rank hung");
        reports[rank] = Some(r.expect("the rank's sweep"));
    }
    let [Some(r0), Some(r1)] = reports else { unreachable!("two ranks answered") };
    drop(one); // `sweep` takes it again
    let whole = sweep(Dtype::I32, 3);
    assert_eq!(r0.rows, r1.rows, "every rank gets the reduced rows");
    assert_eq!(r0.rows.len(), whole.rows.len());
    for (x, w) in r0.rows.iter().zip(&whole.rows) {
        assert_eq!((x.collective, x.bytes, x.count, x.wrong), (w.collective, w.bytes, w.count, w.wrong));
        assert!(x.time_us > 0.0 && (0.0..=100.0).contains(&x.spread_pct));
        // Each rank's kernels lie within its events: so do the maxima.
        assert_eq!(x.gpu_us.is_some(), cupti, "{x:?}");
        assert!(x.gpu_us.is_none_or(|g| g > 0.0 && g <= x.time_us * (1.0 + 1e-6)), "{x:?}");
    }
    assert_eq!(r0.devices.len(), 1, "a rank names its own device");
    assert!(r0.notes.iter().any(|n| n.contains("one process per GPU: 2 ranks")), "{:?}", r0.notes);
}

#[test]
fn a_captured_sweep_is_exact_and_timed_on_the_simulated_clock() {
    let _one = one_at_a_time();
    gpu_sync::sim::install().expect("the simulator");
    let devices = Device::all().expect("devices");
    let opts = |graph_launches| NcclOptions {
        dtype: Dtype::I32,
        min_bytes: 1 << 10,
        max_bytes: 64 << 10,
        factor: 8,
        warmup_iters: 1,
        iters: 3,
        check_iters: 1,
        graph_launches,
        ..NcclOptions::default()
    };
    let eager = run(&devices[..2], &opts(0), &mut |_| {}).expect("the eager sweep");
    let graph = run(&devices[..2], &opts(2), &mut |_| {}).expect("the captured sweep");
    assert!(graph.simulated && graph.graph.starts_with("measured"), "{}", graph.graph);
    assert_eq!(graph.rows.len(), eager.rows.len());
    for (g, e) in graph.rows.iter().zip(&eager.rows) {
        assert_eq!((g.launch, e.launch), (Launch::Graph, Launch::Eager));
        assert_eq!(g.wrong, Some(0), "{} {} B: {:?}", g.collective, g.bytes, g.error);
        assert!(g.error.is_none());
        // The simulated clock times a collective by the link model alone,
        // however it was issued: a graph's iteration takes what an eager one
        // does (iterations × launches divided out).
        assert!(g.time_us > 0.0);
        assert!(
            (g.time_us / e.time_us - 1.0).abs() < 0.01,
            "{} {} B: graph {} µs, eager {} µs",
            g.collective,
            g.bytes,
            g.time_us,
            e.time_us
        );
    }
    let csv = graph.to_csv();
    assert!(csv.lines().skip(1).all(|l| l.split(',').nth(1) == Some("graph")), "{csv}");
    assert!(graph.to_markdown().contains("## all_reduce, graph (simulated)"));
}

/// The tuning log is read a row at a time: lines written while a row runs
/// (here by the progress callback, standing in for NCCL's rank 0, which
/// cuda-sim's NCCL does not imitate) name that row's algorithm; lines
/// written before the row, or for another size, do not; send/recv and
/// all-to-all get none; a log that never appears leaves every row unnamed
/// without failing the run.
#[test]
fn each_row_names_the_choice_logged_while_it_ran() {
    use std::io::Write as _;
    let _one = one_at_a_time();
    gpu_sync::sim::install().expect("the simulator");
    let devices = Device::all().expect("devices");
    let dir = std::env::temp_dir().join(format!("gpu-bench-nccl-tuning-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pattern = dir.join("nccl-tuning.%h.%p");
    let file = dir.join(format!("nccl-tuning.myhost.{}", std::process::id()));
    let mut log = std::fs::File::create(&file).expect("log");
    let opts = NcclOptions {
        min_bytes: 1 << 10,
        max_bytes: 64 << 10,
        factor: 4,
        warmup_iters: 1,
        iters: 2,
        tuning_log: Some(pattern),
        ..NcclOptions::default()
    };
    let mut line = |l: String| writeln!(log, "host:1:2 [0] NCCL INFO {l}").expect("write");
    let r = run(&devices[..2], &opts, &mut |m| {
        // `nccl: all_reduce 4096 B (3/18)`: this row is running.
        let words: Vec<&str> = m.split_whitespace().collect();
        let (Some(c), Some(bytes)) = (words.get(1), words.get(2).and_then(|b| b.parse::<u64>().ok())) else {
            // Before any row: never a row's own.
            line("AllReduce: 1024 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}".into());
            return;
        };
        let (name, logged, algo) = match *c {
            "all_reduce" => ("AllReduce", bytes, "Ring proto LL channel{Lo..Hi}={0..1}"),
            "all_gather" => ("AllGather", bytes / 2, "1 proto 2 time 3.5"),
            "reduce_scatter" => ("ReduceScatter", bytes / 2, "RING proto LL128 channel{Lo..Hi}={0..3}"),
            "broadcast" => ("Broadcast", bytes, "TREE proto SIMPLE channel{Lo..Hi}={0..0}"),
            _ => return,
        };
        for _ in 0..2 {
            line(format!("{name}: {logged} Bytes -> Algo {algo}"));
        }
        line(format!("{name}: {} Bytes -> Algo NVLS proto SIMPLE channel{{Lo..Hi}}={{0..0}}", logged + 4));
    })
    .expect("the sweep runs");
    for x in &r.rows {
        let want = match x.collective {
            Collective::AllReduce => Some("RING/LL (2 ch)"),
            Collective::AllGather => Some("RING/SIMPLE"),
            Collective::ReduceScatter => Some("RING/LL128 (4 ch)"),
            Collective::Broadcast => Some("TREE/SIMPLE (1 ch)"),
            Collective::SendRecv | Collective::AllToAll => None,
        };
        assert_eq!(x.algorithm.as_deref(), want, "{} {} B", x.collective, x.bytes);
    }
    assert!(r.algorithm.starts_with("NCCL's tuning log (rank 0)"), "{}", r.algorithm);
    let md = r.to_markdown();
    assert!(md.contains("| RING/LL (2 ch) |") && md.contains("| — |"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);

    // No file ever: every row unnamed, the run a success.
    let opts = NcclOptions { tuning_log: Some(dir.join("none.%p")), ..opts };
    let r = run(&devices[..2], &opts, &mut |_| {}).expect("the sweep runs without its log");
    assert!(r.rows.iter().all(|x| x.algorithm.is_none() && x.wrong == Some(0)));
    assert!(r.algorithm.starts_with("not reported: NCCL wrote no tuning log"), "{}", r.algorithm);
}

#[test]
fn the_cupti_check_reads_each_rows_kernels_within_its_event_time() {
    let _one = one_at_a_time();
    gpu_sync::sim::install().expect("the simulator");
    let devices = Device::all().expect("devices");
    for graph_launches in [0, 2] {
        let opts = NcclOptions {
            collectives: vec![Collective::AllReduce, Collective::AllToAll],
            cupti: true,
            graph_launches,
            ..small(Dtype::F32, 0, false)
        };
        let r = run(&devices[..2], &opts, &mut |_| {}).expect("the sweep with the CUPTI check");
        assert!(r.has_cupti() && r.notes.iter().any(|n| n.starts_with("CUPTI check")));
        for x in &r.rows {
            let (gpu, busy) = (x.gpu_us.expect("gpu µs"), x.busy_us.expect("busy µs"));
            // On one device the kernels lie between its two events; the
            // events are read as f32 milliseconds (cuEventElapsedTime),
            // good to 1e-7 of the span: the bound holds to 1e-6.
            assert!(gpu > 0.0 && gpu <= x.time_us * (1.0 + 1e-6), "{graph_launches} {x:?}");
            assert!(busy > 0.0 && busy <= gpu * (1.0 + 1e-9), "{x:?}");
            assert!(x.event_per_gpu().is_some_and(|q| q >= 1.0 - 1e-6), "{x:?}");
            assert_eq!(x.wrong, Some(0), "{x:?}");
        }
        let md = r.to_markdown();
        assert!(md.contains("| size | event µs | gpu µs | busy µs | event ÷ gpu |"), "{md}");
        assert!(r.to_csv().lines().next().is_some_and(|h| h.ends_with(",gpu_us,busy_us,event_per_gpu")));
        let json = serde_json::to_string(&r).expect("json");
        assert!(json.contains("\"gpu_us\":") && json.contains("\"busy_us\":"));
    }
    // Without the check: no column, no field.
    let opts = NcclOptions { collectives: vec![Collective::AllReduce], ..small(Dtype::F32, 0, false) };
    let r = run(&devices[..2], &opts, &mut |_| {}).expect("the sweep");
    assert!(r.rows.iter().all(|x| x.gpu_us.is_none() && x.busy_us.is_none()) && !r.has_cupti());
    assert!(!r.to_markdown().contains("gpu µs") && !r.to_csv().contains("gpu_us"));
    assert!(!serde_json::to_string(&r).expect("json").contains("gpu_us"));
}

/// Every collective is warmed up at every size before any size is timed,
/// as nccl-tests warms up (the first sizes of a fresh process otherwise
/// read slow): the sweep says so, in that order.
#[test]
fn every_size_is_warmed_up_before_any_is_timed() {
    let _one = one_at_a_time();
    gpu_sync::sim::install().expect("the simulator");
    let devices = Device::all().expect("devices");
    let opts = NcclOptions {
        collectives: vec![Collective::AllReduce, Collective::Broadcast],
        ..small(Dtype::F32, 0, false)
    };
    let mut steps = Vec::new();
    run(&devices[..2], &opts, &mut |m| steps.push(m.to_string())).expect("the sweep runs");
    let first_row = steps.iter().position(|m| m.ends_with(')') && m.contains(" B (")).expect("a timed row");
    for c in ["all_reduce", "broadcast"] {
        let warm = steps.iter().position(|m| m == &format!("nccl: {c}: warm-up at every size"));
        assert!(warm.is_some_and(|w| w < first_row), "{c}'s warm-up comes before any row: {steps:?}");
    }
}
