//! The timer: [`Bench`] times a closure that submits work on a
//! [`gpu_sync::Stream`] in several modes side by side, with warmup until
//! steady state, the stopping rule of [`crate::stop`], clock and resolution
//! checks, and returns a typed [`Record`].
//!
//! [`Bench`]'s page has the example.
//!
//! # How each mode times
//! One file per mode in `method/`, each choosing a time source in
//! `clock/`:
//! - **first call**: the host clock around the first run (or a separate
//!   closure that also loads the module) and a stream synchronization:
//!   events cannot see a module load.
//! - **cold**: before each sample a memset over a scratch buffer of twice
//!   the L2 size (allocated once), outside the events; each run isolated
//!   from the previous one by that flush.
//! - **hot**: events around each run, after warmup.
//! - **batch**: a spin-gate kernel holds the timing stream while up to
//!   [`Settings::batch_runs`] runs (about [`PIPELINE_AHEAD_S`] of work) are
//!   queued behind it; the host then opens the gate and the runs execute
//!   back to back: time per run = span / N, with no host launch gaps. Needs
//!   [`Instruments`].
//! - **graph**: one run captured into a CUDA graph once and replayed.
//! - **kernel**: no events: the GPU's own start and end of every device
//!   operation of each run, from CUPTI's activity records (libcupti loaded
//!   at run time, see `gpu_sync::cuda_sys::cupti`); a sample is the span
//!   from a run's first start to its last end, and the sum of the
//!   operations' durations is reported beside it. The reference the event
//!   modes are held against ("hot over kernel").
//!
//! # Gated rounds
//! With instruments, hot, cold and graph samples are taken in *gated
//! rounds*: up to [`PIPELINE_RING`] samples (about [`PIPELINE_AHEAD_S`] of
//! device time) — each (flush, for cold) start event, the work, end event —
//! are queued while the spin gate holds the timing stream; the gate opens,
//! the GPU runs them back to back, and the round is read. No host gap ever
//! falls inside a timed region: timing each sample with the GPU idle times
//! the host's submission (the first H200 run: a 10 µs spin measured 15 µs
//! hot, 11.65 µs batch), and a ring kept fed from the host starves when one
//! sample's submission takes longer than its run (2 µs kernels). A round
//! whose gate timed out before the host had queued it (work that blocks
//! the host, such as a pageable copy) is dropped and counted
//! ([`Timer::dropped_rounds`]), and the mode goes on ungated. Without
//! instruments, samples are enqueued ahead on the ring, primed by a spin
//! whenever the queue ran empty. Each run is exactly one sample, read in
//! order; the samples of a round still unread when the stopping rule is met
//! are kept (the sample cap counts them). The event-pair floor on a busy
//! stream (`Resolution::busy_floor_s`) is measured the same way: empty pairs
//! in a gated round.
//!
//! The timing stream is the engine's own; before each mode it waits for
//! the caller's stream (device-side), so work the caller queued first is
//! never timed, and gpu-sync's tracking orders every buffer the closure
//! touches.

use crate::clock::Clock;
use crate::error::{Error as BenchError, Result as BenchResult};
use crate::instruments::Instruments;
use crate::record::{Counter, Mode, ModeResult, Record, Unit, Warning};
use crate::settings::Settings;
use crate::stats::Summary;
use crate::stop::{self, Rule, StopReason};
pub use crate::timer::{KernelRecords, PIPELINE_AHEAD_S, PIPELINE_RING, PROFILER_IDLE_S, Timer};
use crate::timer::{PROBE_EVERY_S, WARMUP_TOLERANCE, WARMUP_WINDOW};
use crate::warmup::WarmupCurve;
use gpu_sync::{Result, Stream};
use std::sync::Arc;
use std::time::Instant;

/// A first-call closure: what the very first run costs (for example, load
/// the module and launch once).
pub type FirstCall<'a> = dyn FnMut(&Stream) -> Result<()> + 'a;

