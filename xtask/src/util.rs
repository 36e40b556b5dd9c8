//! Small helpers shared by the tasks: the workspace root and running commands.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (the parent of this crate's manifest directory).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The cargo that runs this xtask (falls back to `cargo` on the PATH).
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Runs `cmd`, failing with the command line and its exit status.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("could not start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// Hex SHA-256 of a byte string.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Builds the `gpu-bench` binary (package `gpu-bench-cli`) in release,
/// saying so first and letting cargo's own progress through (a cold
/// release build takes minutes; `cargo xtask` itself runs `--quiet`);
/// returns its path.
pub fn build_gpu_bench() -> Result<PathBuf> {
    eprintln!("building gpu-bench (release; a first build takes a few minutes)…");
    run(Command::new(cargo()).current_dir(root()).args(["build", "--release", "--package", "gpu-bench-cli"]))
        .context("building gpu-bench")?;
    Ok(root().join("target/release/gpu-bench"))
}
