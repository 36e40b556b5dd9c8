//! `gpu-bench nccl`: NCCL collectives over every GPU from one process, as
//! nccl-tests runs them, or one process per GPU (`--procs`: ranks spawned
//! here by `gpu_sync::nccl::spawn_local`, or started by `torchrun
//! --no-python`). The method is `gpu_bench::nccl`; this file checks the
//! environment and the inputs, turns NCCL's tuning log on ([`tuning_env`]),
//! reads the peer peak, starts the ranks, and writes.

use crate::common::{Ctx, Failure};
use gpu_bench::nccl::{Collective, Dtype, NcclOptions};
use gpu_bench::p2p::P2pReport;
use gpu_bench::render::{Format, write_text};
use gpu_bench_cli::cli::{CollectiveArg, DtypeArg};
use gpu_sync::Device;
use gpu_sync::nccl::{CommOptions, Communicator, RankEnv, SpawnError, SpawnOptions, SpawnRole};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `gpu-bench nccl`'s flags.
pub use gpu_bench_cli::cli::NcclArgs as Args;

/// Set by the `gpu-bench nccl` that turned NCCL's tuning log on, to its
/// `NCCL_DEBUG_FILE`: the ranks it spawns inherit both and know the log
/// is ours, not the user's.
const TUNING_ENV: &str = "GPU_BENCH_NCCL_TUNING_LOG";

/// NCCL's tuning log for this run: where NCCL writes it, or why not.
#[derive(Debug)]
pub enum Tuning {
    /// The variables are set (here, or by the `gpu-bench` that spawned
    /// this rank): NCCL writes `pattern` (`NCCL_DEBUG_FILE`).
    Log {
        /// `NCCL_DEBUG_FILE`, `%h` and `%p` unexpanded.
        pattern: PathBuf,
        /// The directory this process made for it, removed when dropped;
        /// `None` in a rank (its parent owns it).
        _owned: Option<TuningDir>,
    },
    /// Not read, and why.
    Off(String),
}

impl Tuning {
    /// The log's pattern, when on.
    fn pattern(&self) -> Option<PathBuf> {
        match self {
            Tuning::Log { pattern, .. } => Some(pattern.clone()),
            Tuning::Off(_) => None,
        }
    }
}

/// A temporary directory, removed (with what NCCL wrote there) on drop.
#[derive(Debug)]
pub struct TuningDir(PathBuf);