/// A benchmark: a name, parameters, declared bytes and FLOPs per run, the
/// modes to time and the sampling settings. See the module docs.
///
/// ```
/// # use gpu_bench::{Bench, Mode, Settings};
/// # use gpu_sync::{Device, DeviceBuffer, Stream};
/// # gpu_sync::sim::install().unwrap();
/// # let device = Device::get(0).unwrap();
/// let stream = Stream::new(&device)?;
/// let mut buf = DeviceBuffer::<u32>::zeroed(&stream, 1 << 20)?;
/// let record = Bench::new("memset 4 MiB")
///     .bytes(4 << 20)
///     .modes(&[Mode::FirstCall, Mode::Cold, Mode::Hot, Mode::Graph])
///     .settings(Settings::quick())
///     .run(&stream, |s| s.fill_bytes(&mut buf, 7))?;
/// let hot = record.mode(Mode::Hot).unwrap();
/// assert!(hot.median() > 0.0);
/// assert!(record.counter("cache effect").is_some());
/// # Ok::<(), gpu_bench::Error>(())
/// ```
#[derive(Clone)]
pub struct Bench {
    name: String,
    params: Vec<(String, String)>,
    bytes: Option<u64>,
    flops: Option<u64>,
    settings: Settings,
    pub(crate) modes: Vec<Mode>,
    pub(crate) instruments: Option<Arc<dyn Instruments>>,
    best_effort: bool,
}

impl Bench {
    /// A benchmark named `name`: hot mode, default [`Settings`].
    pub fn new(name: impl Into<String>) -> Bench {
        Bench {
            name: name.into(),
            params: Vec::new(),
            bytes: None,
            flops: None,
            settings: Settings::default(),
            modes: vec![Mode::Hot],
            instruments: None,
            best_effort: false,
        }
    }

    /// Adds a parameter (an axis value: size, dtype); part of the record's key.
    pub fn param(mut self, key: impl Into<String>, value: impl std::fmt::Display) -> Bench {
        self.params.push((key.into(), value.to_string()));
        self
    }

    /// Bytes one run moves: the records get a bandwidth counter.
    pub fn bytes(mut self, bytes: u64) -> Bench {
        self.bytes = Some(bytes);
        self
    }

    /// FLOPs one run performs: the records get a FLOP/s counter.
    pub fn flops(mut self, flops: u64) -> Bench {
        self.flops = Some(flops);
        self
    }

    /// The sampling settings in use.
    pub fn settings_ref(&self) -> &Settings {
        &self.settings
    }

    /// The sampling settings.
    pub fn settings(mut self, settings: Settings) -> Bench {
        self.settings = settings;
        self
    }

    /// The modes to time, reported in [`Mode::ALL`] order.
    pub fn modes(mut self, modes: &[Mode]) -> Bench {
        let mut m = modes.to_vec();
        m.sort();
        m.dedup();
        self.modes = m;
        self
    }

    /// Instruments for batch mode and the clock check (used by [`Bench::run`];
    /// [`Bench::run_on`] uses its timer's).
    pub fn instruments(mut self, instruments: Arc<dyn Instruments>) -> Bench {
        self.instruments = Some(instruments);
        self
    }

    /// With `true`, a requested mode that cannot run here (batch without
    /// instruments, kernel without CUPTI, graph when the work cannot be
    /// captured) is skipped with a [`Rule::Unavailable`] warning in the
    /// record instead of failing [`Bench::run`]. Off by default: nothing
    /// asked for is dropped silently.
    pub fn best_effort(mut self, yes: bool) -> Bench {
        self.best_effort = yes;
        self
    }

    /// Times `f` in every requested mode on a new [`Timer`] for `stream`.
    ///
    /// # Errors
    /// A driver error, or `f`'s error.
    pub fn run(&self, stream: &Stream, f: impl FnMut(&Stream) -> Result<()>) -> BenchResult<Record> {
        let mut timer = Timer::new(stream, self.instruments.clone())?;
        self.run_on(&mut timer, None, f)
    }

    /// As [`Bench::run`] on a shared `timer`, with an optional `first`
    /// closure for the first-call mode (for example one that loads the
    /// module and launches once); without it, first-call times the first
    /// run of `f`.
    ///
    /// # Errors
    /// A driver error, or the closures' error; [`BenchError::Unavailable`]
    /// for a requested mode that cannot run here (unless
    /// [`Bench::best_effort`]); [`BenchError::Kernel`] when CUPTI's records
    /// cannot be split into runs.
    pub fn run_on(
        &self,
        timer: &mut Timer,
        first: Option<&mut FirstCall<'_>>,
        mut f: impl FnMut(&Stream) -> Result<()>,
    ) -> BenchResult<Record> {
        let mut rec = self.new_record()?;
        self.measure_into(timer, &mut rec, first, &mut f)?;
        Ok(rec)
    }

