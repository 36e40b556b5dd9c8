//! `gpu-bench truth`: the timer held against the GPU's own clock.
//!
//! Four memory kernels of the `kernels` crate (`scale_f32`, `copy_u32x4`,
//! `triad_f32`, `read_sum_u32x4`) at 1 Ki, 32 Ki, 1 Mi, 32 Mi and 256 Mi
//! elements, and the spin kernel at 2 µs, 10 µs, 100 µs, 1 ms and 10 ms,
//! each timed in every sampled mode (cold, hot, batch, graph) and in kernel
//! mode (CUPTI's records, where CUPTI loads). Each record carries
//! "<mode> over kernel": what each event mode reads above the GPU's own
//! duration of the same work. With `--launch-only N` nothing is timed: each
//! case is launched N times back to back and synchronized, so an external
//! profiler (Nsight Compute) times the same launches.
//!
//! The cases run in a fixed order (an empty spin, then per size the four
//! memory kernels, then the spins), the order `peer/truth_table.py` joins
//! Nsight Compute's launches on. They run twice: first every case in the
//! event modes, with CUPTI not yet touched in the process, then every case
//! in kernel mode, added to the same records ([`gpu_bench::Bench::run_more`]):
//! CUPTI, once initialized, stays attached, and event pairs measured after
//! it read more.
//!
//! On the simulator (`--driver sim`) or with `--quick` the sizes stop at
//! 1 Mi elements and the spin lengths at 100 µs.

use crate::common::{Ctx, Failure, finish_report};
use gpu_bench::record::{Counter, Unit, format_value};
use gpu_bench::{Bench, Mode, Report, Timer};
use gpu_sync::{DeviceBuffer, Stream};

/// Elements of each memory case.
const SIZES: [(usize, &str); 5] =
    [(1 << 10, "1Ki"), (1 << 15, "32Ki"), (1 << 20, "1Mi"), (1 << 25, "32Mi"), (1 << 28, "256Mi")];
/// Spin lengths, seconds.
const SPINS: [f64; 5] = [2e-6, 10e-6, 100e-6, 1e-3, 10e-3];

/// Which modes a pass over the cases measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// The event modes (cold, hot, batch, graph), each case's record made
    /// here; CUPTI not yet touched in the process.
    Events,
    /// Kernel mode (CUPTI), added to the records of the first pass.
    Kernel,
}

/// What one case is timed with.
struct Plan<'a> {
    ctx: &'a Ctx,
    pass: Pass,
    launch_only: Option<usize>,
    /// The record the next case of the kernel pass adds to.
    next: std::cell::Cell<usize>,
}

/// The event modes, measured in the first pass.
const EVENT_MODES: [Mode; 4] = [Mode::Cold, Mode::Hot, Mode::Batch, Mode::Graph];

impl Plan<'_> {
    /// Times (or only launches) one case: in the event pass its record is
    /// added to `report`; in the kernel pass kernel mode is added to the
    /// record the event pass made for the same case (the cases run in the
    /// same order in both passes).
    fn case(
        &self,
        report: &mut Report,
        timer: &mut Timer,
        kernel: &str,
        size: &str,
        bytes: u64,
        mut f: impl FnMut(&Stream) -> gpu_sync::Result<()>,
    ) -> Result<(), Failure> {
        self.ctx.progress.step(format!(
            "truth: {kernel} {size}{}",
            if self.pass == Pass::Kernel { " (kernel mode)" } else { "" }
        ));
        if let Some(n) = self.launch_only {
            let s = timer.stream().clone();
            for _ in 0..n {
                f(&s)?;
            }
            s.synchronize()?;
            return Ok(());
        }
        let mut s = self.ctx.settings;
        // Batches of about 2 ms of work.
        s.batch_runs = s.batch_runs.max(1);
        let bench = Bench::new(kernel).param("size", size).bytes(bytes).settings(s);
        if self.pass == Pass::Kernel {
            let i = self.next.get();
            self.next.set(i + 1);
            let Some(rec) = report.records.get_mut(i) else {
                return Err(Failure::Bench(gpu_bench::Error::Settings(format!(
                    "the kernel pass found no record for case {i} ({kernel} {size})"
                ))));
            };
            bench.modes(&[Mode::Kernel]).run_more(timer, rec, &mut f)?;
            let expected = rec.counter("expected (cycles / clock)").map(|c| c.value);
            if let (Some(expected), Some(kt)) = (expected, rec.mode(Mode::Kernel).map(|m| m.median())) {
                rec.counters.push(Counter::new("kernel vs expected", kt / expected - 1.0, Unit::Fraction));
            }
            return Ok(());
        }
        let mut rec = bench.modes(&EVENT_MODES).run_on(timer, None, &mut f)?;
        if let (Some(h), Some(c)) = (rec.mode(Mode::Hot), rec.mode(Mode::Cold))
            && h.median() > c.median() * 1.02
        {
            rec.counters.push(Counter::new("hot above cold", h.median() / c.median() - 1.0, Unit::Fraction));
        }
        report.records.push(rec);
        Ok(())
    }
}

