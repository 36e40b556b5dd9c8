//! The pinned CUDA 13.0 wheels from PyPI, installed under `target/cuda-wheels/`.
//!
//! One pip install of the four wheels gives a toolkit tree at
//! `target/cuda-wheels/nvidia/cu13/` (bin/nvcc, nvvm/bin/cicc, include/cuda.h …).
//! `nvidia-nvvm` is pinned explicitly: left alone, pip brings 13.5, whose PTX
//! 9.5 the 13.0 compiler and the GPU machine's 580 driver reject.

use crate::util::{root, run};
use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;

/// The version every CUDA wheel is pinned to.
pub const CUDA_WHEEL_VERSION: &str = "13.0.88";

/// Wheels needed to compile kernels (nvcc, cicc, the crt and runtime headers).
pub const NVCC_WHEELS: &[&str] =
    &["nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime"];

/// Where the wheels are installed.
pub fn prefix() -> PathBuf {
    root().join("target").join("cuda-wheels")
}

/// The toolkit tree inside the wheels (`…/nvidia/cu13`).
pub fn cuda_home() -> PathBuf {
    prefix().join("nvidia").join("cu13")
}

/// Installs `names` (each pinned to [`CUDA_WHEEL_VERSION`]) unless a marker
/// says this exact set is already there.
pub fn ensure(names: &[&str]) -> Result<PathBuf> {
    let prefix = prefix();
    let marker = prefix.join(format!(".installed-{CUDA_WHEEL_VERSION}"));
    let have = std::fs::read_to_string(&marker).unwrap_or_default();
    if names.iter().all(|n| have.split(',').any(|h| h == *n)) {
        return Ok(cuda_home());
    }
    let python = find_python()?;
    eprintln!("installing pinned CUDA {CUDA_WHEEL_VERSION} wheels into {}", prefix.display());
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .args(["--no-deps", "--upgrade", "--target"])
        .arg(&prefix);
    // Install the union of what was there and what is asked, so a later
    // `--upgrade` does not drop an earlier wheel.
    let mut all: Vec<String> = std::fs::read_to_string(&marker)
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    for n in names {
        if !all.iter().any(|a| a == n) {
            all.push((*n).to_owned());
        }
    }
    for n in &all {
        // A name with its own pin (`nvidia-cuda-cupti==13.0.85`) keeps it.
        if n.contains("==") {
            cmd.arg(n)
        } else {
            cmd.arg(format!("{n}=={CUDA_WHEEL_VERSION}"))
        };
    }
    run(&mut cmd).context(
        "pip could not install the CUDA wheels; needs python3 with pip and access to PyPI \
         (Debian: apt install python3-pip)",
    )?;
    std::fs::write(&marker, all.join(",")).context("writing the wheel marker")?;
    Ok(cuda_home())
}

fn find_python() -> Result<String> {
    for p in ["python3", "python"] {
        if Command::new(p)
            .args(["-m", "pip", "--version"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
        {
            return Ok(p.to_owned());
        }
    }
    bail!("no python3 with pip found; install it (Debian: apt install python3 python3-pip)")
}
