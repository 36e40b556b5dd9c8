//! `gpu-bench`: the workspace's benchmarks on the gpu-bench engine.
//!
//! One output convention for every subcommand: the report goes to stdout in
//! `--format md|json|csv` (markdown by default); with `--out DIR`,
//! `report.md`, `results.json` and `results.csv` are written there too.
//! `--driver sim` runs on the software driver cuda-sim (a laptop's first
//! look): every time is then simulated, and the reports say so. Without
//! `--driver`, `GPU_BENCH_DRIVER`, then the library's `GPU_SYNC_DRIVER`,
//! choose; else the real driver.
//!
//! Every numeric flag has a range (`args.rs`); `--quick` sets defaults and
//! explicit values win; sizes are checked against host and device memory,
//! `--out` for writing and `--device` against the devices present, before
//! anything runs.
//!
//! Exit codes: 0 success; 1 a regression (`compare`); 2 bad arguments;
//! 3 no CUDA driver; 4 a measurement failed a check (a kernel computed a
//! wrong result); 5 any other error (a driver error, I/O).
//!
//! A progress bar (indicatif) runs on stderr while stdout is a terminal;
//! logs go to stderr through env_logger (`RUST_LOG=debug`).

mod args;
mod bandwidth;
mod common;
mod overhead;
mod overlap;
mod p2p;
mod roofline;
mod sync_costs;
mod timeline;
mod timer;
mod truth;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use common::{Ctx, Failure};
use gpu_bench::Settings;
use gpu_bench::render::{Format, write_text};
use gpu_sync::DriverChoice;
use std::path::PathBuf;

/// Exit status: a regression.
pub const EXIT_REGRESSION: i32 = 1;
/// Exit status: bad arguments (clap's own usage errors use it too).
pub const EXIT_USAGE: i32 = 2;
/// Exit status: no CUDA driver.
pub const EXIT_NO_DRIVER: i32 = 3;
/// Exit status: a measurement failed a check.
pub const EXIT_CHECK: i32 = 4;
/// Exit status: any other error.
pub const EXIT_ERROR: i32 = 5;

#[derive(Parser)]
#[command(
    name = "gpu-bench",
    version,
    about = "GPU measurement you can trust",
    allow_negative_numbers = true
)]
struct Cli {
    /// Device ordinal.
    #[arg(long, global = true, default_value_t = 0, env = "GPU_BENCH_DEVICE", value_parser = args::ordinal)]
    device: i32,
    /// Which driver: the real CUDA driver, the simulator (simulated times),
    /// or auto (the GPU when libcuda loads, else the simulator). Without the
    /// flag, `GPU_BENCH_DRIVER`, then `GPU_SYNC_DRIVER` (the variable the
    /// library reads) decide; else cuda.
    #[arg(long, global = true, value_enum, env = "GPU_BENCH_DRIVER")]
    driver: Option<DriverKind>,
    /// Output format on stdout.
    #[arg(long, global = true, value_enum, default_value_t = FormatArg::Md, env = "GPU_BENCH_FORMAT")]
    format: FormatArg,
    /// Also write report.md, results.json and results.csv into this folder.
    #[arg(long, global = true, env = "GPU_BENCH_OUT")]
    out: Option<PathBuf>,
    /// A short smoke run: small sizes, few samples.
    #[arg(long, global = true, env = "GPU_BENCH_QUICK")]
    quick: bool,
    #[command(flatten)]
    settings: SettingsArgs,
    #[command(subcommand)]
    command: Command,
}

/// The sampling settings: one name per setting (see `gpu_bench::Settings::NAMES`).
#[derive(clap::Args)]
struct SettingsArgs {
    /// Fewest samples per mode.
    #[arg(long, global = true, env = "GPU_BENCH_MIN_SAMPLES", value_parser = args::count)]
    min_samples: Option<usize>,
    /// Least measured device time per mode, seconds.
    #[arg(long, global = true, env = "GPU_BENCH_MIN_TIME_S", value_parser = args::limit_secs)]
    min_time_s: Option<f64>,
    /// Stop once the median's noise is below this many percent.
    #[arg(long, global = true, env = "GPU_BENCH_MAX_NOISE_PCT", value_parser = args::pct)]
    max_noise_pct: Option<f64>,
    /// Give up on a mode after this many seconds.
    #[arg(long, global = true, env = "GPU_BENCH_TIMEOUT_S", value_parser = args::limit_secs)]
    timeout_s: Option<f64>,
    /// Most samples per mode.
    #[arg(long, global = true, env = "GPU_BENCH_MAX_SAMPLES", value_parser = args::count)]
    max_samples: Option<usize>,
    /// Fewest warmup runs.
    #[arg(long, global = true, env = "GPU_BENCH_WARMUP_MIN", value_parser = args::count)]
    warmup_min: Option<usize>,
    /// Most warmup runs.
    #[arg(long, global = true, env = "GPU_BENCH_WARMUP_MAX", value_parser = args::count)]
    warmup_max: Option<usize>,
    /// Runs per sample in batch mode.
    #[arg(long, global = true, env = "GPU_BENCH_BATCH_RUNS", value_parser = args::batch_runs)]
    batch_runs: Option<usize>,
}