impl Drop for TuningDir {
    fn drop(&mut self) {
        // Best effort: a directory left in the temporary folder harms nothing.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Turns NCCL's tuning log on for `gpu-bench nccl`, before anything loads
/// NCCL (it reads its variables once): `NCCL_DEBUG=INFO`,
/// `NCCL_DEBUG_SUBSYS=TUNING` and `NCCL_DEBUG_FILE` in a new temporary
/// directory (`nccl-tuning.%h.%p`: each process its own file; NCCL's rank
/// 0 writes the lines). Nothing is set with `--no-algorithms` or
/// `--host-cost` (no rows), nor when the user set `NCCL_DEBUG` (their log
/// is left as they asked; the rows then name nothing). A rank spawned by
/// a `gpu-bench` that set them inherits them ([`TUNING_ENV`]).
///
/// # Safety
/// Sets environment variables: the caller guarantees no other thread of
/// the process exists yet (none can read the environment meanwhile).
pub unsafe fn tuning_env(args: &Args) -> Tuning {
    if args.no_algorithms {
        return Tuning::Off("--no-algorithms".into());
    }
    if args.host_cost {
        return Tuning::Off("--host-cost names no algorithm".into());
    }
    let var = |k: &str| std::env::var_os(k);
    if let Some(p) = var(TUNING_ENV).filter(|p| var("NCCL_DEBUG_FILE").as_ref() == Some(p)) {
        return Tuning::Log { pattern: PathBuf::from(p), _owned: None };
    }
    if var("NCCL_DEBUG").is_some() {
        return Tuning::Off("NCCL_DEBUG is set by the user: NCCL's log is left as they set it".into());
    }
    let dir = std::env::temp_dir().join(format!("gpu-bench-nccl-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return Tuning::Off(format!("{}: {e}", dir.display()));
    }
    let pattern = dir.join("nccl-tuning.%h.%p");
    // SAFETY: the caller guarantees this process has no other thread yet,
    // so nothing reads or writes the environment while it changes.
    unsafe {
        std::env::set_var("NCCL_DEBUG", "INFO");
        std::env::set_var("NCCL_DEBUG_SUBSYS", "TUNING");
        std::env::set_var("NCCL_DEBUG_FILE", &pattern);
        std::env::set_var(TUNING_ENV, &pattern);
    }
    Tuning::Log { pattern, _owned: Some(TuningDir(dir)) }
}

/// The switches that keep NVLink multicast off, as the user must export
/// them.
const MULTICAST_OFF: &str = "NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1";

/// Refuses to run unless `NCCL_NVLS_ENABLE` is `0`: NVLink multicast
/// (NVLS) can take a shared host's GPUs out of service, and NCCL turns it
/// on by itself where the hardware has it. Nothing is set here: the user
/// exports the switches, so every program of the session keeps them.
///
/// # Errors
/// [`Failure::Usage`] naming the variable's state and what to export.
fn multicast_off(value: Option<String>) -> Result<(), Failure> {
    match value.as_deref().map(str::trim) {
        Some("0") => Ok(()),
        v => Err(Failure::Usage(format!(
            "NCCL_NVLS_ENABLE is {}: NVLink multicast can take a shared host's GPUs out of service; \
             export {MULTICAST_OFF} and run again",
            v.map_or("not set".to_owned(), |v| format!("{v:?}, not 0"))
        ))),
    }
}

/// The one-way peer peak of a `gpu-bench p2p` results.json: its fastest
/// copy with peer access.
///
/// # Errors
/// [`Failure::Usage`] naming `--peers`, the file and what is wrong.
fn peer_peak(path: &Path) -> Result<f64, Failure> {
    let bad = |m: String| Failure::Usage(format!("--peers {}: {m}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let report: P2pReport =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a gpu-bench p2p results.json ({e})")))?;
    let mut peak: Option<f64> = None;
    for (i, p) in report.pairs.iter().enumerate() {
        if let Some(v) = p.copy_on_gbs.value() {
            if !v.is_finite() || v <= 0.0 {
                return Err(bad(format!("pairs[{i}].copy_on_gbs is {v}, not a positive number")));
            }
            peak = Some(peak.map_or(v, |p: f64| p.max(v)));
        }
    }
    peak.ok_or_else(|| bad("no pair has a one-way copy with peer access (copy_on_gbs)".into()))
}

fn collective(c: CollectiveArg) -> Collective {
    match c {
        CollectiveArg::AllReduce => Collective::AllReduce,
        CollectiveArg::AllGather => Collective::AllGather,
        CollectiveArg::ReduceScatter => Collective::ReduceScatter,
        CollectiveArg::Broadcast => Collective::Broadcast,
        CollectiveArg::SendRecv => Collective::SendRecv,
        CollectiveArg::AllToAll => Collective::AllToAll,
    }
}

fn dtype(d: DtypeArg) -> Dtype {
    match d {
        DtypeArg::F32 => Dtype::F32,
        DtypeArg::F64 => Dtype::F64,
        DtypeArg::F16 => Dtype::F16,
        DtypeArg::Bf16 => Dtype::Bf16,
        DtypeArg::I32 => Dtype::I32,
        DtypeArg::I64 => Dtype::I64,
        DtypeArg::U8 => Dtype::U8,
    }
}

/// The devices of `--devices` (every device when empty), each present and
/// given once.
///
/// # Errors
/// [`Failure::Usage`] for an ordinal not present, one given twice, or
/// fewer than two devices.
fn devices(list: &[i32]) -> Result<Vec<Device>, Failure> {
    let present = Device::count()?;
    let ordinals: Vec<i32> = if list.is_empty() { (0..present as i32).collect() } else { list.to_vec() };
    for (i, &o) in ordinals.iter().enumerate() {
        if o as usize >= present {
            return Err(Failure::Usage(format!(
                "--devices: device {o} is not present ({present} devices, ordinals 0..{})",
                present.saturating_sub(1)
            )));
        }
        if ordinals[..i].contains(&o) {
            return Err(Failure::Usage(format!(
                "--devices: device {o} is given twice (one rank per device)"
            )));
        }
    }
    if ordinals.len() < 2 {
        return Err(Failure::Usage(format!(
            "nccl needs two devices; {} given or present (on the simulator: CUDA_SIM_DEVICES=2)",
            ordinals.len()
        )));
    }
    Ok(ordinals.into_iter().map(Device::get).collect::<Result<_, _>>()?)
}

/// Runs the sweep and writes it: stdout in `format`; with `out`,
/// report.md, results.json, results.csv and busbw.svg there. Returns the
/// exit status: 1 when a collective's average busbw is below
/// `--min-busbw`.
///
/// # Errors
/// [`Failure::Usage`] for bad inputs or `NCCL_NVLS_ENABLE` not 0 (before
/// anything runs); [`Failure::Check`] after writing, when a row has wrong
/// elements or a busbw above the peer peak; a driver or NCCL error.
pub fn run(
    ctx: &Ctx,
    args: &Args,
    tuning: &Tuning,
    format: Format,
    out: Option<&PathBuf>,
) -> Result<i32, Failure> {
    let peak = match &args.peers {
        Some(p) => Some(peer_peak(p)?),
        None => args.peer_peak,
    };
    let small = ctx.quick || ctx.sim;
    let opts = NcclOptions {
        collectives: if args.collectives.is_empty() {
            Collective::ALL.to_vec()
        } else {
            args.collectives.iter().map(|&c| collective(c)).collect()
        },
        dtype: dtype(args.dtype),
        min_bytes: args.min_bytes.unwrap_or(8),
        max_bytes: args.max_bytes.unwrap_or(if small { 1 << 20 } else { 4 << 30 }),
        factor: args.factor.unwrap_or(2),
        warmup_iters: args.warmup_iters.unwrap_or(if small { 1 } else { 5 }),
        iters: args.iters.unwrap_or(if small { 5 } else { 20 }),
        check_iters: args.check_iters.unwrap_or(1),
        peer_peak_gbs: peak,
        plant_wrong: args.plant_wrong,
        blocking: args.blocking,
        graph_launches: args.graph.unwrap_or(0),
        tuning_log: tuning.pattern(),
        cupti: args.cupti,
        kernel_records: args.kernel_records.records(),
        in_place: args.in_place,
    };
    // Options that cannot run together (--in-place with another
    // collective), before anything starts.
    opts.validate().map_err(|e| Failure::Usage(e.to_string()))?;
    if args.batches.is_some() && !args.host_cost {
        return Err(Failure::Usage("--batches counts --host-cost's rounds: give it with --host-cost".into()));
    }
    if opts.min_bytes > opts.max_bytes {
        return Err(Failure::Usage(format!(
            "--min-bytes {} is above --max-bytes {}: no size to run",
            opts.min_bytes, opts.max_bytes
        )));
    }
    if let Some(procs) = args.procs {
        return run_procs(ctx, args, procs, &opts, tuning, format, out);
    }
    if std::env::var_os("RANK").is_some() {
        return Err(Failure::Usage(
            "RANK is set (a launcher started this process): add --procs for one rank per process, \
             or unset RANK to drive every device from this one"
                .into(),
        ));
    }
    let devices = devices(&args.devices)?;
    multicast_off(std::env::var("NCCL_NVLS_ENABLE").ok())?;
    // Per device: the input, the output and all-to-all's blocks at the
    // largest size; on the host, one rank's input and one read-back.
    let max = opts.max_bytes as u64;
    for d in &devices {
        crate::args::fits(&format!("nccl --max-bytes {max}"), d, 2 * max, 3 * max)?;
    }
    if args.host_cost {
        return host_cost(ctx, &devices, &opts, args.batches.unwrap_or(11), format, out);
    }
    let report = gpu_bench::nccl::run(&devices, &opts, &mut |m| ctx.progress.step(m))?;
    ctx.progress.finish();
    write_and_judge(report, args, tuning, format, out)
}

/// How long the parent of `--procs` waits for its ranks before killing
/// them: a backstop (each rank's NCCL waits are bounded by its
/// communicator's timeout).
const PROCS_TIMEOUT: Duration = Duration::from_secs(3600);

/// This process's device when it is a rank of `--procs` (`LOCAL_RANK`).
pub fn rank_device() -> Option<i32> {
    RankEnv::from_env().ok().flatten().and_then(|r| i32::try_from(r.local_rank).ok())
}

/// `--procs`: in the parent, spawns `procs` ranks (default one per device)
/// and returns rank 0's exit status when it is one of the documented
/// ones; in a rank, runs its part with a communicator from the environment,
/// rank 0 writing the report.
///
/// # Errors
/// [`Failure::Usage`] on the simulator, for too many ranks or with
/// multicast on (before any rank starts); [`Failure::Ranks`] naming the
/// rank that failed or hung; in a rank, as [`run`].
fn run_procs(
    ctx: &Ctx,
    args: &Args,
    procs: Option<usize>,
    opts: &NcclOptions,
    tuning: &Tuning,
    format: Format,
    out: Option<&PathBuf>,
) -> Result<i32, Failure> {
    let mut env = Vec::new();
    if opts.blocking {
        // A rank per process is blocking only with its connections made
        // at init (`CommOptions::blocking`), and then runs collectives only.
        // (--host-cost runs all-reduce alone.)
        if !args.host_cost
            && let Some(c) =
                opts.collectives.iter().find(|c| matches!(c, Collective::SendRecv | Collective::AllToAll))
        {
            return Err(Failure::Usage(format!(
                "--procs --blocking: {} connects its peers on first use, which a blocking rank of one process \
                 could wait for on the host: gpu-sync refuses it there; name the collectives \
                 (--collectives all-reduce,all-gather,reduce-scatter,broadcast) or leave --blocking out",
                c.name()
            )));
        }
        match std::env::var("NCCL_RUNTIME_CONNECT") {
            Ok(v) if v.trim() == "0" => {}
            Ok(v) => {
                return Err(Failure::Usage(format!(
                    "--procs --blocking: NCCL_RUNTIME_CONNECT={v} is set: a blocking rank of one process needs \
                     NCCL's connections made at init (NCCL_RUNTIME_CONNECT=0); unset it (the ranks get 0) or set 0"
                )));
            }
            Err(_) if std::env::var_os("RANK").is_some() => {
                return Err(Failure::Usage(
                    "--procs --blocking under a launcher: export NCCL_RUNTIME_CONNECT=0 for every rank (a blocking \
                     rank of one process needs NCCL's connections made at init)"
                        .into(),
                ));
            }
            // The spawned ranks get it.
            Err(_) => env.push(("NCCL_RUNTIME_CONNECT".into(), "0".into())),
        }
    }
    if ctx.sim {
        return Err(Failure::Usage(
            "--procs: cuda-sim's NCCL joins no other process; on the simulator run without --procs \
             (one process, every device)"
                .into(),
        ));
    }
    multicast_off(std::env::var("NCCL_NVLS_ENABLE").ok())?;
    let n = match RankEnv::from_env().map_err(|e| Failure::Usage(e.to_string()))? {
        // A rank already: spawn_local spawns nothing, the launcher's size counts.
        Some(r) => r.world_size,
        None => {
            let present = Device::count()?;
            let n = procs.unwrap_or(present);
            if n < 2 || n > present {
                return Err(Failure::Usage(format!(
                    "--procs {n}: {present} devices present; one rank per device, at least two"
                )));
            }
            n
        }
    };
    let spawned = gpu_sync::nccl::spawn_local(
        n,
        &SpawnOptions { timeout: PROCS_TIMEOUT, env, ..SpawnOptions::default() },
    );
    match spawned {
        Ok(SpawnRole::Parent) => Ok(0),
        Ok(SpawnRole::Rank(me)) => {
            let comm =
                Communicator::from_env(CommOptions { blocking: opts.blocking, ..CommOptions::default() })?;
            let max = opts.max_bytes as u64;
            crate::args::fits(&format!("nccl --max-bytes {max}"), comm.device(), 2 * max, 3 * max)?;
            if args.host_cost {
                let hopts = host_cost_options(opts, args.batches.unwrap_or(11));
                let n = comm.size();
                let rows = if me.rank == 0 {
                    let r = gpu_bench::nccl::host_cost_rank(comm, &hopts, &mut |m| ctx.progress.step(m))?;
                    ctx.progress.finish();
                    r
                } else {
                    gpu_bench::nccl::host_cost_rank(comm, &hopts, &mut |_| {})?
                };
                // Every rank holds every rank's rows; rank 0 speaks for them.
                let shape = format!("{n} ranks, one process per GPU");
                return if me.rank == 0 {
                    host_cost_report(ctx, &rows, &hopts, &shape, format, out)
                } else {
                    Ok(0)
                };
            }
            let report = if me.rank == 0 {
                let r = gpu_bench::nccl::run_rank(comm, opts, &mut |m| ctx.progress.step(m))?;
                ctx.progress.finish();
                r
            } else {
                gpu_bench::nccl::run_rank(comm, opts, &mut |_| {})?
            };
            // Every rank holds the same reduced rows; rank 0 speaks for them.
            if me.rank == 0 { write_and_judge(report, args, tuning, format, out) } else { Ok(0) }
        }
        // Rank 0 already printed why: its documented status is the command's.
        Err(SpawnError::RankFailed { rank: 0, status, .. })
            if status.code().is_some_and(|c| (1..=crate::EXIT_ERROR).contains(&c)) =>
        {
            Ok(status.code().unwrap_or(crate::EXIT_ERROR))
        }
        Err(e) => Err(Failure::Ranks(e)),
    }
}

/// Writes `report` (stdout in `format`; with `out`, the files, and NCCL's
/// tuning log of this process as nccl-tuning.log) and returns the exit
/// status. The report says why no row names an algorithm when the log was
/// off, and that writing it costs a line per call when on.
///
/// # Errors
/// [`Failure::Check`] after writing, when a row is an error; writing.
fn write_and_judge(
    mut report: gpu_bench::nccl::NcclReport,
    args: &Args,
    tuning: &Tuning,
    format: Format,
    out: Option<&PathBuf>,
) -> Result<i32, Failure> {
    match tuning {
        Tuning::Off(why) => report.algorithm = format!("not read: {why}"),
        Tuning::Log { pattern, .. } => {
            report.notes.push(
                "NCCL's tuning log on (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=TUNING): its rank 0 writes a line per \
                 call, on the host, while timed; --no-algorithms times without it"
                    .into(),
            );
            // Kept beside the report where it can be; a log that cannot be
            // copied fails nothing (the rows already say what it held).
            if let (Some(dir), Some(log)) = (out, gpu_bench::nccl::algo::resolve(pattern)) {
                let to = dir.join("nccl-tuning.log");
                if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::copy(&log, &to)) {
                    report.notes.push(format!(
                        "NCCL's tuning log not kept: {} to {}: {e}",
                        log.display(),
                        to.display()
                    ));
                }
            }
        }
    }
    let report = &report;
    let json = serde_json::to_string_pretty(&report).map_err(|e| Failure::Io(e.to_string()))? + "\n";
    crate::emit(format, out, &report.to_markdown(), &json, &report.to_csv())?;
    if let Some(dir) = out {
        write_text(&dir.join("busbw.svg"), &report.busbw_svg()).map_err(Failure::Io)?;
    }
    let failed: Vec<String> = report
        .failed_rows()
        .map(|r| format!("{} {} B: {}", r.collective, r.bytes, r.error.as_deref().unwrap_or("")))
        .collect();
    if !failed.is_empty() {
        return Err(Failure::Check(format!(
            "{} rows are errors, not results:\n  {}",
            failed.len(),
            failed.join("\n  ")
        )));
    }
    if let Some(min) = args.min_busbw {
        let below = report.below(min);
        if !below.is_empty() {
            for (c, v) in &below {
                eprintln!("gpu-bench: {c}: average busbw {v:.2} GB/s is below --min-busbw {min} GB/s");
            }
            return Ok(crate::EXIT_REGRESSION);
        }
    }
    Ok(0)
}

/// `--host-cost`: the tracked all-reduce against its raw twin
/// (`gpu_bench::nccl::host_cost`), one process driving `devices`; the
/// table as [`host_cost_report`] writes it.
fn host_cost(
    ctx: &Ctx,
    devices: &[Device],
    opts: &NcclOptions,
    batches: usize,
    format: Format,
    out: Option<&PathBuf>,
) -> Result<i32, Failure> {
    let hopts = host_cost_options(opts, batches);
    let rows = gpu_bench::nccl::host_cost(devices, &hopts, &mut |m| ctx.progress.step(m))?;
    ctx.progress.finish();
    let shape = format!("{} ranks, one process", devices.len());
    host_cost_report(ctx, &rows, &hopts, &shape, format, out)
}

/// What `--host-cost` measures: the sweep's sizes rounded up to whole f32
/// elements, its iterations and blocking mode, `batches` rounds.
fn host_cost_options(opts: &NcclOptions, batches: usize) -> gpu_bench::nccl::HostCostOptions {
    let sizes: Vec<usize> = opts.sizes().into_iter().map(|b| b.div_ceil(4) * 4).collect();
    gpu_bench::nccl::HostCostOptions { sizes, blocking: opts.blocking, iters: opts.iters, batches }
}

/// Writes `--host-cost`'s table (stdout, and host-cost.md, host-cost.json
/// in `out`): per size (and rank, one process per GPU) the raw and tracked
/// host µs per iteration, the added µs per iteration and per
/// `ncclAllReduce` call, the GPU µs; then the added cost's median and the
/// sizes above +1 µs per call.
fn host_cost_report(
    ctx: &Ctx,
    rows: &[gpu_bench::nccl::HostCostRow],
    hopts: &gpu_bench::nccl::HostCostOptions,
    shape: &str,
    format: Format,
    out: Option<&PathBuf>,
) -> Result<i32, Failure> {
    let mode = if hopts.blocking { "blocking" } else { "non-blocking" };
    let per_rank = rows.iter().any(|r| r.rank.is_some());
    let mut md = format!(
        "# NCCL all-reduce: host cost and GPU time, tracked against raw ({shape}, {mode} communicators{})\n\n\
         Medians of {} interleaved batches of {} iterations. An iteration issues one `ncclAllReduce` per rank \
         of the process (grouped when several); per call is the iteration's added cost over its calls. Raw \
         and tracked use gpu-sync's buffers (`cuMemAllocAsync`); the last two columns are raw calls on \
         buffers from `cuMemAlloc`, as nccl-tests and PyTorch allocate.\n\n\
         |{} bytes | calls | raw host µs | tracked host µs | added µs | added µs per call | raw GPU µs | tracked GPU µs \
         | raw on cuMemAlloc host µs | its GPU µs |\n\
         |{}---|---|---|---|---|---|---|---|---|---|\n",
        if ctx.sim { ", simulated" } else { "" },
        hopts.batches,
        hopts.iters,
        if per_rank { " rank |" } else { "" },
        if per_rank { "---|" } else { "" },
    );
    for r in rows {
        let rank = r.rank.map_or(String::new(), |k| format!(" {k} |"));
        md += &format!(
            "|{rank} {} | {} | {:.2} | {:.2} | {:+.2} | {:+.2} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            r.bytes,
            r.calls,
            r.raw_host_us,
            r.ours_host_us,
            r.host_added_us(),
            r.host_added_per_call_us(),
            r.raw_gpu_us,
            r.ours_gpu_us,
            r.raw_legacy_host_us,
            r.raw_legacy_gpu_us
        );
    }
    let per_call: Vec<f64> = rows.iter().map(|r| r.host_added_per_call_us()).collect();
    let per_iter: Vec<f64> = rows.iter().map(|r| r.host_added_us()).collect();
    let above = |v: &[f64]| v.iter().filter(|&&a| a > 1.0).count();
    if !rows.is_empty() {
        md += &format!(
            "\nAdded µs: median {:+.2} per iteration ({} of {} rows above +1), {:+.2} per call ({} above +1).\n",
            gpu_bench::stats::median(&per_iter),
            above(&per_iter),
            rows.len(),
            gpu_bench::stats::median(&per_call),
            above(&per_call),
        );
    }
    let json = serde_json::to_string_pretty(&rows).map_err(|e| Failure::Io(e.to_string()))? + "\n";
    match out {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| Failure::Io(format!("{}: {e}", dir.display())))?;
            write_text(&dir.join("host-cost.md"), &md).map_err(Failure::Io)?;
            write_text(&dir.join("host-cost.json"), &json).map_err(Failure::Io)?;
            print!("{md}");
        }
        None => print!("{}", if matches!(format, Format::Json) { &json } else { &md }),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_must_be_off() {
        assert!(multicast_off(Some("0".into())).is_ok());
        for v in [None, Some("1".to_owned()), Some(String::new())] {
            let e = multicast_off(v).unwrap_err().to_string();
            assert!(e.contains("export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1"), "{e}");
        }
    }
}