    /// An empty record of this bench (name, parameters, declared bytes and
    /// FLOPs), once the settings are checked.
    pub(crate) fn new_record(&self) -> BenchResult<Record> {
        self.settings.validate().map_err(BenchError::Settings)?;
        let mut rec = Record::new(
            self.name.clone(),
            &self.params.iter().map(|(k, v)| (k.as_str(), v.clone())).collect::<Vec<_>>(),
        );
        rec.bytes_per_run = self.bytes;
        rec.flops_per_run = self.flops;
        Ok(rec)
    }

    /// Times `f` in this bench's modes on `timer` and adds them to `rec`, a
    /// record of the same work made earlier (by [`Bench::run_on`]); the
    /// differences between modes (launch overhead, "hot over kernel" …) are
    /// computed again over all of `rec`'s modes. For measuring the event
    /// modes of many benchmarks before kernel mode touches CUPTI: once
    /// CUPTI has been initialized in a process it stays attached, and event
    /// pairs read more (0.13–0.19 µs on an H100:
    /// `docs/results/2026-11-25-event-anatomy.md`).
    ///
    /// # Errors
    /// As [`Bench::run_on`]; [`BenchError::Settings`] if `rec` already has
    /// one of the modes.
    pub fn run_more(
        &self,
        timer: &mut Timer,
        rec: &mut Record,
        mut f: impl FnMut(&Stream) -> Result<()>,
    ) -> BenchResult<()> {
        self.settings.validate().map_err(BenchError::Settings)?;
        if let Some(m) = self.modes.iter().find(|m| rec.mode(**m).is_some()) {
            return Err(BenchError::Settings(format!(
                "the record of {} already has a {} result",
                rec.name,
                m.name()
            )));
        }
        self.measure_into(timer, rec, None, &mut f)
    }

    /// The modes' loop of [`Bench::run_on`] and [`Bench::run_more`], then
    /// the differences between modes, computed afresh.
    fn measure_into(
        &self,
        timer: &mut Timer,
        rec: &mut Record,
        mut first: Option<&mut FirstCall<'_>>,
        f: &mut dyn FnMut(&Stream) -> Result<()>,
    ) -> BenchResult<()> {
        for &mode in &self.modes {
            timer.stream.wait_stream(&timer.caller)?;
            let Some(method) = crate::method::find(mode) else {
                return Err(BenchError::Unavailable { mode, why: "no method measures this mode".into() });
            };
            timer.last_warmup.clear();
            let result = method.measure(self, timer, rec, first.as_deref_mut(), f)?;
            if let Some(r) = result {
                self.keep(timer, rec, r, 1.0)?;
            }
        }
        rec.modes.sort_by_key(|m| m.mode);
        timer.caller.wait_stream(&timer.stream)?;
        derive(rec);
        Ok(())
    }

    /// Adds a mode's result to `rec`: the simulated roof's check (over
    /// `devices` devices' bandwidth), the record's warm-up curve (the first
    /// sampled mode's) and the mode's warnings.
    pub(crate) fn keep(
        &self,
        timer: &mut Timer,
        rec: &mut Record,
        r: ModeResult,
        devices: f64,
    ) -> BenchResult<()> {
        check_simulated_roof(timer, rec, &r, devices)?;
        let warm = std::mem::take(&mut timer.last_warmup);
        if rec.warmup.is_none() {
            rec.warmup = WarmupCurve::new(r.mode, warm, &r.summary);
        }
        self.warn(rec, &r, timer);
        rec.modes.push(r);
        Ok(())
    }

    /// A requested mode that cannot run: an error, or with
    /// [`Bench::best_effort`] a warning in the record.
    pub(crate) fn unavailable(&self, rec: &mut Record, mode: Mode, why: String) -> BenchResult<()> {
        if !self.best_effort {
            return Err(BenchError::Unavailable { mode, why });
        }
        rec.warnings.push(Warning { rule: Rule::Unavailable, mode: Some(mode), message: why });
        Ok(())
    }

