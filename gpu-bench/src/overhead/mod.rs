//! The launch-overhead method: the host cost of submitting work: a raw driver launch (`cuLaunchKernel`
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
//! [`run`] measures and returns the samples and ratios ([`Overhead`]); the
//! `gpu-bench overhead` command renders them.

mod fixture;
mod variant;

pub use variant::{PAIRS, QUEUE_BUDGET, VARIANTS, Variant, segments};

use crate::Instruments;
use crate::error::Result;
use crate::stats::ratio_ci;
use fixture::{Fixture, Gate};
use gpu_sync::Device;
use std::sync::Arc;

/// How long a gate waits for the host before it gives up, ns: a batch takes
/// about a millisecond to queue.
pub const GATE_TIMEOUT_NS: u64 = 2_000_000_000;

/// Bootstrap resamples of each ratio's confidence interval.
const RESAMPLES: usize = 1000;

/// How batches are timed (see the module docs; [`Overhead`]'s example runs
/// one).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Method {
    /// Behind a spin gate that holds the GPU while the host submits.
    Gated,
    /// With nothing holding the GPU (the first reports' method).
    FreeRunning,
}

/// What to measure and how ([`Overhead`]'s example sets one).
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Batches per variant and repetition (at least 1).
    pub batches: usize,
    /// Submissions per batch (at least 1).
    pub per_batch: usize,
    /// Repetitions of the whole interleaved comparison (at least 1).
    pub repeat: usize,
    /// How batches are timed.
    pub method: Method,
}

/// What the recorded batches recorded (checked: one record per launch);
/// [`Overhead::recorded`], read in [`Overhead`]'s example.
#[derive(Default, Clone, Copy, Debug)]
pub struct Recorded {
    /// The events recording's counts.
    pub events: Counts,
    /// The CUPTI recording's counts.
    pub cupti: Counts,
}

/// One backend's counts, inside [`Recorded`] (see [`Overhead`]'s example).
#[derive(Default, Clone, Copy, Debug)]
pub struct Counts {
    /// Launches of the timed kernel recorded.
    pub launches: u64,
    /// Of those, with a device span (events) or a joined CUPTI kernel
    /// record (cupti).
    pub resolved: u64,
    /// Dropped records (`Recording::dropped`, plus CUPTI's own).
    pub dropped: u64,
}

/// A ratio of medians with its bootstrap 95 % interval, one per
/// repetition in [`Overhead::ratios`] (see [`Overhead`]'s example).
pub type Ratio = (f64, (f64, f64));

/// What [`run`] measured.
///
/// On the simulator, a short free-running comparison (the figures are the
/// simulator's host cost, not a GPU's):
/// ```
/// # gpu_sync::sim::install()?;
/// # kernels::register_sim_kernels();
/// use gpu_bench::overhead::{Method, Options, Variant, run};
/// let device = gpu_sync::Device::get(0)?;
/// let instruments = gpu_bench::instruments::load(&device)?;
/// let options = Options { batches: 2, per_batch: 4, repeat: 1, method: Method::FreeRunning };
/// let o = run(&device, instruments, true, options, &|_| {})?;
/// assert!(o.ran(Variant::RawLaunch) && o.ran(Variant::TrackedLaunch));
/// // Host nanoseconds per submission, one per batch of each variant.
/// assert_eq!(o.samples[Variant::TrackedLaunch.index()].len(), 2);
/// assert!(o.samples[Variant::TrackedLaunch.index()].iter().all(|&ns| ns > 0.0));
/// // Every recorded launch was recorded: nothing dropped.
/// assert_eq!(o.recorded.events.dropped, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Overhead {
    /// How the batches were timed: [`Method::FreeRunning`] also where the
    /// gate was asked for but could not be set up on the simulator.
    pub method: Method,
    /// The options it ran with (at least 1 each).
    pub options: Options,
    /// Whether CUPTI loaded, so that the second phase ran.
    pub attached: bool,
    /// Host nanoseconds per submission, one per batch, every repetition
    /// pooled, by [`Variant::index`] (empty for a variant that did not run).
    pub samples: [Vec<f64>; VARIANTS],
    /// Per compared pair of [`PAIRS`], each repetition's ratio of medians
    /// (variant / baseline) with its bootstrap 95 % interval (empty for a
    /// pair that did not run).
    pub ratios: [Vec<Ratio>; PAIRS.len()],
    /// Gated segments whose gate timed out before the host opened it, by
    /// [`Variant::index`].
    pub timeouts: [usize; VARIANTS],
    /// What the recorded variants recorded.
    pub recorded: Recorded,
    /// What the report should say about how it ran (the gate's fallback,
    /// no CUPTI).
    pub notes: Vec<String>,
}

