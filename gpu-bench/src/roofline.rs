//! The memory side of the roofline: HBM bandwidth measured with streaming
//! kernels of 16-byte loads, each run's result checked against the CPU
//! reference so a fast wrong kernel cannot pass.
//!
//! Probes (bytes counted as each input read once and each output written
//! once, from the kernels' cost models):
//! - `read`: `read_sum_u32x4` over one array — the HBM read ceiling;
//! - `copy`: `copy_u32x4` from one array to another (read + write);
//! - `triad`: `triad_f32`, a = b + s·c (two reads, one write).
//!
//! Arrays default to 1 GiB each, many times the L2 (50–60 MB on Hopper), so
//! repeated runs stream from HBM.

use crate::info::{DeviceInfo, device_info};
use crate::stats::sig4;
use crate::timer::{BenchConfig, Measurement, measure};
use gpu_sync::{Device, DeviceBuffer, Stream};
use kernels::{Kernels, cost, reference};
use serde::Serialize;

/// What to measure.
#[derive(Debug, Clone, Serialize)]
pub struct RooflineConfig {
    /// Bytes of each array (rounded down to a multiple of 16).
    pub array_bytes: usize,
    /// How to sample each probe.
    pub bench: BenchConfig,
    /// Seed of the input pattern.
    pub seed: u32,
}

impl Default for RooflineConfig {
    fn default() -> Self {
        RooflineConfig { array_bytes: 1 << 30, bench: BenchConfig::default(), seed: 0x5eed_2026 }
    }
}

/// One probe's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// Short name (`read`, `copy`, `triad`).
    pub name: String,
    /// The kernel measured.
    pub kernel: String,
    /// Bytes moved per run (cost model).
    pub bytes_per_run: u64,
    /// FLOPs per run (cost model).
    pub flops_per_run: u64,
    /// Bandwidth at the median time, GB/s (10⁹ bytes per second).
    pub bandwidth_gbs: f64,
    /// How the result was checked, and that it passed.
    pub check: String,
    /// The timing samples and their summary.
    pub measurement: Measurement,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct RooflineReport {
    /// JSON layout version.
    pub schema_version: u32,
    /// UTC date of the run.
    pub date: String,
    /// The command that produced it.
    pub command: String,
    /// The device.
    pub device: DeviceInfo,
    /// What was asked.
    pub config: RooflineConfig,
    /// The probes.
    pub probes: Vec<Probe>,
}

/// Why a roofline run failed.
#[derive(Debug, thiserror::Error)]
pub enum RooflineError {
    /// A driver or API error.
    #[error(transparent)]
    Gpu(#[from] gpu_sync::Error),
    /// A kernel computed a wrong result: the figures would mean nothing.
    #[error("{probe}: result check failed: {detail}")]
    Check {
        /// The probe.
        probe: &'static str,
        /// What differed.
        detail: String,
    },
    /// The configuration cannot be run.
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// Sum of `pattern(seed, i)` for `i < n`, wrapping, computed on all cores.
pub fn pattern_sum(seed: u32, n: u64) -> u64 {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(64) as u64;
    let chunk = n.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let (lo, hi) = (t * chunk, ((t + 1) * chunk).min(n));
                    (lo..hi).fold(0u64, |acc, i| acc.wrapping_add(u64::from(reference::pattern(seed, i))))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).fold(0u64, u64::wrapping_add)
    })
}

