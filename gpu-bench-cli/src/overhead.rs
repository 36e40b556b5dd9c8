//! Host cost of submitting work: a raw driver launch (`cuLaunchKernel`
//! through cuda-sys's per-call layer) against gpu-sync's tracked launch, and
//! a cross-stream handoff written by hand (events and waits) against
//! gpu-sync's automatic waits; and what recording (`gpu_sync::trace`) adds
//! to a tracked launch.
//!
//! # The seven variants
//! - **raw launch**: `cuda_sys::result::launch::launch_kernel` of `add_f32`
//!   on stream A, its four parameters built on the stack for each launch, as
//!   a program without gpu-sync makes them (no allocation, no lookup);
//! - **gpu-sync launch**: `Kernel::launch` of the same kernel with three
//!   tracked buffers;
//! - **raw handoff**: A writes `z`, B reads it, and each stream waits for the
//!   other's last use: wait, launch, record on both streams
//!   (`cuStreamWaitEvent`, `cuLaunchKernel`, `cuEventRecord`), the correct
//!   hand-written sequence;
//! - **gpu-sync handoff**: the same program with no explicit waits (gpu-sync
//!   inserts them);
//! - **gpu-sync launch, recording (events)**: the tracked launch while a
//!   `trace::Recorder` with `Timing::Events` records the device (a pooled
//!   timing event on the stream before and after each launch);
//! - **gpu-sync launch, recording (cupti)**: the same with `Timing::Cupti`
//!   (CUPTI's external correlation id pushed and popped around each launch)
//!   and a CUPTI consumer of kernel and external-correlation records
//!   enabled, as a profiler runs it.
//! - **raw launch, CUPTI attached**: the raw launch again, in the second
//!   phase (below), its baseline.
//!
//! A recorded variant's recorder (and consumer) is made before its batch
//! and stopped after it, outside the timed region: no other variant runs
//! while the device records (recording on makes every submission of the
//! device take the recorded path). Stopping resolves the batch's spans
//! (events) or takes CUPTI's records; the counts are checked (one record
//! per launch) and the report's notes give them. Without libcupti the cupti
//! variant is left out and the notes say why.
//!
//! # Two phases: CUPTI attaches for good
//! Once libcupti is loaded and subscribed, it stays attached to the process
//! and every driver call goes through it: a raw launch costs more there
//! (the two raw-launch rows of the report measure by how much). The
//! launch and handoff targets are about a program that is not being
//! profiled, so the comparison runs in two phases: first the five
//! variants that need no CUPTI (raw and tracked launches and handoffs, and
//! recording with events), with CUPTI never loaded; then, only if CUPTI
//! loads, a **raw launch with CUPTI attached** interleaved with the cupti
//! recording. The cupti row is reported against both raw launches: the one
//! of its own phase (what recording adds in a profiled process) and the
//! first phase's (what a profiled launch costs against a plain program).
//!
//! A submission is one launch, or one handoff round trip (two launches).
//! Variants alternate batch by batch (the raw and gpu-sync variant of a pair
//! in alternating order), so drift and order effects hit both alike; one
//! untimed round of every variant warms the driver's paths first. The figure
//! per batch is host nanoseconds per submission; the report gives medians
//! over batches, the ratio of medians with a bootstrap 95 % confidence
//! interval per repetition, and (with `--repeat K`) the spread of each ratio
//! over the K repetitions of the whole interleaved comparison.
//!
//! # Gated batches (the default)
//! Before each timed batch the spin-gate kernel (gpu-bench's instruments,
//! [`Instruments::gate`]) is queued on stream A; for the handoffs, stream B
//! waits for it (raw: an event recorded behind the gate; gpu-sync:
//! `Stream::wait_stream`), so both streams are held. The batch's
//! submissions are timed with the host clock while the GPU is held: the
//! driver's queue does not drain while the host submits (every submission
//! meets the same non-empty queue), and no kernel of the batch runs and
//! competes with the host. The gate is opened and both streams synchronized
//! outside the timed region. This is the method of an independent
//! reviewer's measurement and the way gpu-bench's batch mode holds its
//! stream. A gate that times out (the host took longer than
//! [`GATE_TIMEOUT_NS`] to queue the batch) is counted and reported as a
//! warning: that batch ran free.
//!
//! # Free-running batches (`--free-running`, alias `--no-gate`)
//! The method of the first reports: the submissions are timed with nothing
//! holding the GPU, then the streams are synchronized outside the timed
//! region. The queue drains while the host submits, so the driver meets an
//! idle or a busy queue as the GPU happens to run.
//!
//! # Queue depth
//! A held stream cannot drain, so what is queued behind a closed gate must
//! fit the driver's queue without blocking: a stream accepts about 1024
//! pending entries before a submission blocks (an observed figure, not a
//! documented one). A blocked submission would wait for the gate's timeout
//! and the batch would time that wait. Each gated segment therefore queues
//! at most [`QUEUE_BUDGET`] entries counted over both streams: half the
//! observed depth, so it holds even if the two streams share one hardware
//! queue, and whatever a wait costs in the queue. A launch is 1 entry; a
//! handoff round trip up to 6 (wait, launch, record on each stream). The
//! default 200 launches per batch fit one segment; a batch of 200 handoffs
//! is split evenly into gated segments of at most 85 round trips (67, 67,
//! 66), each queued behind its own gate, and the timed parts are summed, so
//! the figure is still per submission over the whole batch. Splitting was
//! chosen over capping `--per-batch` for the handoffs so that every variant
//! times the same number of submissions per batch.
//!
//! # On the simulator
//! cuda-sim runs queued work only when the host waits, so a gate there holds
//! nothing the host could see; it still runs, so the code path is exercised.
//! If the gate cannot be set up there (no mapped pinned memory), the run
//! falls back to free-running batches and the report's notes say so.
//!
//! Unsafe code: the raw variants call the driver's per-call layer with raw
//! kernel parameters, as a program without gpu-sync would, and borrow
//! gpu-sync's stream and function handles for it.
#![allow(unsafe_code)]

