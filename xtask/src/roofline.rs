//! `cargo xtask roofline`: the main job. Builds gpu-bench in release and runs
//! its `roofline` command, writing `target/roofline/report.md`,
//! `target/roofline/results.json` and `target/roofline/roofline.svg`.
//! Arguments go through: `cargo xtask roofline --replay FILE` re-renders a
//! saved results.json with no GPU, `--quick --driver sim` runs on the
//! simulator, `--tune` adds the HBM tuning search, `--peers FILE` merges
//! PyTorch figures. The release build's progress is shown (a cold build
//! takes minutes); on a machine without a GPU, gpu-bench's hint names
//! `cargo xtask roofline --driver sim`.

use crate::util::{build_gpu_bench, root};
use anyhow::{Context, Result};
use std::process::Command;

/// Runs the task; `args` go to `gpu-bench roofline`.
pub fn run(args: &[String]) -> Result<()> {
    let bin = build_gpu_bench()?;
    let out = root().join("target/roofline");
    let status = Command::new(&bin)
        // gpu-bench's no-driver hint names this command, not its own.
        .env("GPU_BENCH_INVOKED_AS", "cargo xtask roofline")
        .arg("roofline")
        .arg("--out")
        .arg(&out)
        .args(args)
        .status()
        .with_context(|| format!("could not start {}", bin.display()))?;
    if !status.success() {
        // gpu-bench has said why (one message: no driver, a failed check…);
        // pass its exit code on instead of repeating it.
        log::debug!("gpu-bench roofline exited with {status}");
        std::process::exit(status.code().unwrap_or(1));
    }
    eprintln!("roofline written to {0}/report.md, {0}/results.json and {0}/roofline.svg", out.display());
    Ok(())
}