/// Host time to submit one launch of the empty spin with CUPTI's activity
/// recording off and on (kernels, copies, memsets): 2,000 launches a round,
/// submission time only (the GPU drains between rounds), off and on
/// alternating over 9 rounds each; medians per launch.
fn cupti_host_cost(
    ctx: &Ctx,
    stream: &Stream,
    out: &mut DeviceBuffer<u64>,
) -> Result<gpu_bench::Record, Failure> {
    use gpu_sync::cuda_sys::cupti::{ActivityKind, activity};
    const LAUNCHES: usize = 2000;
    let a = activity().map_err(|e| Failure::Bench(gpu_bench::Error::Kernel(e.to_string())))?;
    let k = &ctx.kernels;
    let round = |out: &mut DeviceBuffer<u64>| -> Result<f64, Failure> {
        stream.synchronize()?;
        let t0 = std::time::Instant::now();
        for _ in 0..LAUNCHES {
            k.spin(stream, 1, out)?;
        }
        let t = t0.elapsed().as_secs_f64() / LAUNCHES as f64;
        stream.synchronize()?;
        Ok(t)
    };
    round(out)?;
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..9 {
        off.push(round(out)?);
        let c = a
            .consumer(&[ActivityKind::Kernel, ActivityKind::Memcpy, ActivityKind::Memset])
            .map_err(|e| Failure::Bench(gpu_bench::Error::Kernel(e.to_string())))?;
        on.push(round(out)?);
        // The records are taken so the buffers do not grow.
        c.take().map_err(|e| Failure::Bench(gpu_bench::Error::Kernel(e.to_string())))?;
    }
    let (m_off, m_on) = (gpu_bench::stats::median(&off), gpu_bench::stats::median(&on));
    let mut r = gpu_bench::Record::new("CUPTI host cost per launch", &[("launches", LAUNCHES.to_string())]);
    r.counters.push(Counter::new("host submit, CUPTI off", m_off, Unit::Seconds));
    r.counters.push(Counter::new("host submit, CUPTI on", m_on, Unit::Seconds));
    r.counters.push(Counter::new("CUPTI on - off", m_on - m_off, Unit::Seconds));
    r.counters.push(Counter::new("records dropped (process)", a.dropped() as f64, Unit::Count));
    Ok(r)
}