use crate::common::{Ctx, Failure};
use gpu_bench::record::{Counter, Record, Unit};
use gpu_bench::stats::{Summary, median, ratio_ci};
use gpu_bench::{Report, Rule, SpinGate, Warning};
use gpu_sync::cuda_sys::cupti::{ActivityKind, ActivityOp};
use gpu_sync::cuda_sys::result::{event, launch, stream};
use gpu_sync::cuda_sys::{self, BorrowedFunction, BorrowedStream, CUevent_flags, Driver, OwnedEvent};
use gpu_sync::trace::{RecordOptions, Timing};
use gpu_sync::{DeviceBuffer, Kernel, LaunchConfig, Result, Signature, Stream};
use kernels::{AddSig, ScaleSig};
use std::ffi::c_void;
use std::time::Instant;

/// How long a gate waits for the host before it gives up, ns: a batch takes
/// about a millisecond to queue.
pub const GATE_TIMEOUT_NS: u64 = 2_000_000_000;

/// Most driver queue entries one gated segment queues, over both streams
/// (see the module docs: half the ~1024 entries a stream was observed to
/// hold before a submission blocks).
pub const QUEUE_BUDGET: usize = 512;

/// Queue entries outside the submissions of a gated segment: the gate, and
/// B's wait for it (with the record behind the gate that B waits on).
const GATE_ENTRIES: usize = 2;

/// Elements per buffer: small, so the GPU's part is negligible.
const N: usize = 256;

/// How batches are timed (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Method {
    /// Behind a spin gate that holds the GPU while the host submits.
    Gated,
    /// With nothing holding the GPU (the first reports' method).
    FreeRunning,
}

/// The command's options.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Batches per variant and repetition (default 40, 5 with `--quick`).
    pub batches: Option<usize>,
    /// Submissions per batch (default 200, 20 with `--quick`).
    pub per_batch: Option<usize>,
    /// Repetitions of the whole interleaved comparison.
    pub repeat: usize,
    /// How batches are timed.
    pub method: Method,
}

/// The variants, in the order of their samples.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    RawLaunch,
    TrackedLaunch,
    RawHandoff,
    TrackedHandoff,
    RecordedEvents,
    RecordedCupti,
    RawLaunchCupti,
}

/// How many variants there are.
const VARIANTS: usize = 7;

impl Variant {
    #[cfg(test)]
    const ALL: [Variant; VARIANTS] = [
        Variant::RawLaunch,
        Variant::TrackedLaunch,
        Variant::RawHandoff,
        Variant::TrackedHandoff,
        Variant::RecordedEvents,
        Variant::RecordedCupti,
        Variant::RawLaunchCupti,
    ];

    /// The first phase's variants (CUPTI never loaded), in the order of even
    /// batches; odd batches swap each pair ([`Variant::swapped`]).
    const PLAIN: [Variant; 5] = [
        Variant::RawLaunch,
        Variant::TrackedLaunch,
        Variant::RawHandoff,
        Variant::TrackedHandoff,
        Variant::RecordedEvents,
    ];

    /// The second phase's variants (CUPTI attached).
    const ATTACHED: [Variant; 2] = [Variant::RawLaunchCupti, Variant::RecordedCupti];

    /// `order` with each compared pair's two variants swapped (the order of
    /// odd batches), so drift and order effects hit both alike.
    fn swapped(order: &[Variant]) -> Vec<Variant> {
        let mut v = order.to_vec();
        for pair in v.chunks_mut(2) {
            pair.reverse();
        }
        v
    }

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            Variant::RawLaunch => "raw launch",
            Variant::TrackedLaunch => "gpu-sync launch",
            Variant::RawHandoff => "raw handoff",
            Variant::TrackedHandoff => "gpu-sync handoff",
            Variant::RecordedEvents => "gpu-sync launch, recording (events)",
            Variant::RecordedCupti => "gpu-sync launch, recording (cupti)",
            Variant::RawLaunchCupti => "raw launch, CUPTI attached",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Variant::RawLaunch => "cuLaunchKernel of add_f32 (3 buffers)",
            Variant::TrackedLaunch => "Kernel::launch of add_f32 with 3 tracked buffers",
            Variant::RawHandoff => {
                "A writes z, B reads z; on each stream: wait for the other's last use, launch, record"
            }
            Variant::TrackedHandoff => "A: launch writing z; B: launch reading z (automatic waits)",
            Variant::RecordedEvents => "Kernel::launch of add_f32, a trace::Recorder (Timing::Events) on",
            Variant::RecordedCupti => {
                "Kernel::launch of add_f32, a trace::Recorder (Timing::Cupti) and a CUPTI consumer on"
            }
            Variant::RawLaunchCupti => {
                "cuLaunchKernel of add_f32 (3 buffers), libcupti loaded and subscribed"
            }
        }
    }

    /// The recording a variant runs under.
    fn timing(self) -> Option<Timing> {
        match self {
            Variant::RecordedEvents => Some(Timing::Events),
            Variant::RecordedCupti => Some(Timing::Cupti),
            _ => None,
        }
    }

    /// Driver queue entries one submission adds, at most (see the module
    /// docs).
    fn queue_entries(self) -> usize {
        match self {
            Variant::RawHandoff | Variant::TrackedHandoff => 6,
            // The launch between its start and end events.
            Variant::RecordedEvents => 3,
            Variant::RawLaunch
            | Variant::TrackedLaunch
            | Variant::RecordedCupti
            | Variant::RawLaunchCupti => 1,
        }
    }
}

