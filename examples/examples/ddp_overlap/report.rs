//! What rank 0 prints.

use crate::config::Config;
use crate::{Mode, mib, ms};
use std::time::Duration;

/// What rank 0 prints.
pub(crate) struct Report {
    /// The run's configuration (with `--c-over-m`, the calibrated FMAs).
    pub(crate) cfg: Config,
    /// Ranks in all.
    pub(crate) n: usize,
    /// One process or one per GPU.
    pub(crate) mode: Mode,
    /// Compute passes per bucket.
    pub(crate) passes: usize,
    /// The calibration's M and one pass's compute.
    pub(crate) m0: Duration,
    pub(crate) c1: Duration,
    /// Medians: compute alone, communication alone, the step.
    pub(crate) c: Duration,
    pub(crate) m: Duration,
    pub(crate) step: Duration,
    /// The step right after the pool was trimmed (its memory step).
    pub(crate) cold: Duration,
    /// The memory steps' peaks: the ledger's, the pool's reserve.
    pub(crate) peak_alloc: u64,
    pub(crate) peak_reserved: Option<u64>,
    /// Buckets given a freed bucket's address.
    pub(crate) reused: usize,
    /// Reduced elements that differ from the exact sums.
    pub(crate) wrong: usize,
}

/// Prints `r` (rank 0 only): the configuration, C, M, the step and its two
/// ratios, the trimmed-pool step, the memory and the wrong elements.
pub(crate) fn report(r: &Report) {
    let Report { cfg, n, mode, passes, m0, c1, c, m, step, cold, peak_alloc, peak_reserved, reused, wrong } =
        *r;
    let (cf, mf, sf) = (c.as_secs_f64(), m.as_secs_f64(), step.as_secs_f64());
    let ideal = cf.max(mf) / sf;
    let hidden = (cf + mf - sf) / cf.min(mf);
    let ratio = cf / mf;
    let bb = cfg.bucket_bytes as u64;
    // Less `scale`'s input (and --fma's scratch).
    let fixed = bb * if cfg.fma.is_some() { 2 } else { 1 };
    let peak_buckets = peak_alloc.saturating_sub(fixed) as f64 / bb as f64;
    let procs = match mode {
        Mode::OneProcess => "one process",
        Mode::PerProcess => "one process per GPU",
    };
    let kind = match cfg.fma {
        Some(f) if cfg.reserve_sms > 0 => format!(
            "{passes} compute-bound passes (intensity_f32, {f} FMAs per float, {} SMs left to NCCL, {}) and one scale",
            cfg.reserve_sms,
            if cfg.hold_shared {
                "each block holding its SM's shared memory"
            } else {
                "blocks holding no shared memory"
            }
        ),
        Some(f) => format!("{passes} compute-bound passes (intensity_f32, {f} FMAs per float) and one scale"),
        None => format!("{passes} scale passes"),
    };
    let comms = if cfg.blocking { "blocking" } else { "non-blocking" };
    let prio = if cfg.high_priority { "high" } else { "default" };
    println!(
        "DDP overlap: {n} GPUs ({procs}, {comms} communicators, {prio}-priority communication streams), {} buckets x {}, {} steps (median), {kind} per bucket",
        cfg.buckets,
        mib(bb),
        cfg.steps
    );
    let aim = cfg.c_over_m.map_or(String::new(), |r| format!(", aimed at C/M = {r}"));
    println!("  calibration: M {}, one pass of compute {}{aim}", ms(m0), ms(c1));
    println!("  {:<34} {:>12}", "compute alone, C", ms(c));
    println!("  {:<34} {:>12}", "all-reduce alone, M", ms(m));
    let in_range = if (0.7..=1.5).contains(&ratio) { "in 0.7-1.5" } else { "OUT of 0.7-1.5" };
    println!("  {:<34} {:>12}", "C / M", format!("{ratio:.2} ({in_range})"));
    println!("  {:<34} {:>12}", "step, overlapped", ms(step));
    println!("  {:<34} {:>12}", "ideal / step = max(C,M) / step", format!("{ideal:.3}"));
    println!("  {:<34} {:>12}", "hidden = (C+M-step) / min(C,M)", format!("{:.1} %", hidden * 100.0));
    let kf = cold.as_secs_f64();
    println!(
        "  {:<34} {:>12}",
        "step, pool trimmed just before",
        format!(
            "{} (ideal / step {:.3}, hidden {:.1} %)",
            ms(cold),
            cf.max(mf) / kf,
            (cf + mf - kf) / cf.min(mf) * 100.0
        )
    );
    println!(
        "  {:<34} {:>12}",
        "peak allocated (ledger)",
        format!("{} = input + {peak_buckets:.2} buckets", mib(peak_alloc))
    );
    match peak_reserved {
        Some(p) => println!("  {:<34} {:>12}", "peak reserved (pool)", mib(p)),
        None => println!("  {:<34} {:>12}", "peak reserved (pool)", "no memory pools"),
    }
    println!(
        "  {:<34} {:>12}",
        "buckets on a freed bucket's address",
        format!("{reused} of {}", (cfg.buckets - 2) * n)
    );
    println!("  {:<34} {:>12}", "wrong elements", wrong);
}
