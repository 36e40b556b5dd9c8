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
mod nccl;
mod overhead;
mod overlap;
mod p2p;
mod roofline;
mod sync_costs;
mod timeline;
mod timer;
mod truth;

use clap::FromArgMatches;
use common::{Ctx, Failure};
use gpu_bench::Settings;
use gpu_bench::render::{Format, write_text};
use gpu_bench_cli::cli::{Cli, Command, DriverKind, FormatArg, command, measuring_flags_given};
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

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let matches = command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Some(sub) = matches.subcommand_name() {
        let _ = common::SUBCOMMAND.set(sub.to_owned());
    }
    let code = match nothing_measured_with(&cli, &matches).and_then(|()| run(cli)) {
        Ok(code) => code,
        Err(f) => {
            eprintln!("gpu-bench: {f}");
            f.exit_code()
        }
    };
    std::process::exit(code);
}

/// `compare` and `roofline --replay` measure nothing: a flag choosing a
/// device or how to sample it, given with them, would be silently dropped,
/// so it is refused, both named.
fn nothing_measured_with(cli: &Cli, matches: &clap::ArgMatches) -> Result<(), Failure> {
    let what = match &cli.command {
        Command::Compare { .. } => "compare",
        Command::Roofline(a) if a.replay.is_some() => "roofline --replay",
        _ => return Ok(()),
    };
    match measuring_flags_given(matches).as_slice() {
        [] => Ok(()),
        given => Err(Failure::Usage(format!(
            "{} cannot be used with {what}: it measures nothing (no device, no sampling)",
            given.join(", ")
        ))),
    }
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
        Results::from_json(&text).map_err(|e| {
            // A NaN or infinity written by another tool is a `null`: name it.
            let null = serde_json::from_str(&text).ok().and_then(|v| roofline::validate::null_figure(&v, ""));
            Failure::Usage(match null {
                Some(field) => format!("{}: {field} is null, not a finite number ({e})", p.display()),
                None => format!("{}: {e}", p.display()),
            })
        })
    };
    let (o, n) = (read(old)?, read(new)?);
    let c = compare_results(&o, &n, GateOptions { threshold, allow_different_env }).map_err(usage)?;
    let json = serde_json::to_string_pretty(&c).map_err(|e| Failure::Io(e.to_string()))? + "\n";
    emit(format, out, &c.to_markdown(), &json, &c.to_csv())?;
    Ok(if c.regressed() { EXIT_REGRESSION } else { 0 })
}

/// Runs `cli`'s command. Called by `main` before any thread exists (clap
/// and env_logger start none): `nccl` sets NCCL's variables here, before
/// anything loads CUDA or NCCL.
fn run(cli: Cli) -> Result<i32, Failure> {
    let tuning = match &cli.command {
        // SAFETY: main calls run from its own thread before anything has
        // started another (argument parsing and the logger start none; the
        // driver, its threads and NCCL load below).
        Command::Nccl(a) => Some(unsafe { nccl::tuning_env(a) }),
        _ => None,
    };
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
    // A rank of `nccl --procs` opens its own device only (LOCAL_RANK).
    let device = match &cli.command {
        Command::Nccl(a) if a.procs.is_some() => nccl::rank_device().unwrap_or(cli.device),
        _ => cli.device,
    };
    let ctx = Ctx::open(choice, device, settings, cli.quick)?;
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
        Command::Nccl(args) => {
            let tuning = tuning.unwrap_or(nccl::Tuning::Off("not the nccl command".into()));
            return nccl::run(&ctx, &args, &tuning, format, cli.out.as_ref());
        }
        Command::Overhead { batches, per_batch, repeat, free_running } => overhead::run(
            &ctx,
            overhead::Options {
                batches,
                per_batch,
                repeat,
                method: if free_running { overhead::Method::FreeRunning } else { overhead::Method::Gated },
            },
        )?,
        Command::Truth { launch_only, kernel_records } => {
            truth::run(&ctx, launch_only, kernel_records.records())?
        }
        Command::SyncCosts => sync_costs::run(&ctx)?,
        Command::Bandwidth { max_mib } => bandwidth::run(&ctx, max_mib)?,
        Command::Overlap { chunk_bytes, chunks } => overlap::run(&ctx, chunk_bytes, chunks)?,
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

    #[test]
    fn every_setting_has_its_flag_and_variable() {
        let cmd = command();
        for (field, flag, env) in Settings::NAMES {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long().map(|l| format!("--{l}")) == Some(flag.to_owned()))
                .unwrap_or_else(|| panic!("no {flag} for {field}"));
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(env), "{flag}");
        }
    }

    /// `truth` reads CUPTI's range profiler unless told otherwise (issue 26:
    /// the source that matched Nsight Compute on every case on an H100).
    #[test]
    fn truth_reads_the_range_profiler_by_default() -> Result<(), clap::Error> {
        let records = |args: &[&str]| -> Result<Option<gpu_bench::KernelRecords>, clap::Error> {
            let m = command().try_get_matches_from(args)?;
            Ok(match Cli::from_arg_matches(&m)?.command {
                Command::Truth { kernel_records, .. } => Some(kernel_records.records()),
                _ => None,
            })
        };
        assert_eq!(records(&["gpu-bench", "truth"])?, Some(gpu_bench::KernelRecords::Profiler));
        let concurrent = records(&["gpu-bench", "truth", "--kernel-records", "concurrent"])?;
        assert_eq!(concurrent, Some(gpu_bench::KernelRecords::Concurrent));
        Ok(())
    }
}