/// A compared pair: (variant, baseline, target ratio at most, if any).
/// The last one compares samples of the two phases (taken at different
/// times, so a drift between them is in it).
const PAIRS: [(Variant, Variant, Option<f64>); 5] = [
    (Variant::TrackedLaunch, Variant::RawLaunch, Some(1.03)),
    (Variant::TrackedHandoff, Variant::RawHandoff, Some(1.05)),
    (Variant::RecordedEvents, Variant::RawLaunch, None),
    (Variant::RecordedCupti, Variant::RawLaunchCupti, None),
    (Variant::RecordedCupti, Variant::RawLaunch, None),
];

/// Submissions per gated segment of `v`, at most: what fits
/// [`QUEUE_BUDGET`] with the gate's own entries.
fn segment_cap(v: Variant) -> usize {
    ((QUEUE_BUDGET - GATE_ENTRIES) / v.queue_entries()).max(1)
}

/// `total` split into the fewest segments of at most `cap`, as even as
/// possible (sizes differ by at most one, largest first).
fn split_even(total: usize, cap: usize) -> Vec<usize> {
    if total == 0 {
        return Vec::new();
    }
    let parts = total.div_ceil(cap.max(1));
    let (base, extra) = (total / parts, total % parts);
    (0..parts).map(|i| base + usize::from(i < extra)).collect()
}

/// (min, median, max) of `v`; NaNs when empty.
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let min = v.iter().copied().fold(f64::NAN, f64::min);
    let max = v.iter().copied().fold(f64::NAN, f64::max);
    (min, median(v), max)
}

