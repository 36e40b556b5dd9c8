//! `gpu-bench timer`: the timer checked against a kernel of known length.
//!
//! The spin kernel busy-waits a number of SM cycles; at the clock the probe
//! measured, its length is known (10 µs, 100 µs, 1 ms, 10 ms). Each length
//! is timed in every mode side by side; the hot-mode median is reported
//! against cycles / clock. Then an A/A calibration (the same benchmark
//! several times, every pair compared at the threshold) and a paired,
//! interleaved A/B run of 100 µs against 102 µs.
//!
//! Unsafe code: the first-call closure loads a fresh spin module and
//! declares its kernel, as a user's own kernel would be.
#![allow(unsafe_code)]

use crate::common::{Ctx, Failure, finish_report};
use gpu_bench::compare::{calibrate, paired};
use gpu_bench::record::{Counter, Unit, format_value};
use gpu_bench::{Bench, Mode, Record, Report};
use gpu_sync::{DeviceBuffer, LaunchConfig, Stream};

/// Runs the checks.
///
/// # Errors
/// A driver error.
pub fn run(ctx: &Ctx, threshold: f64) -> Result<Report, Failure> {
    let mut report = ctx.report("Timer check: a spin kernel of known length")?;
    let stream = Stream::new(&ctx.device)?;
    let mut timer = ctx.timer(&stream)?;
    let mhz = timer.clock().map_or(report.device.sm_clock_mhz, |c| c.steady_mhz);
    let lengths: &[f64] = if ctx.quick { &[10e-6, 100e-6] } else { &[10e-6, 100e-6, 1e-3, 10e-3] };
    let k = &ctx.kernels;
    let mut out = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    for &len in lengths {
        let cycles = Ctx::cycles(len, mhz);
        let label = format_value(len, Unit::Seconds);
        ctx.progress.step(format!("timer: spin {label} in every mode"));
        let mut s = ctx.settings;
        s.batch_runs = s.batch_runs.min(((2e-3 / len) as usize).max(1));
        let mut first_out = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
        let device = ctx.device.clone();
        let mut first = |st: &Stream| -> gpu_sync::Result<()> {
            let module = gpu_sync::Module::load(&device, kernels::ModuleId::Spin.fatbin())?;
            // SAFETY: spin_cycles(u64 cycles, u64* out) writes only out[0];
            // `first_out` has one element.
            let spin = unsafe { module.kernel::<kernels::SpinSig>("spin_cycles")? };
            spin.launch(st, LaunchConfig::new(1, 1), (cycles, &mut first_out))
        };
        let mut rec = Bench::new("spin")
            .param("length", &label)
            .modes(&Mode::ALL)
            .settings(s)
            .best_effort(true)
            .run_on(&mut timer, Some(&mut first), |st| k.spin(st, cycles, &mut out))?;
        let expected = cycles as f64 / (mhz * 1e6);
        rec.counters.push(Counter::new("expected (cycles / clock)", expected, Unit::Seconds));
        for m in [Mode::Hot, Mode::Batch, Mode::Kernel] {
            if let Some(t) = rec.mode(m).map(|r| r.median()) {
                rec.counters.push(Counter::new(
                    format!("{} - expected", m.name()),
                    t - expected,
                    Unit::Seconds,
                ));
                rec.counters.push(Counter::new(
                    format!("{} vs expected", m.name()),
                    t / expected - 1.0,
                    Unit::Fraction,
                ));
            }
        }
        report.records.push(rec);
    }

    ctx.progress.step("timer: A/A calibration");
    let cycles = Ctx::cycles(100e-6, mhz);
    let aa_bench = Bench::new("spin").param("length", "100 µs").settings(ctx.settings);
    let cal = calibrate(&mut timer, &aa_bench, if ctx.quick { 2 } else { 5 }, threshold, |st| {
        k.spin(st, cycles, &mut out)
    })?;
    let mut r = Record::new("A/A calibration", &[("threshold", format!("{:.1}%", threshold * 100.0))]);
    r.counters.push(Counter::new("pairs compared", cal.pairs as f64, Unit::Count));
    r.counters.push(Counter::new("false verdicts", cal.false_verdicts as f64, Unit::Count));
    r.counters.push(Counter::new("false-verdict rate", cal.false_rate, Unit::Fraction));
    r.counters.push(Counter::new("largest |ratio - 1|", cal.max_deviation, Unit::Fraction));
    report.records.push(r);

    ctx.progress.step("timer: paired A/B");
    let (ca, cb) = (Ctx::cycles(100e-6, mhz), Ctx::cycles(102e-6, mhz));
    let mut out_b = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    let p = paired(
        &mut timer,
        &ctx.settings,
        if ctx.quick { 4 } else { 200 },
        threshold / 4.0,
        |st| k.spin(st, ca, &mut out),
        |st| k.spin(st, cb, &mut out_b),
    )?;
    let mut r = Record::new("A/B paired: 102 µs vs 100 µs", &[]);
    r.counters.push(Counter::new("ratio (expected 1.020)", p.ratio, Unit::Ratio));
    r.counters.push(Counter::new("95% CI low", p.ci95.0, Unit::Ratio));
    r.counters.push(Counter::new("95% CI high", p.ci95.1, Unit::Ratio));
    r.counters.push(Counter::new(
        format!("verdict at {:.2}%: {}", threshold * 25.0, p.verdict.name()),
        p.a.len() as f64,
        Unit::Count,
    ));
    report.records.push(r);

    finish_report(&mut report, &timer);
    report
        .notes
        .push(format!("spin lengths from cycles = length x {mhz:.0} MHz (the measured steady clock)"));
    report.notes.push("expected = cycles / measured clock; hot includes the device's per-launch overhead (events and launch, no host gap: samples are queued ahead), batch amortizes it over back-to-back runs; launch overhead = hot - batch; cache effect = cold - hot (the spin kernel touches no memory: expect about 0); first-call cost = first call (module load + launch, host clock) - hot; graph saving = hot - graph".into());
    if report.simulated {
        report.notes.push(
            "on the simulator the first call is timed on the simulated clock like every other mode (the simulator \
             models no module load, so its first-call cost is 0); the host's time around it is another clock and \
             is not reported"
                .into(),
        );
    }
    Ok(report)
}
