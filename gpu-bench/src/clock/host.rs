//! The host clock as a time source, for what events cannot see (the cost
//! of an API call, a synchronization, an event creation): samples under
//! the same stopping rule as the device-timed modes ([`crate::stop`]), with
//! settings suited to operations of a few hundred nanoseconds, and the
//! record they make.
//!
//! ```
//! use gpu_bench::{Settings, host};
//! let s = host::settings(&Settings::quick());
//! let (v, why, wall) = host::sample(&s, || Ok::<f64, std::convert::Infallible>(1e-6))?;
//! let r = host::record("a 1 µs operation", &[], &v, (why, wall), &s);
//! assert_eq!(r.counter("median (host clock)").map(|c| c.value), Some(1e-6));
//! # Ok::<(), std::convert::Infallible>(())
//! ```

use crate::record::{Counter, Record, Unit};
use crate::settings::Settings;
use crate::stop::StopReason;
use std::time::Instant;

/// Host-clock samples of `f` (each returns its own seconds) until the
/// engine's stopping rule ([`crate::stop`]) is met: the same rule as
/// device-timed modes, for things events cannot see. Returns the samples,
/// why sampling ended and the wall time it took, seconds.
///
/// # Errors
/// `f`'s error.
pub fn sample<E>(s: &Settings, f: impl FnMut() -> Result<f64, E>) -> Result<(Vec<f64>, StopReason, f64), E> {
    let t0 = Instant::now();
    let (v, why) = crate::stop::sample_until(s, f, || t0.elapsed().as_secs_f64())?;
    Ok((v, why, t0.elapsed().as_secs_f64()))
}

/// The settings for host-clock rows: operations of a few hundred
/// nanoseconds need neither half a second of measured time nor stop at
/// 100,000 samples before the minimum time is met (the first H200 run
/// warned on every such row). At most 20 ms of measured time, at least
/// 400,000 samples allowed (0.12 s of a 300 ns operation).
pub fn settings(s: &Settings) -> Settings {
    let mut hs = *s;
    hs.min_time_s = hs.min_time_s.min(0.02);
    hs.max_samples = hs.max_samples.max(400_000);
    hs
}

/// A record of host-clock samples: median (with noise), count, the wall
/// time sampling took, and a warning naming the rules unmet if sampling
/// did not converge.
pub fn record(
    name: &str,
    params: &[(&str, String)],
    samples: &[f64],
    (why, wall_s): (StopReason, f64),
    s: &Settings,
) -> Record {
    let mut r = Record::new(name, params);
    let sum = crate::stats::Summary::of(samples).unwrap_or_else(crate::stats::Summary::empty);
    r.counters
        .push(Counter::new("median (host clock)", sum.median, Unit::Seconds).with_noise(sum.median_noise()));
    r.counters.push(Counter::new("samples", sum.n as f64, Unit::Count));
    r.counters.push(Counter::new(format!("sampling wall time ({})", why.name()), wall_s, Unit::Seconds));
    if why != StopReason::Converged {
        let unmet = crate::stop::unmet(samples, samples.iter().sum(), s);
        let names: Vec<&str> = unmet.iter().map(|u| u.name()).collect();
        r.warnings.push(crate::record::Warning {
            rule: unmet.first().copied().unwrap_or(crate::stop::Rule::MaxSamples),
            mode: None,
            message: format!("host sampling ended by {} with {} unmet", why.name(), names.join(", ")),
        });
    }
    r
}