/// Runs the comparison.
///
/// # Errors
/// A driver error; the gate cannot be set up on a real GPU (use
/// `--free-running`).
pub fn run(ctx: &Ctx, opts: Options) -> std::result::Result<Report, Failure> {
    // `--quick` sets the defaults; explicit values win.
    let batches = opts.batches.unwrap_or(if ctx.quick { 5 } else { 40 }).max(1);
    let per_batch = opts.per_batch.unwrap_or(if ctx.quick { 20 } else { 200 }).max(1);
    let repeat = opts.repeat.max(1);
    let mut report = ctx.report("Host cost per submission")?;
    let mut fixture = Fixture::new(ctx)?;
    let mut notes = Vec::new();
    let mut gate = match opts.method {
        Method::FreeRunning => None,
        Method::Gated => match Gate::new(ctx, &fixture.sa) {
            Ok(g) => Some(g),
            Err(e) if ctx.sim => {
                notes.push(format!(
                    "the spin gate could not be set up on the simulator ({e}): free-running batches instead"
                ));
                None
            }
            Err(e) => return Err(e.into()),
        },
    };
    let method = if gate.is_some() { Method::Gated } else { Method::FreeRunning };
    let mut recorded = Recorded::default();
    // Pooled samples per variant, and each repetition's ratios per pair.
    let mut pooled: [Vec<f64>; VARIANTS] = Default::default();
    let mut ratios: [Vec<(f64, (f64, f64))>; PAIRS.len()] = Default::default();
    let mut timeouts = [0usize; VARIANTS];
    let mut phase = Phase {
        fixture: &mut fixture,
        gate: gate.as_mut(),
        batches,
        per_batch,
        repeat,
        timeouts: &mut timeouts,
        recorded: &mut recorded,
        progress: &ctx.progress,
    };
    // Phase 1: CUPTI never loaded (see the module docs).
    let plain = phase.run("overhead", &Variant::PLAIN)?;
    // Phase 2: only where CUPTI loads; loading it attaches it for good.
    let attached = match gpu_sync::cuda_sys::cupti::activity() {
        Ok(_) => phase.run("overhead, CUPTI attached", &Variant::ATTACHED)?,
        Err(e) => {
            notes.push(format!(
                "no CUPTI, so no \"{}\" or \"{}\" row: {e}",
                Variant::RecordedCupti.name(),
                Variant::RawLaunchCupti.name()
            ));
            Vec::new()
        }
    };
    let variants: Vec<Variant> = Variant::PLAIN.iter().chain(&Variant::ATTACHED).copied().collect();
    let runs = |v: &Variant| match v {
        Variant::RecordedCupti | Variant::RawLaunchCupti => !attached.is_empty(),
        _ => true,
    };
    for rep in 0..repeat {
        let of = |v: Variant| -> &[f64] {
            let phase = if Variant::PLAIN.contains(&v) { &plain } else { &attached };
            phase.get(rep).map_or(&[], |s: &[Vec<f64>; VARIANTS]| &s[v.index()])
        };
        for (i, &(v, base, _)) in PAIRS.iter().enumerate() {
            if runs(&v) && runs(&base) {
                ratios[i].push(ratio_ci(of(v), of(base), 1000));
            }
        }
    }
    for s in plain.iter().chain(&attached) {
        for (p, s) in pooled.iter_mut().zip(s) {
            p.extend_from_slice(s);
        }
    }
    fixture.finish()?;
    drop(gate);

    for &v in variants.iter().filter(|v| runs(v)) {
        let s = &pooled[v.index()];
        let sum = Summary::of(s).unwrap_or_else(Summary::empty);
        let mut r = Record::new(v.name(), &[("submission", v.what().to_owned())]);
        r.counters.push(
            Counter::new("median per submission", sum.median * 1e-9, Unit::Seconds)
                .with_noise(sum.median_noise()),
        );
        r.counters.push(Counter::new("IQR", sum.iqr() * 1e-9, Unit::Seconds));
        r.counters.push(Counter::new("batches", sum.n as f64, Unit::Count));
        let t = timeouts[v.index()];
        if t > 0 {
            r.warnings.push(Warning {
                rule: Rule::Gate,
                mode: None,
                message: format!(
                    "the spin gate timed out in {t} gated segments before the host opened it: \
                     those segments ran free (a submission may have blocked on a full queue)"
                ),
            });
        }
        report.records.push(r);
    }
    for (i, &(v, base, target)) in PAIRS.iter().enumerate() {
        if !runs(&v) || !runs(&base) {
            continue;
        }
        let name = format!("{} / {}", v.name(), base.name());
        for (k, &(ratio, ci)) in ratios[i].iter().enumerate() {
            let mut r = Record::new(name.clone(), &[("repetition", (k + 1).to_string())]);
            r.counters.push(Counter::new("ratio of medians", ratio, Unit::Ratio));
            r.counters.push(Counter::new("95% CI low", ci.0, Unit::Ratio));
            r.counters.push(Counter::new("95% CI high", ci.1, Unit::Ratio));
            report.records.push(r);
        }
        let values: Vec<f64> = ratios[i].iter().map(|(r, _)| *r).collect();
        let (lo, mid, hi) = spread(&values);
        let mut r = Record::new(name, &[("repetition", "all".to_owned())]);
        r.counters.push(Counter::new("repetitions", values.len() as f64, Unit::Count));
        r.counters.push(Counter::new("min ratio", lo, Unit::Ratio));
        r.counters.push(Counter::new("median ratio", mid, Unit::Ratio));
        r.counters.push(Counter::new("max ratio", hi, Unit::Ratio));
        if let Some(target) = target {
            let within = values.iter().filter(|&&r| r <= target).count();
            r.counters.push(Counter::new("target (at most)", target, Unit::Ratio));
            r.counters.push(Counter::new("repetitions within target", within as f64, Unit::Count));
        }
        report.records.push(r);
    }
    let how = match method {
        Method::Gated => {
            let segs = |v: Variant| split_even(per_batch, segment_cap(v)).len();
            format!(
                "gated: each batch queued behind a spin gate holding both streams, timed with the host clock \
                 while the GPU is held, the gate opened and the streams synchronized outside the timed region; \
                 a launch batch in {} gated segment(s), a handoff batch in {} (at most {QUEUE_BUDGET} queue \
                 entries per segment, see the module docs of gpu-bench-cli's overhead.rs)",
                segs(Variant::RawLaunch),
                segs(Variant::RawHandoff)
            )
        }
        Method::FreeRunning => concat!(
            "free-running: host clock per batch with nothing holding the GPU, ",
            "the streams synchronized outside the timed region"
        )
        .to_owned(),
    };
    report.notes.push(format!(
        "{repeat} repetition(s) of {batches} batches of {per_batch} submissions per variant, interleaved batch \
         by batch (pair order alternating), in two phases: the first with CUPTI never loaded, the second \
         (raw launch and cupti recording) with it attached; {how}"
    ));
    report.notes.push(
        "targets: gpu-sync launch / raw launch at most 1.03, gpu-sync handoff / raw handoff at most 1.05 \
         (ratio of medians); the recording rows have none (their cost is what is measured)"
            .to_owned(),
    );
    for (v, r) in [(Variant::RecordedEvents, recorded.events), (Variant::RecordedCupti, recorded.cupti)] {
        if runs(&v) {
            report.notes.push(format!(
                "{}: {} launches recorded in the timed batches, {} with a device span or a CUPTI kernel record \
                 joined by its external correlation id, {} dropped",
                v.name(),
                r.launches,
                r.resolved,
                r.dropped
            ));
        }
    }
    report.notes.extend(notes);
    Ok(report)
}

/// One phase of the comparison: its variants interleaved batch by batch,
/// every repetition.
struct Phase<'a> {
    fixture: &'a mut Fixture,
    gate: Option<&'a mut Gate>,
    batches: usize,
    per_batch: usize,
    repeat: usize,
    timeouts: &'a mut [usize; VARIANTS],
    recorded: &'a mut Recorded,
    progress: &'a crate::common::Progress,
}