impl SettingsArgs {
    fn apply(&self, base: Settings) -> Settings {
        let mut s = base;
        macro_rules! take {
            ($($f:ident),*) => {$(if let Some(v) = self.$f { s.$f = v; })*};
        }
        take!(
            min_samples,
            min_time_s,
            max_noise_pct,
            timeout_s,
            max_samples,
            warmup_min,
            warmup_max,
            batch_runs
        );
        s
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DriverKind {
    /// libcuda.so.1.
    Cuda,
    /// The software driver cuda-sim: simulated times.
    Sim,
    /// libcuda.so.1 when it loads, else cuda-sim.
    Auto,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FormatArg {
    /// Markdown tables.
    Md,
    /// JSON (schema gpu-bench.report, versioned).
    Json,
    /// CSV, one row per counter.
    Csv,
}

#[derive(Subcommand)]
enum Command {
    /// Device name, SMs, clocks, memory bus, L2, PCIe link, driver.
    Info,
    /// The timer checked on a spin kernel of known length (10 µs … 10 ms) in
    /// every mode, with an A/A calibration and a paired A/B run.
    Timer {
        /// Threshold of the A/A calibration and the A/B verdict, percent.
        #[arg(long, default_value_t = 2.0, value_parser = args::pct)]
        threshold_pct: f64,
    },
    /// The roofline: every ceiling (HBM, L2, L1/shared, FMA per precision),
    /// the sweeps, the kernels placed; report.md, results.json, roofline.svg.
    Roofline(roofline::Args),
    /// Host cost per launch: raw driver vs gpu-sync, one stream and a handoff;
    /// batches queued behind a spin gate unless --free-running.
    Overhead {
        /// Batches per variant (interleaved batch by batch) in each repetition;
        /// default 40, 5 with --quick.
        #[arg(long, value_parser = args::batches)]
        batches: Option<usize>,
        /// Submissions per batch, default 200, 20 with --quick (a handoff batch is queued in gated segments
        /// that fit the driver's queue).
        #[arg(long, value_parser = args::batches)]
        per_batch: Option<usize>,
        /// Repeat the whole interleaved comparison this many times and report
        /// each repetition's ratios and their min/median/max.
        #[arg(long, default_value_t = 1, value_parser = args::repeat)]
        repeat: usize,
        /// Time batches with nothing holding the GPU (the first reports'
        /// method) instead of behind a spin gate.
        #[arg(long, visible_alias = "no-gate")]
        free_running: bool,
    },
    /// The timer against the GPU's own clock: four memory kernels at five
    /// sizes and a spin kernel at five lengths, in every mode, each event
    /// mode's excess over kernel mode (CUPTI) reported.
    Truth {
        /// Only launch each case this many times (no timing), for an external
        /// profiler such as Nsight Compute to time the same launches.
        #[arg(long, value_parser = args::launches)]
        launch_only: Option<usize>,
    },
    /// The right and wrong ways to time, and what synchronization costs.
    SyncCosts,
    /// H2D, D2H and both at once; pinned vs pageable; copy engine vs SM copy.
    Bandwidth {
        /// Largest transfer, MiB (sizes go from 4 KiB up by 4x); default 1024,
        /// 1 with --quick or on the simulator.
        #[arg(long, value_parser = args::mib)]
        max_mib: Option<usize>,
    },
    /// Copy/compute overlap with the prefetcher: pinned vs pageable.
    Overlap {
        /// Bytes per chunk, MiB; default 32, 0.25 with --quick or on the
        /// simulator.
        #[arg(long, value_parser = args::mib)]
        chunk_mib: Option<usize>,
        /// Chunks, at least 2; default 16, 4 with --quick or on the simulator.
        #[arg(long, value_parser = args::count2)]
        chunks: Option<usize>,
    },
    /// The profiler on a demonstration pipeline (H2D, compute, D2H on three
    /// streams; pinned, then pageable): trace.json for Perfetto, table.md,
    /// table.json, timeline.svg and summary.json in --out (default ./timeline).
    Timeline(timeline::Args),
    /// Every ordered pair of devices: copy bandwidth one way and both ways,
    /// peer access off and on, SM copy push and pull, 4-byte latency, the
    /// NVLink count, the raw cuMemcpyPeerAsync loop beside; heatmap.svg in --out.
    P2p(p2p::Args),
    /// Compares two results.json files (timer reports, or two rooflines
    /// per ceiling): a CI gate that exits 1 only on a regression.
    ///
    /// Each row (benchmark x mode, or ceiling) gets an interval of new/old
    /// at 1 - 5%/m for m rows (Bonferroni), so two runs of the same code get
    /// any verdict in at most 5% of reports however many rows they have.
    /// Times: distribution-free intervals of each median (order statistics);
    /// ceilings: from each one's noise. SLOWER only when the whole interval
    /// lies above 1 + threshold (a ceiling: below 1 - threshold); a mode with
    /// too few samples for an interval (a one-sample first call) is shown as
    /// such and never decides.
    ///
    /// Exit 0: something was compared and nothing regressed; 1: a regression;
    /// 2: bad arguments, a NaN/infinite/zero/negative time (named), nothing
    /// in common or nothing with enough samples, or files of different GPUs,
    /// drivers or schema versions (unless --allow-different-env).
    #[command(verbatim_doc_comment)]
    Compare {
        /// The baseline results.json.
        old: PathBuf,
        /// The new results.json.
        new: PathBuf,
        /// The change that counts: a percentage (`5%`) or a fraction in
        /// (0, 1) (`0.05`); a bare `5` is refused as ambiguous.
        #[arg(long, default_value = "5%", allow_hyphen_values = true)]
        threshold: String,
        /// Compare results of different GPUs, drivers or schema versions,
        /// the differences listed in the report, instead of refusing.
        #[arg(long)]
        allow_different_env: bool,
    },
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    // Negative numbers are values everywhere (refused by each flag's range
    // with a message), never taken for unknown flags.
    let matches = Cli::command().mut_subcommands(|c| c.allow_negative_numbers(true)).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let code = match run(cli) {
        Ok(code) => code,
        Err(f) => {
            eprintln!("gpu-bench: {f}");
            f.exit_code()
        }
    };
    std::process::exit(code);
}

fn emit(format: Format, out: Option<&PathBuf>, md: &str, json: &str, csv: &str) -> Result<(), Failure> {
    print!(
        "{}",
        match format {
            Format::Md => md,
            Format::Json => json,
            Format::Csv => csv,
        }
    );
    if let Some(dir) = out {
        write_text(&dir.join("report.md"), md).map_err(Failure::Io)?;
        write_text(&dir.join("results.json"), json).map_err(Failure::Io)?;
        write_text(&dir.join("results.csv"), csv).map_err(Failure::Io)?;
        log::info!("wrote {}/report.md, results.json, results.csv", dir.display());
    }
    Ok(())
}

/// `gpu-bench compare`: every refusal of the gate is a usage error (exit 2).
fn compare(
    old: &PathBuf,
    new: &PathBuf,
    threshold: &str,
    allow_different_env: bool,
    format: Format,
    out: Option<&PathBuf>,
) -> Result<i32, Failure> {
    use gpu_bench::compare::{GateOptions, Results, compare_results, parse_threshold};
    let usage = |e: gpu_bench::compare::GateError| Failure::Usage(format!("compare: {e}"));
    let threshold = parse_threshold(threshold).map_err(|e| Failure::Usage(format!("--threshold {e}")))?;
    if let Some(dir) = out {
        args::out_writable(dir)?;
    }
    let read = |p: &PathBuf| {
        let text = std::fs::read_to_string(p).map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))?;
        Results::from_json(&text).map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))
    };
    let (o, n) = (read(old)?, read(new)?);
    let c = compare_results(&o, &n, GateOptions { threshold, allow_different_env }).map_err(usage)?;
    let json = serde_json::to_string_pretty(&c).map_err(|e| Failure::Io(e.to_string()))? + "\n";
    emit(format, out, &c.to_markdown(), &json, &c.to_csv())?;
    Ok(if c.regressed() { EXIT_REGRESSION } else { 0 })
}

