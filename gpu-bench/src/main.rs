//! `gpu-bench`: device facts, memory ceilings and launch overhead.
//!
//! Every command prints a table to stdout and, with `--out`, writes
//! `report.md` and `results.json` there. Without a CUDA driver it exits with
//! status 1 and one line saying what is missing.

use clap::{Parser, Subcommand};
use gpu_bench::overhead::{self, OverheadConfig};
use gpu_bench::report::{write_json, write_text};
use gpu_bench::roofline::{self, RooflineConfig};
use gpu_bench::timer::BenchConfig;
use gpu_sync::Device;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "gpu-bench", version, about = "GPU measurement you can trust")]
struct Cli {
    /// Device ordinal.
    #[arg(long, global = true, default_value_t = 0, env = "GPU_BENCH_DEVICE")]
    device: i32,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Device name, SMs, clocks, memory bus, L2, driver version.
    Info {
        /// Also write the facts as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Memory ceilings: HBM read, copy and triad bandwidth, results checked.
    Roofline {
        /// Folder for report.md and results.json.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Size of each array in MiB (use several times the L2).
        #[arg(long, default_value_t = 1024)]
        array_mib: usize,
        /// Stop sampling once the relative noise is below this percentage.
        #[arg(long, default_value_t = 0.5)]
        max_noise_pct: f64,
        /// Give up on a probe after this many seconds.
        #[arg(long, default_value_t = 15.0)]
        timeout_s: f64,
        /// A short smoke run: 4 MiB arrays, 3 samples.
        #[arg(long)]
        quick: bool,
    },
    /// Host cost per launch: raw driver vs gpu-sync, one stream and a handoff.
    Overhead {
        /// Folder for report.md and results.json.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Batches per variant.
        #[arg(long, default_value_t = 200)]
        batches: usize,
        /// Submissions per batch.
        #[arg(long, default_value_t = 200)]
        per_batch: usize,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("gpu-bench: {e}");
        std::process::exit(1);
    }
}

fn progress(msg: &str) {
    eprintln!("[gpu-bench] {msg}");
}

/// Prints the markdown and, with `--out`, writes report.md and results.json.
fn emit<T: serde::Serialize>(md: &str, report: &T, out: Option<PathBuf>) -> Result<(), String> {
    print!("{md}");
    if let Some(dir) = out {
        write_text(&dir.join("report.md"), md)?;
        write_json(&dir.join("results.json"), report)?;
        progress(&format!("wrote {}/report.md and results.json", dir.display()));
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), String> {
    let device = Device::get(cli.device).map_err(|e| e.to_string())?;
    match cli.command {
        Command::Info { json } => {
            let info = gpu_bench::info::device_info(&device).map_err(|e| e.to_string())?;
            print!("{}", info.to_markdown());
            if let Some(path) = json {
                write_json(&path, &info)?;
            }
        }
        Command::Roofline { out, array_mib, max_noise_pct, timeout_s, quick } => {
            let mut cfg = RooflineConfig::default();
            if quick {
                cfg.array_bytes = 4 << 20;
                cfg.bench = BenchConfig::quick();
            } else {
                cfg.array_bytes = array_mib.checked_mul(1 << 20).ok_or("--array-mib is too large")?;
                cfg.bench.max_noise = max_noise_pct / 100.0;
                cfg.bench.timeout =
                    Duration::try_from_secs_f64(timeout_s).map_err(|e| format!("--timeout-s: {e}"))?;
            }
            let report = roofline::run(&device, &cfg, &mut progress).map_err(|e| e.to_string())?;
            emit(&report.to_markdown(), &report, out)?;
        }
        Command::Overhead { out, batches, per_batch } => {
            let cfg = OverheadConfig { batches, per_batch, ..OverheadConfig::default() };
            let report = overhead::run(&device, &cfg, &mut progress).map_err(|e| e.to_string())?;
            emit(&report.to_markdown(), &report, out)?;
        }
    }
    Ok(())
}