impl Phase<'_> {
    /// One untimed round of every variant of `order` (the driver's paths,
    /// gpu-sync's markers, the recorder's event pool and the caches warm
    /// before anything is kept), then the timed batches: per repetition,
    /// each variant's host nanoseconds per submission, one per batch.
    fn run(&mut self, what: &str, order: &[Variant]) -> Result<Vec<[Vec<f64>; VARIANTS]>> {
        let (per_batch, batches, repeat) = (self.per_batch, self.batches, self.repeat);
        let mut warm = [0usize; VARIANTS];
        for &v in order {
            self.fixture.recorded_batch(
                v,
                per_batch.min(segment_cap(v)),
                self.gate.as_deref_mut(),
                &mut warm,
                None,
            )?;
        }
        // The pool holds a full batch's events from now on.
        if order.contains(&Variant::RecordedEvents) {
            self.fixture.recorded_batch(
                Variant::RecordedEvents,
                per_batch,
                self.gate.as_deref_mut(),
                &mut warm,
                None,
            )?;
        }
        let swapped = Variant::swapped(order);
        let mut reps = Vec::with_capacity(repeat);
        for rep in 0..repeat {
            let mut samples: [Vec<f64>; VARIANTS] = Default::default();
            for b in 0..batches {
                if b % 10 == 0 {
                    self.progress
                        .step(format!("{what}: repetition {} of {repeat}, batch {b} of {batches}", rep + 1));
                }
                let this = if b % 2 == 0 { order } else { &swapped[..] };
                for &v in this {
                    let ns = self.fixture.recorded_batch(
                        v,
                        per_batch,
                        self.gate.as_deref_mut(),
                        self.timeouts,
                        Some(self.recorded),
                    )?;
                    samples[v.index()].push(ns);
                }
            }
            reps.push(samples);
        }
        Ok(reps)
    }
}

/// What the recorded batches recorded (checked, and reported in the notes).
#[derive(Default, Clone, Copy)]
struct Recorded {
    events: Counts,
    cupti: Counts,
}

/// One backend's counts.
#[derive(Default, Clone, Copy)]
struct Counts {
    /// Launches of the timed kernel recorded.
    launches: u64,
    /// Of those, with a device span (events) or a joined CUPTI kernel
    /// record (cupti).
    resolved: u64,
    /// Dropped records (`Recording::dropped`, plus CUPTI's own).
    dropped: u64,
}

/// `stream`'s handle for the per-call layer, borrowed for as long as
/// `stream`.
fn borrow_stream<'s>(drv: &'static Driver, stream: &'s Stream) -> BorrowedStream<'s> {
    // SAFETY: (1) gpu-sync makes every stream through the process-wide
    // table, `cuda_sys::driver()`, which is `drv` (the caller's, from the
    // same call), and a `Stream` keeps its `CUstream` alive until its last
    // clone drops, so it outlives the borrow of `stream` that bounds `'s`;
    // (2) streams are `Shared`: any thread may use them.
    unsafe { BorrowedStream::borrow_raw(drv, stream.as_raw()) }
}

/// `kernel`'s function handle for the per-call layer, borrowed for as long
/// as `kernel`.
fn borrow_function<'k, S: Signature>(drv: &'static Driver, kernel: &'k Kernel<S>) -> BorrowedFunction<'k> {
    // SAFETY: (1) the function comes from a module gpu-sync loaded through
    // the process-wide table (`drv`, as in `borrow_stream`), and a `Kernel`
    // holds its module loaded, so the `CUfunction` is alive for the borrow
    // of `kernel` that bounds `'k`; (2) functions are `Shared`.
    unsafe { BorrowedFunction::borrow_raw(drv, kernel.as_raw()) }
}

/// The raw baseline's handles, borrowed once before anything is timed.
#[derive(Clone, Copy)]
struct RawSide<'a> {
    sa: BorrowedStream<'a>,
    sb: BorrowedStream<'a>,
    add: BorrowedFunction<'a>,
    scale: BorrowedFunction<'a>,
    grid: [u32; 3],
    block: [u32; 3],
}

impl RawSide<'_> {
    /// One `cuLaunchKernel` of a kernel with four 8-byte parameter slots, as
    /// a program without gpu-sync makes it: the slots and the pointer array
    /// on the stack, built once per launch.
    ///
    /// # Safety
    /// 1. `f` is `add_f32` (`const float*, const float*, float*, u64`) or
    ///    `scale_f32` (`const float*, float*, float, u64`), and `slots`
    ///    holds its arguments in order: the device addresses of live
    ///    buffers of at least `n` floats, a float in the low four bytes of
    ///    its slot, `n` last;
    /// 2. the launch is ordered after every earlier write of the buffers it
    ///    reads and every earlier access of the buffer it writes, by stream
    ///    order or a wait, and the buffers stay allocated until it
    ///    completed.
    #[inline]
    unsafe fn launch(self, f: BorrowedFunction<'_>, s: BorrowedStream<'_>, slots: [u64; 4]) -> Result<()> {
        let mut slots = slots;
        let mut params = slots.each_mut().map(|v| (v as *mut u64).cast::<c_void>());
        // SAFETY: `launch_kernel`'s obligations: (1) four entries for the
        // kernel's four parameters, each pointing to an 8-byte slot that
        // lives across the call (the driver copies the values during it); a
        // pointer or `u64` parameter reads all 8 bytes, the float parameter
        // its first 4, which hold the float's bits on the little-endian
        // targets CUDA runs on; (2) the buffers' liveness and ordering are
        // this function's own obligations, passed on by its callers.
        unsafe { launch::launch_kernel(f, self.grid, self.block, 0, s, &mut params) }?;
        Ok(())
    }
}

