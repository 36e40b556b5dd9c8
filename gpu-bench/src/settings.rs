//! How to sample: one name per setting, the same as a Rust method on
//! [`Settings`], as a `--flag` of the `gpu-bench` CLI and as a `GPU_BENCH_*`
//! environment variable ([`Settings::NAMES`] lists the triples; a test of
//! the CLI checks it offers each).
//!
//! [`Settings`]' page has the example.

use serde::{Deserialize, Serialize};

/// Sampling settings. Times are in seconds, noise in percent.
///
/// ```
/// use gpu_bench::Settings;
/// let s = Settings::default().max_noise_pct(1.0).timeout_s(5.0);
/// assert_eq!(s.max_noise_pct, 1.0);
/// assert_eq!(Settings::NAMES[0], ("min_samples", "--min-samples", "GPU_BENCH_MIN_SAMPLES"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Fewest samples before the noise rule may stop sampling.
    pub min_samples: usize,
    /// Least measured device time before the noise rule may stop sampling.
    pub min_time_s: f64,
    /// Stop once the median's relative noise
    /// ([`Summary::median_noise`](crate::stats::Summary::median_noise)) is
    /// below this many percent and the halves agree (see [`crate::stop`]).
    pub max_noise_pct: f64,
    /// Give up (not converged) after this much wall-clock time per mode.
    pub timeout_s: f64,
    /// Most samples per mode.
    pub max_samples: usize,
    /// Fewest warmup runs.
    pub warmup_min: usize,
    /// Most warmup runs (warmup stops earlier once the last runs agree).
    pub warmup_max: usize,
    /// Runs per sample in batch mode (queued behind the spin gate).
    pub batch_runs: usize,
}

impl Default for Settings {
    /// nvbench's stopping defaults (10 samples, 0.5 s, 0.5 %, 15 s), applied
    /// to the median's noise instead of the samples' spread.
    fn default() -> Self {
        Settings {
            min_samples: 10,
            min_time_s: 0.5,
            max_noise_pct: 0.5,
            timeout_s: 15.0,
            max_samples: 100_000,
            warmup_min: 3,
            warmup_max: 200,
            batch_runs: 64,
        }
    }
}

macro_rules! setters {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Sets [`Settings::", stringify!($name), "`].")]
        pub fn $name(mut self, v: $t) -> Self {
            self.$name = v;
            self
        }
    )*};
}

