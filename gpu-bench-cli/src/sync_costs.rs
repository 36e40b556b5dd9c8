//! `gpu-bench sync-costs`: the wrong and right ways to time, side by side,
//! on a kernel of known length (the spin kernel, 100 µs at the measured
//! clock), and what each kind of synchronization costs on this machine.
//!
//! - host clock around a launch without a sync: measures the enqueue only;
//! - host clock around a launch and a stream sync: kernel + launch latency
//!   + wake-up;
//! - device events (the engine's hot mode): the kernel;
//! - the host cost of a launch; creating and destroying a timing event
//!   against a sync-only one (`CU_EVENT_DISABLE_TIMING`);
//! - event, stream and device synchronization of completed work;
//! - the `.item()` pattern: synchronizing every iteration against once at
//!   the end, as throughput;
//! - first call (module load + launch) against steady state.
//!
//! Host-clock records are marked [`TimedBy::Host`], so the report puts
//! their figures in a table of their own: on the simulator they are real
//! CPU times of the software driver, the event figures simulated times, and
//! the two never share a column.

use crate::common::{Ctx, Failure, finish_report};
use gpu_bench::host::{record as host_record, sample as host_samples};
use gpu_bench::record::{Counter, Unit};
use gpu_bench::{Bench, Mode, Record, Report, Settings, StopReason, TimedBy};
use gpu_sync::{DeviceBuffer, Stream, SyncEvent, TimingEvent};
use std::time::Instant;

/// A record of host-clock samples ([`host_record`]), marked as timed by
/// the host so that its figures never share a column with event figures.
fn host_clock(name: &str, samples: &[f64], stop: (StopReason, f64), hs: &Settings) -> Record {
    host_record(name, &[], samples, stop, hs).timed_by(TimedBy::Host)
}