/// Everything the variants use: streams, kernels, buffers, raw events.
struct Fixture {
    drv: &'static Driver,
    device: gpu_sync::Device,
    sa: Stream,
    sb: Stream,
    add_k: Kernel<AddSig>,
    scale_k: Kernel<ScaleSig>,
    cfg: LaunchConfig,
    /// Read by every variant; written once, before the first batch.
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    /// The raw variants' outputs, reached only through raw launches.
    raw_out: DeviceBuffer<f32>,
    raw_z: DeviceBuffer<f32>,
    raw_w: DeviceBuffer<f32>,
    /// The tracked variants' outputs, each variant its own, so no batch
    /// waits for another variant's work.
    out: DeviceBuffer<f32>,
    z: DeviceBuffer<f32>,
    w: DeviceBuffer<f32>,
    /// Raw handoff: A's record after writing `raw_z`, B's after reading it.
    ev_a: OwnedEvent,
    ev_b: OwnedEvent,
    /// Raw handoff, gated: recorded on A behind the gate, B waits for it.
    ev_gate: OwnedEvent,
}

impl Fixture {
    fn new(ctx: &Ctx) -> Result<Fixture> {
        let device = &ctx.device;
        let drv = cuda_sys::driver()?;
        let module = gpu_sync::Module::load(device, kernels::ModuleId::Elementwise.fatbin())?;
        // SAFETY: `add_f32` and `scale_f32` are elementwise.cu's kernels with
        // exactly these parameter lists (kernels/tests/signatures.rs); each
        // touches `n` elements of its buffers, and every launch here passes
        // buffers of `N` elements with `n = N`.
        let (add_k, scale_k) =
            unsafe { (module.kernel::<AddSig>("add_f32")?, module.kernel::<ScaleSig>("scale_f32")?) };
        let (sa, sb) = (Stream::new(device)?, Stream::new(device)?);
        let zeroed = || DeviceBuffer::<f32>::zeroed(&sa, N);
        let x = DeviceBuffer::from_slice(&sa, &vec![1.0f32; N])?;
        let y = DeviceBuffer::from_slice(&sa, &vec![2.0f32; N])?;
        let (raw_out, raw_z, raw_w) = (zeroed()?, zeroed()?, zeroed()?);
        let (out, z, w) = (zeroed()?, zeroed()?, zeroed()?);
        // The raw events are the baseline's own, made in the device's
        // primary context as a program without gpu-sync would.
        device.make_current()?;
        let sync_only = CUevent_flags::CU_EVENT_DISABLE_TIMING.0;
        let (ev_a, ev_b, ev_gate) =
            (event::create(drv, sync_only)?, event::create(drv, sync_only)?, event::create(drv, sync_only)?);
        let cfg = LaunchConfig::for_elements(N as u64, 256);
        let f = Fixture {
            drv,
            device: device.clone(),
            sa,
            sb,
            add_k,
            scale_k,
            cfg,
            x,
            y,
            raw_out,
            raw_z,
            raw_w,
            out,
            z,
            w,
            ev_a,
            ev_b,
            ev_gate,
        };
        // `ev_b` recorded once, so every raw round trip starts with A's wait
        // (the first round trip waits for nothing: B has done nothing yet).
        event::record(&f.ev_b, borrow_stream(drv, &f.sb))?;
        f.finish()?;
        Ok(f)
    }