/// Runs the table (or, with `launch_only`, only launches each case).
///
/// # Errors
/// A driver error; a mode that cannot run.
pub fn run(ctx: &Ctx, launch_only: Option<usize>) -> Result<Report, Failure> {
    let mut report = ctx.report("Timer truth: every mode against the GPU's own kernel time")?;
    let stream = Stream::new(&ctx.device)?;
    let mut timer = ctx.timer(&stream)?;
    let small = ctx.quick || ctx.sim;
    let max = if small { 1 << 20 } else { SIZES[4].0 };
    let k = &ctx.kernels;
    // Inputs of real values (never zeros); one set of buffers, viewed at
    // each size.
    let x: Vec<f32> = (0..max).map(|i| 1.0 + (i % 1013) as f32 * 0.25).collect();
    let xs = DeviceBuffer::from_slice(&stream, &x)?;
    let ys = DeviceBuffer::from_slice(&stream, &x)?;
    drop(x);
    let words: Vec<u32> = (0..max as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let src = DeviceBuffer::from_slice(&stream, &words)?;
    drop(words);
    let mut out_f = DeviceBuffer::<f32>::alloc(&stream, max)?;
    let mut out_u = DeviceBuffer::<u32>::alloc(&stream, max)?;
    let mut sum = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    let mut empty_out = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    let mut spin_out = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    // The spins' cycles, from the clock measured in the first pass (the
    // second runs the same cycles).
    let mut mhz: Option<f64> = None;
    // Every case, in the fixed order; run once per pass.
    let mut cases = |plan: &Plan, report: &mut Report, timer: &mut Timer| -> Result<(), Failure> {
        // An (almost) empty kernel first: one cycle of spin, the fixed cost
        // of a launch as each clock sees it (ncu's offset from CUPTI is taken
        // on it).
        plan.case(report, timer, "spin_cycles", "empty", 0, |s| k.spin(s, 1, &mut empty_out))?;
        for &(n, label) in SIZES.iter().filter(|(n, _)| *n <= max) {
            let (xv, yv, sv) = (xs.slice(..n)?, ys.slice(..n)?, src.slice(..n)?);
            let b = n as u64;
            plan.case(report, timer, "scale_f32", label, 8 * b, |s| {
                k.scale(s, &xv, &mut out_f.slice_mut(..n)?, 2.0)
            })?;
            plan.case(report, timer, "copy_u32x4", label, 8 * b, |s| {
                k.copy(s, &sv, &mut out_u.slice_mut(..n)?)
            })?;
            plan.case(report, timer, "triad_f32", label, 12 * b, |s| {
                k.triad(s, &mut out_f.slice_mut(..n)?, &xv, &yv, 0.5)
            })?;
            plan.case(report, timer, "read_sum_u32x4", label, 4 * b, |s| k.read_sum(s, &sv, &mut sum))?;
        }
        let clock =
            *mhz.get_or_insert_with(|| timer.clock().map_or(report.device.sm_clock_mhz, |c| c.steady_mhz));
        for &len in SPINS.iter().filter(|&&t| !small || t <= 100e-6) {
            let cycles = Ctx::cycles(len, clock);
            let label = format_value(len, Unit::Seconds);
            plan.case(report, timer, "spin_cycles", &label, 0, |s| k.spin(s, cycles, &mut spin_out))?;
            if plan.pass == Pass::Events
                && plan.launch_only.is_none()
                && let Some(r) = report.records.last_mut()
            {
                let expected = cycles as f64 / (clock * 1e6);
                r.counters.push(Counter::new("expected (cycles / clock)", expected, Unit::Seconds));
            }
        }
        Ok(())
    };
    // The event modes first, with CUPTI not yet touched in the process: once
    // initialized it stays attached, and event pairs read more (see
    // `Bench::run_more`).
    let events = Plan { ctx, pass: Pass::Events, launch_only, next: 0.into() };
    cases(&events, &mut report, &mut timer)?;
    let mut kernel_mode = false;
    if launch_only.is_none() {
        match timer.kernel_mode_available() {
            Ok(()) => {
                let plan = Plan { ctx, pass: Pass::Kernel, launch_only, next: 0.into() };
                cases(&plan, &mut report, &mut timer)?;
                kernel_mode = true;
            }
            Err(why) => report.notes.push(format!("kernel mode (CUPTI) not measured: {why}")),
        }
    }
    let mhz = mhz.unwrap_or(report.device.sm_clock_mhz);
    if kernel_mode {
        ctx.progress.step("truth: CUPTI's host cost per launch");
        report.records.push(cupti_host_cost(ctx, &stream, &mut empty_out)?);
    }
    finish_report(&mut report, &timer);
    if timer.dropped_rounds() > 0 {
        report.notes.push(format!(
            "{} gated rounds were dropped (the spin gate timed out before the host had queued them)",
            timer.dropped_rounds()
        ));
    }
    report.notes.push(format!(
        "spin lengths from cycles = length x {mhz:.0} MHz (the measured steady clock); \
         '<mode> over kernel' = that mode's median - kernel mode's median (CUPTI: the GPU's own \
         start/end of the run's device operations); the event modes of every case ran first, kernel mode \
         after them (CUPTI, once initialized, stays attached and event pairs read more)"
    ));
    Ok(report)
}