/// Runs every measurement.
///
/// # Errors
/// A driver error.
pub fn run(ctx: &Ctx) -> Result<Report, Failure> {
    let mut report = ctx.report("Sync costs: how to time, and what waiting costs")?;
    let stream = Stream::new(&ctx.device)?;
    let mut timer = ctx.timer(&stream)?;
    let mhz = timer.clock().map_or(report.device.sm_clock_mhz, |c| c.steady_mhz);
    let k = &ctx.kernels;
    let mut out = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    let cycles = Ctx::cycles(100e-6, mhz);
    let expected = cycles as f64 / (mhz * 1e6);
    // Host-clock figures are nanoseconds to microseconds: see gpu_bench::host::settings.
    let hs = gpu_bench::host::settings(&ctx.settings);
    let dev = ctx.device.clone();

    ctx.progress.step("sync-costs: timing a 100 µs kernel three ways");
    let (v, why, wall) = host_samples(&hs, || -> gpu_sync::Result<f64> {
        let t = Instant::now();
        k.spin(&stream, cycles, &mut out)?;
        let e = t.elapsed().as_secs_f64();
        stream.synchronize()?;
        Ok(e)
    })?;
    // The kernel's length is a device-clock figure: it goes with row 3, not here.
    report.records.push(host_clock("1. host clock, launch only (WRONG: enqueue time)", &v, (why, wall), &hs));
    let (v, why, wall) = host_samples(&hs, || -> gpu_sync::Result<f64> {
        let t = Instant::now();
        k.spin(&stream, cycles, &mut out)?;
        stream.synchronize()?;
        Ok(t.elapsed().as_secs_f64())
    })?;
    report.records.push(host_clock(
        "2. host clock, launch + stream sync (kernel + latencies)",
        &v,
        (why, wall),
        &hs,
    ));
    let mut r = Bench::new("3. device events (RIGHT)").modes(&[Mode::Hot]).settings(ctx.settings).run_on(
        &mut timer,
        None,
        |s| k.spin(s, cycles, &mut out),
    )?;
    r.counters.push(Counter::new("kernel length (cycles / clock)", expected, Unit::Seconds));
    report.records.push(r);

    ctx.progress.step("sync-costs: event creation");
    let (v, why, wall) = host_samples(&hs, || -> gpu_sync::Result<f64> {
        let t = Instant::now();
        drop(TimingEvent::new(&dev)?);
        Ok(t.elapsed().as_secs_f64())
    })?;
    report.records.push(host_clock("timing event create + destroy", &v, (why, wall), &hs));
    let (v, why, wall) = host_samples(&hs, || -> gpu_sync::Result<f64> {
        let t = Instant::now();
        drop(SyncEvent::new(&dev)?);
        Ok(t.elapsed().as_secs_f64())
    })?;
    report.records.push(host_clock("sync-only event create + destroy", &v, (why, wall), &hs));

    ctx.progress.step("sync-costs: synchronization of completed work");
    let ev = SyncEvent::new(&dev)?;
    ev.record(&stream)?;
    ev.synchronize()?;
    let (v, why, wall) = host_samples(&hs, || -> gpu_sync::Result<f64> {
        let t = Instant::now();
        ev.synchronize()?;
        Ok(t.elapsed().as_secs_f64())
    })?;
    report.records.push(host_clock("event synchronize (completed)", &v, (why, wall), &hs));
    let (v, why, wall) = host_samples(&hs, || -> gpu_sync::Result<f64> {
        let t = Instant::now();
        stream.synchronize()?;
        Ok(t.elapsed().as_secs_f64())
    })?;
    report.records.push(host_clock("stream synchronize (idle)", &v, (why, wall), &hs));
    let (v, why, wall) = host_samples(&hs, || -> gpu_sync::Result<f64> {
        let t = Instant::now();
        dev.synchronize()?;
        Ok(t.elapsed().as_secs_f64())
    })?;
    report.records.push(host_clock("device synchronize (idle)", &v, (why, wall), &hs));

    ctx.progress.step("sync-costs: the .item() pattern");
    let small = Ctx::cycles(5e-6, mhz);
    let iters = if ctx.quick { 20 } else { 1000 };
    let every = |sync_each: bool, out: &mut DeviceBuffer<u64>| -> gpu_sync::Result<f64> {
        let t = Instant::now();
        for _ in 0..iters {
            k.spin(&stream, small, out)?;
            if sync_each {
                stream.synchronize()?;
            }
        }
        stream.synchronize()?;
        Ok(t.elapsed().as_secs_f64() / iters as f64)
    };
    let reps = if ctx.quick { 3 } else { 11 };
    let (mut each, mut once) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        each.push(every(true, &mut out)?);
        once.push(every(false, &mut out)?);
    }
    let (me, mo) = (gpu_bench::stats::median(&each), gpu_bench::stats::median(&once));
    let mut r = Record::new(".item() pattern: 5 µs kernels", &[("iterations", iters.to_string())]);
    r.counters.push(Counter::new("per iteration, sync every iteration", me, Unit::Seconds));
    r.counters.push(Counter::new("per iteration, sync once at the end", mo, Unit::Seconds));
    r.counters.push(Counter::new("throughput lost to per-iteration syncs", 1.0 - mo / me, Unit::Fraction));
    report.records.push(r.timed_by(TimedBy::Host));

    ctx.progress.step("sync-costs: first call vs steady state");
    let mut first_out = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    let mut first = |s: &Stream| -> gpu_sync::Result<()> {
        let fresh = kernels::Kernels::load(&dev)?;
        fresh.spin(s, small, &mut first_out)
    };
    let r = Bench::new("5 µs kernel: first call (module load + launch) vs hot")
        .modes(&[Mode::FirstCall, Mode::Hot])
        .settings(ctx.settings)
        .run_on(&mut timer, Some(&mut first), |s| k.spin(s, small, &mut out))?;
    report.records.push(r);

    finish_report(&mut report, &timer);
    report.notes.push(format!("kernel lengths from cycles at the measured {mhz:.0} MHz; host-clock rows time with std::time::Instant"));
    if ctx.sim {
        report.notes.push("on the simulator, host-clock rows are real CPU times of the software driver and event rows are simulated: they do not compare".into());
    }
    Ok(report)
}
