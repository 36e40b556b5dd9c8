//! Project tasks, run as `cargo xtask <task>`.
//!
//! This file only dispatches; each task lives in its own module. Tasks shell
//! out only to cargo, pip and nvcc, and say what to install when one is
//! missing.

mod bindgen;
mod gpu_bundle;
mod kernels;
mod roofline;
mod sass;
mod util;
mod wheels;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "gpu-sync workspace tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Regenerate cuda-sys/src/generated/ (bindings, entry points, result names, NVRTC, MANIFEST)
    /// from the pinned CUDA 13.0 headers.
    Bindgen {
        /// Regenerate into a temporary folder and fail if any committed file differs (needs
        /// libclang and the pinned wheels).
        #[arg(long)]
        check: bool,
    },
    /// Compile kernels/cu/*.cu into kernels/fatbin/ with nvcc from pinned wheels.
    Kernels {
        /// Only check that every fatbin is fresh for its source (offline, no nvcc).
        #[arg(long)]
        check: bool,
    },
    /// Build gpu-bench in release and run its roofline into target/roofline/.
    Roofline {
        /// Extra arguments passed to `gpu-bench roofline`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build every test binary and gpu-bench for a GPU host into target/gpu-bundle/.
    GpuBundle,
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Bindgen { check } => bindgen::run(check),
        Task::Kernels { check } => {
            if check {
                kernels::check()
            } else {
                kernels::build()
            }
        }
        Task::Roofline { args } => roofline::run(&args),
        Task::GpuBundle => gpu_bundle::run(),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
