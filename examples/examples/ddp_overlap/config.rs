//! The sizes and switches of a run: defaults, the environment (`DDP_*`),
//! then flags.

use crate::BoxResult;

/// The sizes of a run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    pub(crate) buckets: usize,
    pub(crate) bucket_bytes: usize,
    pub(crate) steps: usize,
    /// `scale` launches per bucket; `None`: calibrated so that C ≈ M
    /// (C ≈ R·M with `--c-over-m R`).
    pub(crate) passes: Option<usize>,
    /// The calibration's aim for C / M (`--c-over-m R`); `None`: 1, by
    /// whole passes as before. With `--fma`, one pass whose FMAs per float
    /// are scaled so that C ≈ R·M (finer than whole passes).
    pub(crate) c_over_m: Option<f64>,
    /// Compute-bound passes instead: each pass is the kernels crate's
    /// `intensity_f32` with this many FMAs per float, into a scratch
    /// buffer, and one `scale` then writes the bucket (`--fma N`).
    pub(crate) fma: Option<u32>,
    /// Blocking communicators (one process only; `--blocking 1`).
    pub(crate) blocking: bool,
    /// The communication streams at the device's greatest priority
    /// (`--comm-priority high`) or its least (`default`, the default).
    pub(crate) high_priority: bool,
    /// With `--fma`: SMs the compute leaves to NCCL (`--reserve-sms K`):
    /// its grid is one block of 1024 threads on each of `SMs − K` SMs
    /// instead of four blocks of 256 on every SM.
    pub(crate) reserve_sms: u32,
    /// With `--reserve-sms`: each compute block holds its SM's whole
    /// shared memory (`--hold-shared 1`, the default), so NCCL's blocks,
    /// which need shared memory, cannot share the compute's SMs and run on
    /// the ones left; `--hold-shared 0`: small blocks alone, which the GPU
    /// may place beside NCCL's.
    pub(crate) hold_shared: bool,
    /// `--trace-buckets 1`: after the timed steps, one more run of each
    /// phase with events on the first GPU's streams after every bucket,
    /// and what they show (each all-reduce's and each bucket's compute
    /// time alone and in the step; how long the communication stream
    /// waited for compute).
    pub(crate) trace_buckets: bool,
}

impl Config {
    /// The GPU-sized defaults: 16 buckets of 64 MiB, 7 steps.
    pub(crate) const GPU: Config = Config {
        buckets: 16,
        bucket_bytes: 64 << 20,
        steps: 7,
        passes: None,
        c_over_m: None,
        fma: None,
        blocking: false,
        high_priority: false,
        reserve_sms: 0,
        hold_shared: true,
        trace_buckets: false,
    };

    /// `base`, overridden by the environment, then by `args` (flags).
    pub(crate) fn from(base: Config, args: &[String]) -> BoxResult<Config> {
        let mut c = base;
        let mut set = |key: &str, v: &str| -> BoxResult<()> {
            let bad = |e: &dyn std::fmt::Display| format!("{key}={v:?}: {e}");
            match key {
                "buckets" => c.buckets = v.parse().map_err(|e| bad(&e))?,
                "bucket-mib" => {
                    let mib: f64 = v.parse().map_err(|e| bad(&e))?;
                    c.bucket_bytes = (mib * f64::from(1u32 << 20)) as usize;
                }
                "steps" => c.steps = v.parse().map_err(|e| bad(&e))?,
                "passes" => c.passes = Some(v.parse().map_err(|e| bad(&e))?),
                "c-over-m" => {
                    let r: f64 = v.parse().map_err(|e| bad(&e))?;
                    if !(r.is_finite() && r > 0.0) {
                        return Err(bad(&"give a positive ratio, as 1.4").into());
                    }
                    c.c_over_m = Some(r);
                }
                "fma" => c.fma = Some(v.parse().map_err(|e| bad(&e))?).filter(|&f| f > 0),
                "blocking" => c.blocking = v != "0",
                "reserve-sms" => c.reserve_sms = v.parse().map_err(|e| bad(&e))?,
                "trace-buckets" => c.trace_buckets = v != "0",
                "hold-shared" => {
                    c.hold_shared = match v {
                        "1" => true,
                        "0" => false,
                        _ => return Err(bad(&"give 1 or 0").into()),
                    }
                }
                "comm-priority" => {
                    c.high_priority = match v {
                        "high" => true,
                        "default" => false,
                        _ => return Err(bad(&"give high or default").into()),
                    }
                }
                _ => {
                    return Err(format!(
                        "unknown option --{key} (--buckets, --bucket-mib, --steps, --passes, --c-over-m, --fma, --blocking, --comm-priority, --reserve-sms, --hold-shared, --trace-buckets)"
                    )
                    .into());
                }
            }
            Ok(())
        };
        for key in [
            "buckets",
            "bucket-mib",
            "steps",
            "passes",
            "c-over-m",
            "fma",
            "blocking",
            "comm-priority",
            "reserve-sms",
            "hold-shared",
            "trace-buckets",
        ] {
            let var = format!("DDP_{}", key.replace('-', "_").to_uppercase());
            if let Ok(v) = std::env::var(&var) {
                set(key, &v)?;
            }
        }
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let key = a.strip_prefix("--").ok_or_else(|| format!("unexpected argument {a:?}"))?;
            let v = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
            set(key, v)?;
        }
        // Whole 16-byte vectors of f32 (the tiled kernels' unit).
        c.bucket_bytes -= c.bucket_bytes % 16;
        if c.buckets < 2 || c.bucket_bytes == 0 || c.steps == 0 || c.passes == Some(0) {
            return Err(format!("{c:?}: need at least 2 buckets, 16 bytes a bucket, 1 step, 1 pass").into());
        }
        Ok(c)
    }

    /// The tests' sizes: `buckets` of 64 KiB, `steps` steps, the rest as
    /// [`Config::GPU`].
    #[cfg(test)]
    pub(crate) fn small(buckets: usize, steps: usize) -> Config {
        Config { buckets, bucket_bytes: 64 << 10, steps, ..Config::GPU }
    }

    /// f32 elements per bucket.
    pub(crate) fn elems(&self) -> usize {
        self.bucket_bytes / 4
    }
}