impl Settings {
    /// Every setting as (method/field, CLI flag, environment variable).
    pub const NAMES: [(&'static str, &'static str, &'static str); 8] = [
        ("min_samples", "--min-samples", "GPU_BENCH_MIN_SAMPLES"),
        ("min_time_s", "--min-time-s", "GPU_BENCH_MIN_TIME_S"),
        ("max_noise_pct", "--max-noise-pct", "GPU_BENCH_MAX_NOISE_PCT"),
        ("timeout_s", "--timeout-s", "GPU_BENCH_TIMEOUT_S"),
        ("max_samples", "--max-samples", "GPU_BENCH_MAX_SAMPLES"),
        ("warmup_min", "--warmup-min", "GPU_BENCH_WARMUP_MIN"),
        ("warmup_max", "--warmup-max", "GPU_BENCH_WARMUP_MAX"),
        ("batch_runs", "--batch-runs", "GPU_BENCH_BATCH_RUNS"),
    ];

    setters!(min_samples: usize, min_time_s: f64, max_noise_pct: f64, timeout_s: f64, max_samples: usize,
             warmup_min: usize, warmup_max: usize, batch_runs: usize);

    /// A smoke-run configuration (the simulator, CI): 3 to 5 samples, no
    /// minimum time, 2 s timeout, 1 warmup run, batches of 8.
    pub fn quick() -> Self {
        Settings {
            min_samples: 3,
            min_time_s: 0.0,
            max_noise_pct: 100.0,
            timeout_s: 2.0,
            max_samples: 5,
            warmup_min: 1,
            warmup_max: 3,
            batch_runs: 8,
        }
    }

    /// Checks that the settings can be sampled with: at least one sample,
    /// `min_samples ≤ max_samples`, `warmup_min ≤ warmup_max`, at least one
    /// run per batch, finite non-negative times, a positive timeout and
    /// noise target (NaN and infinities refused).
    ///
    /// # Errors
    /// A message naming the setting (as its `--flag`) and what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let finite = |name: &str, v: f64, min_exclusive: bool| {
            if !v.is_finite() {
                Err(format!("--{name} {v}: must be a finite number"))
            } else if v < 0.0 || (min_exclusive && v == 0.0) {
                Err(format!("--{name} {v}: must be {}", if min_exclusive { "above 0" } else { "at least 0" }))
            } else {
                Ok(())
            }
        };
        finite("min-time-s", self.min_time_s, false)?;
        finite("max-noise-pct", self.max_noise_pct, true)?;
        finite("timeout-s", self.timeout_s, true)?;
        if self.min_samples == 0 {
            return Err("--min-samples 0: must be at least 1".into());
        }
        if self.max_samples < self.min_samples {
            return Err(format!(
                "--max-samples {} is below --min-samples {}: no sampling could meet both",
                self.max_samples, self.min_samples
            ));
        }
        if self.warmup_max == 0 {
            return Err("--warmup-max 0: must be at least 1".into());
        }
        if self.warmup_min > self.warmup_max {
            return Err(format!(
                "--warmup-min {} is above --warmup-max {}",
                self.warmup_min, self.warmup_max
            ));
        }
        if self.batch_runs == 0 {
            return Err("--batch-runs 0: a batch needs at least 1 run".into());
        }
        Ok(())
    }

    /// For the simulator: its times are exact (no spread), so a few samples
    /// say all there is, while each run costs real CPU time (its kernels
    /// are CPU programs): 5 to 20 samples, no minimum time, 5 s timeout,
    /// 1 to 5 warmup runs, batches of 8.
    pub fn sim() -> Self {
        Settings {
            min_samples: 5,
            min_time_s: 0.0,
            max_noise_pct: 0.5,
            timeout_s: 5.0,
            max_samples: 20,
            warmup_min: 1,
            warmup_max: 5,
            batch_runs: 8,
        }
    }

    /// The defaults overridden by any `GPU_BENCH_*` variable that is set.
    ///
    /// # Errors
    /// A message naming the variable whose value does not parse.
    pub fn from_env() -> Result<Settings, String> {
        Settings::default().with_env()
    }

    /// `self` overridden by any `GPU_BENCH_*` variable that is set.
    ///
    /// # Errors
    /// A message naming the variable whose value does not parse.
    pub fn with_env(self) -> Result<Settings, String> {
        let mut s = self;
        for (field, _, var) in Settings::NAMES {
            if let Ok(v) = std::env::var(var) {
                s.set(field, &v).map_err(|e| format!("{var}={v}: {e}"))?;
            }
        }
        Ok(s)
    }

    /// Sets the field named `field` from text.
    ///
    /// # Errors
    /// An unknown field, or a value that does not parse or is negative.
    pub fn set(&mut self, field: &str, value: &str) -> Result<(), String> {
        fn num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
            v.trim().parse().map_err(|_| format!("{v:?} is not a valid number"))
        }
        fn secs(v: &str) -> Result<f64, String> {
            let x: f64 = num(v)?;
            if x.is_finite() && x >= 0.0 { Ok(x) } else { Err(format!("{v:?} is not a non-negative number")) }
        }
        match field {
            "min_samples" => self.min_samples = num(value)?,
            "min_time_s" => self.min_time_s = secs(value)?,
            "max_noise_pct" => self.max_noise_pct = secs(value)?,
            "timeout_s" => self.timeout_s = secs(value)?,
            "max_samples" => self.max_samples = num(value)?,
            "warmup_min" => self.warmup_min = num(value)?,
            "warmup_max" => self.warmup_max = num(value)?,
            "batch_runs" => self.batch_runs = num(value)?,
            other => return Err(format!("no setting named {other}")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_one_convention() {
        for (field, flag, env) in Settings::NAMES {
            assert_eq!(flag, format!("--{}", field.replace('_', "-")));
            assert_eq!(env, format!("GPU_BENCH_{}", field.to_uppercase()));
            let mut s = Settings::default();
            s.set(field, "7").unwrap();
            assert_ne!(s, Settings::default(), "{field} did not change");
        }
        let json = serde_json::to_value(Settings::default()).unwrap();
        let fields: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
        let mut names: Vec<_> = Settings::NAMES.iter().map(|n| n.0.to_owned()).collect();
        names.sort();
        let mut fields = fields;
        fields.sort();
        assert_eq!(fields, names, "every field has a name triple");
    }

    #[test]
    fn validation_refuses_what_cannot_be_sampled_and_names_the_flag() {
        assert_eq!(Settings::default().validate(), Ok(()));
        assert_eq!(Settings::quick().validate(), Ok(()));
        assert_eq!(Settings::sim().validate(), Ok(()));
        let cases: [(Settings, &str); 8] = [
            (Settings::default().timeout_s(f64::NAN), "--timeout-s NaN"),
            (Settings::default().timeout_s(0.0), "--timeout-s 0: must be above 0"),
            (Settings::default().min_time_s(f64::INFINITY), "--min-time-s inf"),
            (Settings::default().max_noise_pct(-1.0), "--max-noise-pct -1"),
            (Settings::default().min_samples(0), "--min-samples 0"),
            (Settings::default().min_samples(10).max_samples(5), "--max-samples 5 is below --min-samples 10"),
            (Settings::default().warmup_min(10).warmup_max(2), "--warmup-min 10 is above --warmup-max 2"),
            (Settings::default().batch_runs(0), "--batch-runs 0"),
        ];
        for (s, want) in cases {
            let e = s.validate().unwrap_err();
            assert!(e.starts_with(want), "{e:?} should start with {want:?}");
        }
    }

    #[test]
    fn bad_values_name_the_problem() {
        let mut s = Settings::default();
        assert!(s.set("timeout_s", "-1").unwrap_err().contains("non-negative"));
        assert!(s.set("min_samples", "x").unwrap_err().contains("not a valid number"));
        assert!(s.set("nope", "1").unwrap_err().contains("no setting"));
    }
}
