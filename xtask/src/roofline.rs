//! `cargo xtask roofline`: the main job. Builds gpu-bench in release and runs
//! its `roofline` command, writing `target/roofline/report.md` and
//! `target/roofline/results.json`.

use crate::util::{build_gpu_bench, root};
use anyhow::{Context, Result, bail};
use std::process::Command;

/// Runs the task; `args` go to `gpu-bench roofline`.
pub fn run(args: &[String]) -> Result<()> {
    let bin = build_gpu_bench()?;
    let out = root().join("target/roofline");
    let status = Command::new(&bin)
        .arg("roofline")
        .arg("--out")
        .arg(&out)
        .args(args)
        .status()
        .with_context(|| format!("could not start {}", bin.display()))?;
    if !status.success() {
        bail!("gpu-bench roofline failed ({status}); see its message above");
    }
    eprintln!("roofline written to {}/report.md and results.json", out.display());
    Ok(())
}
