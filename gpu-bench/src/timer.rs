//! Event timing with warmup and adaptive stopping.
//!
//! Each sample brackets one run of the work between two timing events on the
//! stream (`cuEventRecord` before and after, `cuEventElapsedTime` once the
//! end completes), so host-side launch gaps before the first event do not
//! count. Sampling stops, as nvbench's `stdrel` criterion does, when at least
//! `min_samples` samples and `min_time` of measured device time are in and
//! the relative noise (stdev / mean) is below `max_noise`; or at `timeout`
//! wall-clock time, or `max_samples`, marked as not converged.

use crate::stats::Summary;
use gpu_sync::{Result, Stream, TimingEvent};
use serde::Serialize;
use std::time::{Duration, Instant};

/// How to sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BenchConfig {
    /// Untimed runs before sampling (module load, first-touch, clocks up).
    pub warmup_runs: u32,
    /// Fewest samples.
    pub min_samples: usize,
    /// Least total measured device time.
    #[serde(with = "secs")]
    pub min_time: Duration,
    /// Stop once the relative noise is below this.
    pub max_noise: f64,
    /// Give up (not converged) after this much wall-clock time.
    #[serde(with = "secs")]
    pub timeout: Duration,
    /// Most samples.
    pub max_samples: usize,
}

impl Default for BenchConfig {
    /// nvbench's `stdrel` defaults: 10 samples, 0.5 s, 0.5 % noise, 15 s timeout.
    fn default() -> Self {
        BenchConfig {
            warmup_runs: 3,
            min_samples: 10,
            min_time: Duration::from_millis(500),
            max_noise: 0.005,
            timeout: Duration::from_secs(15),
            max_samples: 100_000,
        }
    }
}

impl BenchConfig {
    /// A short configuration for smoke runs (the simulator, CI): 3 samples,
    /// no minimum time, 2 s timeout.
    pub fn quick() -> Self {
        BenchConfig {
            warmup_runs: 1,
            min_samples: 3,
            min_time: Duration::ZERO,
            max_noise: 1.0,
            timeout: Duration::from_secs(2),
            max_samples: 3,
        }
    }
}

mod secs {
    pub fn serialize<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// Event timer resolution: samples within 20× of it are flagged.
pub const EVENT_RESOLUTION: Duration = Duration::from_nanos(500);

/// The samples of one measurement and what they say.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    /// Device time of each sample, in seconds.
    pub samples: Vec<f64>,
    /// Their summary.
    pub summary: Summary,
    /// Whether the noise criterion was met before the timeout.
    pub converged: bool,
    /// Things a reader should know (timer resolution, no convergence).
    pub warnings: Vec<String>,
}

/// Times `run` on `stream` with device events.
///
/// # Errors
/// A driver error from the work or the events.
pub fn measure(
    stream: &Stream,
    cfg: &BenchConfig,
    mut run: impl FnMut(&Stream) -> Result<()>,
) -> Result<Measurement> {
    let device = stream.device();
    let (start, end) = (TimingEvent::new(device)?, TimingEvent::new(device)?);
    for _ in 0..cfg.warmup_runs {
        run(stream)?;
    }
    stream.synchronize()?;
    let began = Instant::now();
    let mut samples = Vec::new();
    let mut total = 0.0;
    let converged = loop {
        start.record(stream)?;
        run(stream)?;
        end.record(stream)?;
        end.synchronize()?;
        let t = start.elapsed(&end)?.as_secs_f64();
        samples.push(t);
        total += t;
        let enough = samples.len() >= cfg.min_samples && total >= cfg.min_time.as_secs_f64();
        if enough && Summary::of(&samples).is_some_and(|s| s.rel_noise() < cfg.max_noise) {
            break true;
        }
        if samples.len() >= cfg.max_samples {
            break enough;
        }
        if began.elapsed() >= cfg.timeout {
            break false;
        }
    };
    let summary = Summary::of(&samples).ok_or_else(|| {
        gpu_sync::Error::InvalidArgument("the event timer returned a non-finite time".into())
    })?;
    let mut warnings = Vec::new();
    if summary.median < 20.0 * EVENT_RESOLUTION.as_secs_f64() {
        warnings.push(format!(
            "median {:.3} µs is within 20x of the event timer's ~0.5 µs resolution",
            summary.median * 1e6
        ));
    }
    if !converged {
        warnings.push(format!(
            "noise {:.2}% did not fall below {:.2}% within {:?} ({} samples)",
            summary.rel_noise() * 100.0,
            cfg.max_noise * 100.0,
            cfg.timeout,
            samples.len()
        ));
    }
    Ok(Measurement { samples, summary, converged, warnings })
}