    fn raw(&self) -> RawSide<'_> {
        let g = self.cfg.grid;
        let b = self.cfg.block;
        RawSide {
            sa: borrow_stream(self.drv, &self.sa),
            sb: borrow_stream(self.drv, &self.sb),
            add: borrow_function(self.drv, &self.add_k),
            scale: borrow_function(self.drv, &self.scale_k),
            grid: [g.x, g.y, g.z],
            block: [b.x, b.y, b.z],
        }
    }

    /// Waits for both streams: every batch ends here, successful or not,
    /// before anything else is queued or dropped (the raw launches' ordering
    /// argument relies on it).
    fn finish(&self) -> Result<()> {
        let a = self.sa.synchronize();
        let b = self.sb.synchronize();
        a?;
        b?;
        Ok(())
    }

    /// Queues `n` submissions of `v` (the part that is timed).
    fn submit(&mut self, v: Variant, n: usize) -> Result<()> {
        let raw = self.raw();
        let (x, y) = (self.x.as_raw(), self.y.as_raw());
        let len = N as u64;
        let a = u64::from(1.5f32.to_bits());
        match v {
            Variant::RawLaunch | Variant::RawLaunchCupti => {
                let out = self.raw_out.as_raw();
                for _ in 0..n {
                    // SAFETY: (1) `add_f32` with `x`, `y`, `raw_out` (live
                    // buffers of `N` floats owned by `self`) and `n = N`;
                    // (2) `x`, `y` are written only at creation, synchronized
                    // before any batch (`Fixture::new` ends in `finish`);
                    // `raw_out` is written only here, on A, in stream order,
                    // read by nothing; every batch ends in `finish` before
                    // the buffers could be dropped.
                    unsafe { raw.launch(raw.add, raw.sa, [x, y, out, len]) }?;
                }
            }
            Variant::RawHandoff => {
                let (z, w) = (self.raw_z.as_raw(), self.raw_w.as_raw());
                for _ in 0..n {
                    // A's next write of `raw_z` waits for B's last read.
                    stream::wait_event(raw.sa, &self.ev_b, 0)?;
                    // SAFETY: (1) `scale_f32` with `x` → `raw_z`, live
                    // buffers of `N` floats owned by `self`, `n = N`; (2)
                    // `x` as above; `raw_z` is written only on A, after the
                    // wait just queued for `ev_b`, recorded on B after its
                    // last read of `raw_z` (or before any); the buffers
                    // outlive the batch (`finish`).
                    unsafe { raw.launch(raw.scale, raw.sa, [x, z, a, len]) }?;
                    event::record(&self.ev_a, raw.sa)?;
                    stream::wait_event(raw.sb, &self.ev_a, 0)?;
                    // SAFETY: (1) `scale_f32` with `raw_z` → `raw_w`; (2) B
                    // reads `raw_z` after waiting for `ev_a`, recorded after
                    // A's write; `raw_w` is written only on B, in stream
                    // order; the buffers outlive the batch (`finish`).
                    unsafe { raw.launch(raw.scale, raw.sb, [z, w, a, len]) }?;
                    event::record(&self.ev_b, raw.sb)?;
                }
            }
            Variant::TrackedLaunch | Variant::RecordedEvents | Variant::RecordedCupti => {
                for _ in 0..n {
                    self.add_k.launch(&self.sa, self.cfg, (&self.x, &self.y, &mut self.out, len))?;
                }
            }
            Variant::TrackedHandoff => {
                for _ in 0..n {
                    self.scale_k.launch(&self.sa, self.cfg, (&self.x, &mut self.z, 1.5f32, len))?;
                    self.scale_k.launch(&self.sb, self.cfg, (&self.z, &mut self.w, 1.5f32, len))?;
                }
            }
        }
        Ok(())
    }

    /// [`Fixture::batch`], under a recorder made before it and stopped after
    /// it (untimed) for the recorded variants; their counts are added to
    /// `recorded` and checked: every launch is recorded.
    fn recorded_batch(
        &mut self,
        v: Variant,
        n: usize,
        gate: Option<&mut Gate>,
        timeouts: &mut [usize; VARIANTS],
        recorded: Option<&mut Recorded>,
    ) -> Result<f64> {
        let Some(timing) = v.timing() else { return self.batch(v, n, gate, timeouts) };
        // The consumer, and which of its records are stream A's (where the
        // recorded launches go).
        let consumer = match timing {
            Timing::Cupti => Some(
                gpu_sync::cuda_sys::cupti::activity()
                    .and_then(|a| {
                        let c = a.consumer(&[ActivityKind::Kernel, ActivityKind::ExternalCorrelation])?;
                        Ok((c, a.stream_records(self.device.raw_context(), self.sa.as_raw())?))
                    })
                    .map_err(gpu_sync::Error::from)?,
            ),
            _ => None,
        };
        let rec = self.device.record(RecordOptions::new(timing))?;
        let ns = self.batch(v, n, gate, timeouts);
        let r = rec.stop();
        let (records, on_a) = match &consumer {
            Some((c, a)) => (c.take().map_err(gpu_sync::Error::from)?, Some(a)),
            None => (Vec::new(), None),
        };
        let (ns, r) = (ns?, r?);
        let name = self.add_k.name().to_owned();
        let launches: Vec<_> = r.ops.iter().filter(|o| o.name == name).collect();
        let resolved = match timing {
            Timing::Cupti => {
                // External id → correlation id → a kernel record.
                let corr: std::collections::HashMap<u64, u32> = records
                    .iter()
                    .filter_map(|c| match c.op {
                        ActivityOp::ExternalCorrelation { external_id, .. } => {
                            Some((external_id, c.correlation_id))
                        }
                        _ => None,
                    })
                    .collect();
                let kernels: std::collections::HashSet<u32> = on_a
                    .map(|a| a.select(records.iter().cloned()))
                    .unwrap_or_default()
                    .iter()
                    .filter(|c| matches!(c.op, ActivityOp::Kernel { .. }))
                    .map(|c| c.correlation_id)
                    .collect();
                launches.iter().filter(|o| corr.get(&o.id).is_some_and(|c| kernels.contains(c))).count()
            }
            _ => launches.iter().filter(|o| o.span.is_some()).count(),
        };
        if launches.len() != n {
            return Err(gpu_sync::Error::Internal(format!(
                "{}: {} launches recorded of {n}",
                v.name(),
                launches.len()
            )));
        }
        if let Some(rec) = recorded {
            let c = if timing == Timing::Cupti { &mut rec.cupti } else { &mut rec.events };
            c.launches += launches.len() as u64;
            c.resolved += resolved as u64;
            c.dropped += r.dropped;
        }
        Ok(ns)
    }

    /// One batch of `n` submissions of `v`: host nanoseconds per submission.
    /// Gated: in segments that fit [`QUEUE_BUDGET`], each behind a closed
    /// gate; free-running: all at once.
    fn batch(
        &mut self,
        v: Variant,
        n: usize,
        gate: Option<&mut Gate>,
        timeouts: &mut [usize; VARIANTS],
    ) -> Result<f64> {
        let mut ns = 0u128;
        match gate {
            None => {
                let t = Instant::now();
                let r = self.submit(v, n);
                ns += t.elapsed().as_nanos();
                let f = self.finish();
                r?;
                f?;
            }
            Some(gate) => {
                for seg in split_even(n, segment_cap(v)) {
                    if let Err(e) = gate.hold(self, v) {
                        // Whatever was queued drains before the error leaves.
                        let _ = gate.release(self);
                        return Err(e);
                    }
                    let t = Instant::now();
                    let r = self.submit(v, seg);
                    ns += t.elapsed().as_nanos();
                    // Open the gate whatever happened, so the streams drain.
                    let opened = gate.release(self);
                    r?;
                    if !opened? {
                        timeouts[v.index()] += 1;
                    }
                }
            }
        }
        Ok(ns as f64 / n.max(1) as f64)
    }
}