/// Runs every probe on `device`, reporting progress through `progress`.
///
/// # Errors
/// [`RooflineError`]: a driver error, a failed result check, or a bad size.
pub fn run(
    device: &Device,
    cfg: &RooflineConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<RooflineReport, RooflineError> {
    let words = (cfg.array_bytes / 16) * 4;
    if words == 0 {
        return Err(RooflineError::Config(format!(
            "array of {} bytes holds no 16-byte element",
            cfg.array_bytes
        )));
    }
    let info = device_info(device)?;
    let stream = Stream::new(device)?;
    let k = Kernels::load(device)?;
    let bytes = (words * 4) as u64;
    progress(&format!("roofline on {}: arrays of {:.1} MiB", info.name, bytes as f64 / (1u64 << 20) as f64));
    let mut probes = Vec::new();

    // read
    let mut src = DeviceBuffer::<u32>::alloc(&stream, words)?;
    k.fill_pattern(&stream, &mut src, cfg.seed)?;
    let mut sum = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    progress("read: computing the reference sum on the host");
    let expected = pattern_sum(cfg.seed, words as u64);
    progress("read: measuring");
    let m = measure(&stream, &cfg.bench, |s| k.read_sum(s, &src, &mut sum))?;
    stream.fill_bytes(&mut sum, 0)?;
    k.read_sum(&stream, &src, &mut sum)?;
    let got = stream.to_vec(&sum)?[0];
    if got != expected {
        return Err(RooflineError::Check {
            probe: "read",
            detail: format!("device sum {got:#x}, CPU reference {expected:#x}"),
        });
    }
    probes.push(probe(
        "read",
        "read_sum_u32x4",
        cost::read_sum_u32x4(words as u64 / 4),
        m,
        format!("sum of {words} words = CPU reference {expected:#x}"),
    ));

    // copy
    let mut dst = DeviceBuffer::<u32>::alloc(&stream, words)?;
    stream.fill_bytes(&mut dst, 0xff)?;
    progress("copy: measuring");
    let m = measure(&stream, &cfg.bench, |s| k.copy(s, &src, &mut dst))?;
    let mut bad = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    k.check_pattern(&stream, &dst, cfg.seed, &mut bad)?;
    let mismatches = stream.to_vec(&bad)?[0];
    if mismatches != 0 {
        return Err(RooflineError::Check {
            probe: "copy",
            detail: format!("{mismatches} of {words} words differ from the source pattern"),
        });
    }
    probes.push(probe(
        "copy",
        "copy_u32x4",
        cost::copy_u32x4(words as u64 / 4),
        m,
        format!("all {words} words match the pattern (poisoned before)"),
    ));
    drop((src, dst, sum, bad));

    // triad
    let n = words;
    let host_b: Vec<f32> = (0..n).map(|i| (i % 1021) as f32 * 0.25).collect();
    let host_c: Vec<f32> = (0..n).map(|i| ((i * 7) % 1009) as f32 - 500.0).collect();
    let b = DeviceBuffer::from_slice(&stream, &host_b)?;
    let c = DeviceBuffer::from_slice(&stream, &host_c)?;
    let mut a = DeviceBuffer::<f32>::alloc(&stream, n)?;
    stream.fill_bytes(&mut a, 0xff)?;
    let scalar = 3.0f32;
    progress("triad: measuring");
    let m = measure(&stream, &cfg.bench, |s| k.triad(s, &mut a, &b, &c, scalar))?;
    let got = stream.to_vec(&a)?;
    let mut want = vec![0f32; n];
    reference::triad_f32(&mut want, &host_b, &host_c, scalar);
    if let Some(i) = (0..n).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        return Err(RooflineError::Check {
            probe: "triad",
            detail: format!("a[{i}] = {} but the reference gives {}", got[i], want[i]),
        });
    }
    probes.push(probe(
        "triad",
        "triad_f32",
        cost::triad_f32(n as u64),
        m,
        format!("all {n} results bit-equal to the CPU reference"),
    ));

    Ok(RooflineReport {
        schema_version: crate::report::SCHEMA_VERSION,
        date: crate::report::utc_date(),
        command: crate::report::command_line(),
        device: info,
        config: cfg.clone(),
        probes,
    })
}

fn probe(name: &str, kernel: &str, c: cost::Cost, m: Measurement, check: String) -> Probe {
    let bytes = c.bytes();
    Probe {
        name: name.into(),
        kernel: kernel.into(),
        bytes_per_run: bytes,
        flops_per_run: c.flops,
        bandwidth_gbs: bytes as f64 / m.summary.median / 1e9,
        check,
        measurement: m,
    }
}

impl RooflineReport {
    /// The report as markdown: device, then one row per probe.
    pub fn to_markdown(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .probes
            .iter()
            .map(|p| {
                let s = &p.measurement.summary;
                vec![
                    p.name.clone(),
                    format!("{:.1} MiB", p.bytes_per_run as f64 / (1u64 << 20) as f64),
                    format!("{} µs", sig4(s.median * 1e6)),
                    sig4(p.bandwidth_gbs),
                    format!("{:.2}%", s.rel_noise() * 100.0),
                    format!("{:.2}%", s.iqr() / s.median * 100.0),
                    s.n.to_string(),
                    format!("{:.1}%", p.bandwidth_gbs / self.device.theoretical_bandwidth_gbs * 100.0),
                ]
            })
            .collect();
        let mut out = format!(
            "# Roofline: memory ceilings\n\n{} · CUDA {} · {}\n\n`{}`\n\n",
            self.device.name, self.device.driver_cuda_version, self.date, self.command
        );
        out.push_str(&crate::report::table(
            &["probe", "bytes/run", "median", "GB/s", "noise", "IQR/median", "samples", "of theoretical"],
            &rows,
        ));
        out.push_str("\nBytes count each input read once and each output written once (cost models); GB/s = bytes / median time.\n");
        for p in &self.probes {
            out.push_str(&format!("\n- **{}** (`{}`): {}", p.name, p.kernel, p.check));
            for w in &p.measurement.warnings {
                out.push_str(&format!("\n  - warning: {w}"));
            }
        }
        out.push('\n');
        out
    }
}