impl Overhead {
    /// Whether `v` ran (a CUPTI variant only where CUPTI loaded).
    pub fn ran(&self, v: Variant) -> bool {
        !v.needs_cupti() || self.attached
    }
}

/// Runs the comparison on `device`: the fixture, the gate (with
/// `instruments`' spin-gate kernel), the two phases; `progress` is told
/// each tenth batch. `sim`: the simulator runs it, where a gate that cannot
/// be set up falls back to free-running batches (noted).
///
/// # Errors
/// A driver error; a recorded batch that did not record every launch; the
/// gate cannot be set up on a real GPU (use [`Method::FreeRunning`]).
pub fn run(
    device: &Device,
    instruments: Arc<dyn Instruments>,
    sim: bool,
    options: Options,
    progress: &dyn Fn(String),
) -> Result<Overhead> {
    let options = Options {
        batches: options.batches.max(1),
        per_batch: options.per_batch.max(1),
        repeat: options.repeat.max(1),
        ..options
    };
    let mut fixture = Fixture::new(device)?;
    let mut notes = Vec::new();
    let mut gate = match options.method {
        Method::FreeRunning => None,
        Method::Gated => match Gate::new(instruments, &fixture.sa) {
            Ok(g) => Some(g),
            Err(e) if sim => {
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
    let mut timeouts = [0usize; VARIANTS];
    let mut phase = Phase {
        fixture: &mut fixture,
        gate: gate.as_mut(),
        options,
        timeouts: &mut timeouts,
        recorded: &mut recorded,
        progress,
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
    fixture.finish()?;
    drop(gate);
    let mut out = Overhead {
        method,
        options,
        attached: !attached.is_empty(),
        samples: Default::default(),
        ratios: Default::default(),
        timeouts,
        recorded,
        notes,
    };
    for rep in 0..options.repeat {
        let of = |v: Variant| -> &[f64] {
            let phase = if Variant::PLAIN.contains(&v) { &plain } else { &attached };
            phase.get(rep).map_or(&[], |s: &[Vec<f64>; VARIANTS]| &s[v.index()])
        };
        for (i, &(v, base, _)) in PAIRS.iter().enumerate() {
            if out.ran(v) && out.ran(base) {
                out.ratios[i].push(ratio_ci(of(v), of(base), RESAMPLES));
            }
        }
    }
    for s in plain.iter().chain(&attached) {
        for (p, s) in out.samples.iter_mut().zip(s) {
            p.extend_from_slice(s);
        }
    }
    Ok(out)
}

/// One phase of the comparison: its variants interleaved batch by batch,
/// every repetition.
struct Phase<'a> {
    fixture: &'a mut Fixture,
    gate: Option<&'a mut Gate>,
    options: Options,
    timeouts: &'a mut [usize; VARIANTS],
    recorded: &'a mut Recorded,
    progress: &'a dyn Fn(String),
}

impl Phase<'_> {
    /// One untimed round of every variant of `order` (the driver's paths,
    /// gpu-sync's markers, the recorder's event pool and the caches warm
    /// before anything is kept), then the timed batches: per repetition,
    /// each variant's host nanoseconds per submission, one per batch.
    fn run(&mut self, what: &str, order: &[Variant]) -> gpu_sync::Result<Vec<[Vec<f64>; VARIANTS]>> {
        let Options { per_batch, batches, repeat, .. } = self.options;
        let mut warm = [0usize; VARIANTS];
        for &v in order {
            self.fixture.recorded_batch(
                v,
                per_batch.min(variant::segment_cap(v)),
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
                    (self.progress)(format!(
                        "{what}: repetition {} of {repeat}, batch {b} of {batches}",
                        rep + 1
                    ));
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