/// The spin gate of gpu-bench's engine ([`SpinGate`]), held on A; for a
/// handoff, B waits for it too.
struct Gate(SpinGate);

impl Gate {
    fn new(ctx: &Ctx, sa: &Stream) -> Result<Gate> {
        let g = SpinGate::new(ctx.instruments(), sa, GATE_TIMEOUT_NS)?;
        sa.synchronize()?;
        Ok(Gate(g))
    }

    /// Queues the gate on A; for a handoff, B waits for it too. Untimed.
    fn hold(&mut self, f: &Fixture, v: Variant) -> Result<()> {
        self.0.hold(&f.sa)?;
        match v {
            Variant::RawHandoff => {
                let raw = f.raw();
                event::record(&f.ev_gate, raw.sa)?;
                stream::wait_event(raw.sb, &f.ev_gate, 0)?;
            }
            Variant::TrackedHandoff => f.sb.wait_stream(&f.sa)?,
            Variant::RawLaunch
            | Variant::TrackedLaunch
            | Variant::RecordedEvents
            | Variant::RecordedCupti
            | Variant::RawLaunchCupti => {}
        }
        Ok(())
    }

    /// Opens the gate, waits for both streams, and says whether the host
    /// opened the gate (`false`: it timed out first). Untimed.
    fn release(&mut self, f: &Fixture) -> Result<bool> {
        let opened = self.0.open();
        f.finish()?;
        opened?;
        self.0.opened(&f.sa)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_even_and_fit_the_budget() {
        assert_eq!(split_even(200, segment_cap(Variant::RawLaunch)), vec![200]);
        assert_eq!(segment_cap(Variant::RawHandoff), 85);
        assert_eq!(split_even(200, segment_cap(Variant::RawHandoff)), vec![67, 67, 66]);
        assert_eq!(split_even(20, 85), vec![20]);
        assert_eq!(split_even(0, 85), Vec::<usize>::new());
        for v in Variant::ALL {
            for total in [1, 84, 85, 86, 200, 1000, 4097] {
                let segs = split_even(total, segment_cap(v));
                assert_eq!(segs.iter().sum::<usize>(), total, "{v:?} {total}");
                let (lo, hi) = (segs.iter().min().unwrap(), segs.iter().max().unwrap());
                assert!(hi - lo <= 1, "{v:?} {total}: {segs:?}");
                assert!(GATE_ENTRIES + hi * v.queue_entries() <= QUEUE_BUDGET, "{v:?} {total}");
            }
        }
    }

    #[test]
    fn the_two_phases_hold_every_variant_once_and_swap_each_pair() {
        for v in Variant::ALL {
            let n = Variant::PLAIN.iter().chain(&Variant::ATTACHED).filter(|&&x| x == v).count();
            assert_eq!(n, 1, "{v:?}");
        }
        // Only the second phase may need CUPTI.
        assert!(Variant::PLAIN.iter().all(|v| *v != Variant::RecordedCupti && *v != Variant::RawLaunchCupti));
        assert_eq!(
            Variant::swapped(&Variant::PLAIN),
            [
                Variant::TrackedLaunch,
                Variant::RawLaunch,
                Variant::TrackedHandoff,
                Variant::RawHandoff,
                Variant::RecordedEvents
            ]
        );
        assert_eq!(Variant::swapped(&Variant::ATTACHED), [Variant::RecordedCupti, Variant::RawLaunchCupti]);
        // Every compared pair lies within one phase, but the last.
        for &(v, base, _) in &PAIRS[..PAIRS.len() - 1] {
            assert_eq!(Variant::PLAIN.contains(&v), Variant::PLAIN.contains(&base), "{v:?} / {base:?}");
        }
    }

    #[test]
    fn spread_is_min_median_max() {
        assert_eq!(spread(&[1.04, 1.01, 1.02]), (1.01, 1.02, 1.04));
        let (lo, mid, hi) = spread(&[]);
        assert!(lo.is_nan() && mid.is_nan() && hi.is_nan());
    }
}