fn run(cli: Cli) -> Result<i32, Failure> {
    let format = match cli.format {
        FormatArg::Md => Format::Md,
        FormatArg::Json => Format::Json,
        FormatArg::Csv => Format::Csv,
    };
    if let Command::Compare { old, new, threshold, allow_different_env } = &cli.command {
        return compare(old, new, threshold, *allow_different_env, format, cli.out.as_ref());
    }
    if let Some(dir) = &cli.out {
        args::out_writable(dir)?;
    }
    if let Command::Roofline(args @ roofline::Args { replay: Some(file), .. }) = &cli.command {
        return roofline::replay(args, file, cli.out.as_ref());
    }
    let choice = match cli.driver {
        Some(DriverKind::Cuda) => DriverChoice::Cuda,
        Some(DriverKind::Sim) => DriverChoice::Sim,
        Some(DriverKind::Auto) => DriverChoice::Auto,
        // The library's own variable, so one setting picks the driver for
        // both; the real driver when neither says.
        None => match std::env::var(gpu_sync::DRIVER_ENV) {
            Ok(v) => v.parse().map_err(|e: gpu_sync::Error| Failure::Usage(e.to_string()))?,
            Err(_) => DriverChoice::Cuda,
        },
    };
    let backend = gpu_sync::select_driver_with(choice).map_err(|e| Failure::NoDriver(e.to_string()))?;
    // Defaults: --quick's, else the simulator's (exact times, CPU-priced
    // runs), else nvbench's; then GPU_BENCH_* variables, then flags.
    let base = if cli.quick {
        Settings::quick()
    } else if backend.is_sim() {
        Settings::sim()
    } else {
        Settings::default()
    };
    let settings = cli.settings.apply(base.with_env().map_err(Failure::Usage)?);
    settings.validate().map_err(Failure::Usage)?;
    let ctx = Ctx::open(choice, cli.device, settings, cli.quick)?;
    let report = match cli.command {
        Command::Info => {
            let r = ctx.report("Device")?;
            let json =
                serde_json::to_string_pretty(&r.device).map_err(|e| Failure::Io(e.to_string()))? + "\n";
            let md = gpu_bench::render::header(&r) + &r.device.to_markdown();
            emit(format, cli.out.as_ref(), &md, &json, &gpu_bench::render::csv(&r))?;
            return Ok(0);
        }
        Command::Timer { threshold_pct } => timer::run(&ctx, threshold_pct / 100.0)?,
        Command::Roofline(args) => return roofline::run(&ctx, &args, cli.out.as_ref()),
        Command::Timeline(args) => return timeline::run(&ctx, &args, cli.out.as_ref()),
        Command::P2p(args) => return p2p::run(&ctx, &args, format, cli.out.as_ref()),
        Command::Overhead { batches, per_batch, repeat, free_running } => overhead::run(
            &ctx,
            overhead::Options {
                batches,
                per_batch,
                repeat,
                method: if free_running { overhead::Method::FreeRunning } else { overhead::Method::Gated },
            },
        )?,
        Command::Truth { launch_only } => truth::run(&ctx, launch_only)?,
        Command::SyncCosts => sync_costs::run(&ctx)?,
        Command::Bandwidth { max_mib } => bandwidth::run(&ctx, max_mib)?,
        Command::Overlap { chunk_mib, chunks } => overlap::run(&ctx, chunk_mib, chunks)?,
        Command::Compare { .. } => unreachable!("handled above"),
    };
    let mut report = report;
    if ctx.sim {
        report.notes.push(
            "on the simulator, sampling and sizes are scaled to it (exact times, runs priced in CPU time): \
             5 to 20 samples, batches of 8, no minimum time, arrays of at most 1 MiB unless a flag says \
             otherwise"
                .into(),
        );
    }
    ctx.progress.finish();
    let md = gpu_bench::render::markdown(&report);
    emit(format, cli.out.as_ref(), &md, &gpu_bench::render::json(&report), &gpu_bench::render::csv(&report))?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_setting_has_its_flag_and_variable() {
        let cmd = Cli::command();
        for (field, flag, env) in Settings::NAMES {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long().map(|l| format!("--{l}")) == Some(flag.to_owned()))
                .unwrap_or_else(|| panic!("no {flag} for {field}"));
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(env), "{flag}");
        }
    }
}