    /// Warmup until steady, then the one sampling loop, with clock probes.
    pub(crate) fn sample(
        &self,
        timer: &mut Timer,
        mode: Mode,
        runs_per_sample: usize,
        src: &mut dyn Clock,
    ) -> BenchResult<ModeResult> {
        let s = &self.settings;
        let began = Instant::now();
        let warmup_cap = s.warmup_max.max(s.warmup_min).max(1);
        src.set_left(warmup_cap);
        let mut warm = Vec::new();
        let steady = loop {
            warm.push(src.next(timer)?);
            let n = warm.len();
            if n == 1 {
                src.size_for(warm[0]);
            }
            if n >= s.warmup_min.max(1) && n >= WARMUP_WINDOW.min(s.warmup_max.max(1)) {
                let last = &warm[n.saturating_sub(WARMUP_WINDOW)..];
                let (lo, hi) = last.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
                let med = crate::stats::median(last);
                if med > 0.0 && (hi - lo) / med <= WARMUP_TOLERANCE || med == 0.0 && hi == 0.0 {
                    break true;
                }
                // Runs of a few µs jitter by more than the tolerance from one
                // to the next, yet their level is settled: the medians of the
                // last two windows of 8 agree.
                if n >= 16 {
                    let (a, b) =
                        (crate::stats::median(&warm[n - 16..n - 8]), crate::stats::median(&warm[n - 8..]));
                    if b > 0.0 && (b - a).abs() / b <= WARMUP_TOLERANCE {
                        break true;
                    }
                }
            }
            if n >= warmup_cap || began.elapsed().as_secs_f64() > s.timeout_s / 4.0 {
                break false;
            }
        };
        // Warmup runs still in flight are warmup runs: read, not recorded.
        warm.extend(src.drain(timer)?);
        src.set_left(s.max_samples.max(1));
        src.set_idle();
        src.clear_side();
        src.size_for(crate::stats::median(&warm));
        let warmup_s = began.elapsed().as_secs_f64();
        timer.last_warmup = warm.clone();
        let mut probes: Vec<(usize, f64)> = Vec::new();
        if let Some(mhz) = timer.probe_clock()? {
            probes.push((0, mhz));
        }
        let sampling = Instant::now();
        let mut last_probe = Instant::now();
        let mut taken = 0usize;
        let (mut samples, why) = stop::sample_until(
            s,
            || {
                if last_probe.elapsed().as_secs_f64() >= PROBE_EVERY_S {
                    if let Some(mhz) = timer.probe_clock()? {
                        probes.push((taken, mhz));
                    }
                    src.set_idle();
                    last_probe = Instant::now();
                }
                taken += 1;
                src.next(timer)
            },
            || sampling.elapsed().as_secs_f64(),
        )?;
        // Samples in flight when the rule was met are real runs: kept.
        samples.extend(src.drain(timer)?);
        let sampling_s = sampling.elapsed().as_secs_f64();
        if let Some(mhz) = timer.probe_clock()? {
            probes.push((samples.len(), mhz));
        }
        let steady_mhz = timer.probes_mhz.iter().copied().fold(0.0, f64::max);
        let low = low_clock_samples(samples.len(), &probes, 0.9 * steady_mhz);
        let unmet = if why == StopReason::Converged {
            Vec::new()
        } else {
            stop::unmet(&samples, samples.iter().sum::<f64>() * runs_per_sample as f64, s)
        };
        let mut r = self.finish(mode, samples, runs_per_sample, Some(why), unmet, (warm.len(), steady), low);
        r.warmup_s = warmup_s;
        r.sampling_s = sampling_s;
        Ok(r)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish(
        &self,
        mode: Mode,
        samples: Vec<f64>,
        runs_per_sample: usize,
        stop: Option<StopReason>,
        unmet: Vec<Rule>,
        (warmup_runs, warmup_steady): (usize, bool),
        low_clock_samples: usize,
    ) -> ModeResult {
        let summary = Summary::of(&samples).unwrap_or_else(Summary::empty);
        let mut median = Counter::new("median", summary.median, Unit::Seconds);
        if summary.median_noise().is_finite() {
            median = median.with_noise(summary.median_noise());
        }
        let mut counters = vec![median];
        if let Some(b) = self.bytes {
            counters.push(Counter::new("bandwidth", b as f64 / summary.median, Unit::BytesPerSecond));
        }
        if let Some(fl) = self.flops {
            counters.push(Counter::new("compute", fl as f64 / summary.median, Unit::FlopPerSecond));
        }
        ModeResult {
            mode,
            samples,
            summary,
            runs_per_sample,
            stop,
            unmet,
            warmup_runs,
            warmup_steady,
            low_clock_samples,
            warmup_s: 0.0,
            sampling_s: 0.0,
            counters,
        }
    }

    fn warn(&self, rec: &mut Record, r: &ModeResult, timer: &Timer) {
        let s = &self.settings;
        let mode = Some(r.mode);
        let mut push = |rule, message: String| rec.warnings.push(Warning { rule, mode, message });
        if let Some(why) = r.stop.filter(|w| *w != StopReason::Converged) {
            let measured = r.samples.iter().sum::<f64>() * r.runs_per_sample as f64;
            for rule in &r.unmet {
                let detail = match rule {
                    Rule::MinSamples => format!("{} samples of at least {}", r.summary.n, s.min_samples),
                    Rule::MinTime => format!("{measured:.3} s measured of at least {} s", s.min_time_s),
                    Rule::MedianNoise => format!(
                        "the median's noise {:.2}% is above {:.2}%",
                        r.summary.median_noise() * 100.0,
                        s.max_noise_pct
                    ),
                    Rule::Drift => format!(
                        "the halves' interquartile means differ by {:.2}% (more than {:.2}%)",
                        stop::drift(&r.samples) * 100.0,
                        2.0 * s.max_noise_pct
                    ),
                    _ => String::new(),
                };
                let cap = match why {
                    StopReason::Timeout => format!("the timeout ({} s)", s.timeout_s),
                    _ => format!("the sample cap ({})", s.max_samples),
                };
                push(*rule, format!("sampling ended at {cap} with this rule unmet: {detail}"));
            }
        }
        if r.stop.is_some() && !r.warmup_steady {
            push(
                Rule::Warmup,
                format!(
                    "warmup ended after {} runs without {WARMUP_WINDOW} runs agreeing within {:.0}% \
                     (nor two windows of 8 runs whose medians agree that closely)",
                    r.warmup_runs,
                    WARMUP_TOLERANCE * 100.0
                ),
            );
        }
        let limit = timer.resolution.limit_s();
        if matches!(r.mode, Mode::Hot | Mode::Cold | Mode::Graph) && r.summary.median < 20.0 * limit {
            push(
                Rule::Resolution,
                format!(
                    "median {} is within 20x of the event timer's resolution ({}); batch mode amortizes it",
                    crate::record::format_value(r.summary.median, Unit::Seconds),
                    crate::record::format_value(limit, Unit::Seconds)
                ),
            );
        }
        if let Some(floor) = timer.resolution.busy_floor_s
            && matches!(r.mode, Mode::Hot | Mode::Cold | Mode::Graph)
            && r.summary.median < 3.0 * floor
        {
            push(
                Rule::Resolution,
                format!(
                    "median {} is within 3x of the event-pair floor on a busy stream ({}): the events' own \
                     cost is a large part of it; trust kernel or batch mode here",
                    crate::record::format_value(r.summary.median, Unit::Seconds),
                    crate::record::format_value(floor, Unit::Seconds)
                ),
            );
        }
        if r.low_clock_samples > 0 {
            push(
                Rule::Clock,
                format!(
                    "{} of {} samples were taken below 90% of the steady SM clock",
                    r.low_clock_samples, r.summary.n
                ),
            );
        }
    }
}

/// Samples between probes where either neighbouring probe is below `limit`.
fn low_clock_samples(n: usize, probes: &[(usize, f64)], limit: f64) -> usize {
    if probes.is_empty() || limit <= 0.0 {
        return 0;
    }
    (0..n)
        .filter(|&i| {
            let before = probes.iter().rev().find(|p| p.0 <= i);
            let after = probes.iter().find(|p| p.0 > i);
            before.into_iter().chain(after).any(|p| p.1 < limit)
        })
        .count()
}

/// Whether the driver in use is the simulator (cuda-sim): every device
/// time is then simulated.
pub(crate) fn simulated() -> bool {
    gpu_sync::Backend::current().is_some_and(gpu_sync::Backend::is_sim)
}

/// On the simulator, refuses a mode whose bandwidth beats the simulated
/// device's memory bandwidth (its memory clock × bus width, as
/// [`crate::device_info`] computes it, times `devices` for work spread over
/// several of them): see
/// [`BenchError::AboveSimulatedRoof`]. On a GPU it checks nothing (a
/// figure above the datasheet is a wrong declaration too, but the timer's
/// own noise can cross it).
fn check_simulated_roof(timer: &Timer, rec: &Record, r: &ModeResult, devices: f64) -> BenchResult<()> {
    use gpu_sync::cuda_sys::CUdevice_attribute as A;
    let Some(bw) = r.counters.iter().find(|c| c.unit == Unit::BytesPerSecond) else {
        return Ok(());
    };
    if !simulated() {
        return Ok(());
    }
    let device = timer.stream.device();
    let mem_khz = f64::from(device.attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?);
    let bus = f64::from(device.attribute(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?);
    let roof = 2.0 * mem_khz * 1e3 * bus / 8.0 * devices;
    // Durations are whole simulated nanoseconds rounded up: at the roof a
    // rate reads at most the roof, up to the division's last bit.
    if bw.value > roof * (1.0 + 1e-9) {
        return Err(BenchError::AboveSimulatedRoof {
            benchmark: rec.key(),
            mode: r.mode,
            rate_gbs: bw.value / 1e9,
            roof_gbs: roof / 1e9,
        });
    }
    Ok(())
}

/// Differences between modes, with their meaning. A difference that
/// cannot be negative (launch overhead, cache effect, first-call cost) but
/// is, by more than three standard errors of the two medians, is not
/// printed as a number: its value is NaN (rendered "—") and a
/// [`Rule::Consistency`] warning says why.
pub(crate) fn derive(rec: &mut Record) {
    let pairs = [
        ("launch overhead", Mode::Hot, Mode::Batch, true),
        ("cache effect", Mode::Cold, Mode::Hot, true),
        ("first-call cost", Mode::FirstCall, Mode::Hot, true),
        ("graph saving", Mode::Hot, Mode::Graph, false),
    ];
    // Computed afresh: the derived counters and warnings of an earlier call
    // (before [`Bench::run_more`] added modes) go first.
    let is_derived = |n: &str| pairs.iter().any(|p| p.0 == n) || n.ends_with(" over kernel");
    rec.counters.retain(|c| !is_derived(&c.name));
    rec.warnings.retain(|w| !(w.rule == Rule::Consistency && w.mode.is_none()));
    let med = |m: Mode| rec.mode(m).map(|r| (r.median(), r.summary.median_noise() * r.median()));
    let mut derived = Vec::new();
    let mut warnings = Vec::new();
    for (name, a, b, non_negative) in pairs {
        let (Some((ma, ea)), Some((mb, eb))) = (med(a), med(b)) else { continue };
        let d = ma - mb;
        let se = |e: f64| if e.is_finite() { e } else { 0.0 };
        if non_negative && d < -3.0 * (se(ea) + se(eb)) {
            derived.push(Counter::new(name, f64::NAN, Unit::Seconds));
            warnings.push(Warning {
                rule: Rule::Consistency,
                mode: None,
                message: format!(
                    "{name} not shown: {} ({}) is below {} ({}) beyond the noise, which no {name} explains",
                    a.name(),
                    crate::record::format_value(ma, Unit::Seconds),
                    b.name(),
                    crate::record::format_value(mb, Unit::Seconds)
                ),
            });
        } else {
            derived.push(Counter::new(name, d, Unit::Seconds));
        }
    }
    // Each event mode against the GPU's own time of the same work.
    if let Some((mk, _)) = med(Mode::Kernel) {
        for m in [Mode::Cold, Mode::Hot, Mode::Batch, Mode::Graph] {
            if let Some((mm, _)) = med(m) {
                derived.push(Counter::new(format!("{} over kernel", m.name()), mm - mk, Unit::Seconds));
            }
        }
    }
    rec.counters.extend(derived);
    rec.warnings.extend(warnings);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_clock_samples_are_those_next_to_a_low_probe() {
        // Probes before sample 0 (fast), before 10 (slow), before 20 (fast).
        let probes = [(0, 1980.0), (10, 1500.0), (20, 1980.0)];
        // Samples 0..10 sit between a fast and a slow probe, 10..20 after
        // the slow one: all 20 flagged; 20..30 after a fast one: not.
        assert_eq!(low_clock_samples(30, &probes, 0.9 * 1980.0), 20);
        assert_eq!(low_clock_samples(30, &[(0, 1980.0)], 0.9 * 1980.0), 0);
        assert_eq!(low_clock_samples(30, &[], 1.0), 0);
    }
}
