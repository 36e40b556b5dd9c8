//! The timer: [`Bench`] times a closure that submits work on a
//! [`gpu_sync::Stream`] in several modes side by side, with warmup until
//! steady state, the stopping rule of [`crate::stop`], clock and resolution
//! checks, and returns a typed [`Record`].
//!
//! ```
//! # use gpu_bench::{Bench, Mode, Settings};
//! # use gpu_sync::{Device, DeviceBuffer, Stream};
//! # gpu_sync::sim::install().unwrap();
//! # let device = Device::get(0).unwrap();
//! let stream = Stream::new(&device)?;
//! let mut buf = DeviceBuffer::<u32>::zeroed(&stream, 1 << 20)?;
//! let record = Bench::new("memset 4 MiB")
//!     .bytes(4 << 20)
//!     .modes(&[Mode::FirstCall, Mode::Cold, Mode::Hot, Mode::Graph])
//!     .settings(Settings::quick())
//!     .run(&stream, |s| s.fill_bytes(&mut buf, 7))?;
//! let hot = record.mode(Mode::Hot).unwrap();
//! assert!(hot.median() > 0.0);
//! assert!(record.counter("cache effect").is_some());
//! # Ok::<(), gpu_sync::Error>(())
//! ```
//!
//! # How each mode times
//! - **first call**: the host clock around the first run (or a separate
//!   closure that also loads the module) and a stream synchronization:
//!   events cannot see a module load.
//! - **cold**: before each sample a memset over a scratch buffer of twice
//!   the L2 size (allocated once), outside the events; each run isolated
//!   from the previous one by that flush.
//! - **hot**: events around each run, after warmup, with the queue kept
//!   fed (see *The sample pipeline* below).
//! - **batch**: a spin-gate kernel holds the timing stream while
//!   [`Settings::batch_runs`] runs are queued behind it; the host then opens
//!   the gate and the runs execute back to back: time per run = span / N,
//!   with no host launch gaps. Needs [`Instruments`].
//! - **graph**: one run captured into a CUDA graph once and replayed.
//!
//! # The sample pipeline
//! Hot, cold and graph samples are *enqueued ahead*: each sample is
//! (flush, for cold) start event, the work, end event, on a ring of event
//! pairs; up to [`PIPELINE_RING`] samples or about [`PIPELINE_AHEAD_S`] of
//! device time (at least two samples) are in flight, and the oldest is read
//! back when the ring is full. Synchronizing every sample before
//! enqueuing the next would leave the GPU idle when the start event runs,
//! and time the host's kernel submission (the first H200 run: a 10 µs spin
//! measured 15 µs hot, 11.65 µs batch). Whenever the queue is empty (the
//! first sample, after a clock probe) the instruments' spin is enqueued
//! untimed first, so even that sample's start event waits on the GPU, not
//! the host. Each run is exactly one sample, read in order; the stopping
//! rule is evaluated on completed samples, and the samples still in flight
//! when it is met are read and kept (the sample cap counts them).
//!
//! The timing stream is the engine's own; before each mode it waits for
//! the caller's stream (device-side), so work the caller queued first is
//! never timed, and gpu-sync's tracking orders every buffer the closure
//! touches.

use crate::error::{Error as BenchError, Result as BenchResult};
use crate::info::{ClockCheck, Resolution};
use crate::instruments::{GateFlag, Instruments};
use crate::record::{Counter, Mode, ModeResult, Record, Unit, Warning};
use crate::settings::Settings;
use crate::stats::Summary;
use crate::stop::{self, Rule, StopReason};
use gpu_sync::cuda_sys::CUdevice_attribute as A;
use gpu_sync::cuda_sys::cupti::{ActivityKind, Consumer};
use gpu_sync::{DeviceBuffer, Error, Result, Stream, TimingEvent};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// SM cycles one clock probe spins (~1 ms at 2 GHz).
const PROBE_CYCLES: u64 = 2_000_000;
/// Seconds of sampling between clock probes.
const PROBE_EVERY_S: f64 = 0.2;
/// How long a spin gate waits for the host before giving up, ns.
const GATE_TIMEOUT_NS: u64 = 2_000_000_000;
/// Warmup is steady when the last this many runs agree…
const WARMUP_WINDOW: usize = 5;
/// …within this relative range ((max − min) / median).
const WARMUP_TOLERANCE: f64 = 0.02;
/// Most samples the pipeline keeps in flight (event pairs in its ring).
pub const PIPELINE_RING: usize = 64;
/// Device time the pipeline queues ahead, about, in seconds (at least two
/// samples are in flight whatever their length).
pub const PIPELINE_AHEAD_S: f64 = 0.02;
/// SM cycles of the untimed spin that primes an empty queue (~50 µs at
/// 2 GHz: longer than the host needs to submit one sample).
const PRIMER_CYCLES: u64 = 100_000;

/// The engine's state for one caller stream: a timing stream, a pair of
/// timing events, the instruments and their buffers, and what was measured
/// about the device (resolution, clock). Several [`Bench`]es can share one
/// ([`Bench::run_on`]) so the checks are made once.
pub struct Timer {
    caller: Stream,
    stream: Stream,
    start: TimingEvent,
    end: TimingEvent,
    ring: Vec<(TimingEvent, TimingEvent)>,
    instruments: Option<Arc<dyn Instruments>>,
    clock_out: Option<DeviceBuffer<u64>>,
    primer_out: Option<DeviceBuffer<u64>>,
    gate: Option<(GateFlag, DeviceBuffer<u64>)>,
    flush: Option<DeviceBuffer<u8>>,
    probes_mhz: Vec<f64>,
    reported_mhz: f64,
    resolution: Resolution,
    /// The CUPTI consumer of kernel mode and CUPTI's id of the timing
    /// stream, made at the first kernel-mode run.
    kernel_clock: Option<(Consumer, u32)>,
    /// Rounds of gated samples dropped because the gate timed out.
    dropped_rounds: usize,
}

impl Timer {
    /// A timer whose stream waits for `caller`; measures the event
    /// resolution (32 empty event pairs) and, with `instruments`, loads
    /// their buffers and takes a first clock probe.
    ///
    /// # Errors
    /// A driver error.
    pub fn new(caller: &Stream, instruments: Option<Arc<dyn Instruments>>) -> Result<Timer> {
        let device = caller.device();
        let stream = Stream::new(device)?;
        let (start, end) = (TimingEvent::new(device)?, TimingEvent::new(device)?);
        let resolution = measure_resolution(&stream, &start, &end, 32)?;
        let (clock_out, primer_out) = match &instruments {
            Some(_) => (
                Some(DeviceBuffer::<u64>::zeroed(&stream, 2)?),
                Some(DeviceBuffer::<u64>::zeroed(&stream, 2)?),
            ),
            None => (None, None),
        };
        let reported_mhz = f64::from(device.attribute(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?) / 1e3;
        let mut t = Timer {
            caller: caller.clone(),
            stream,
            start,
            end,
            ring: Vec::new(),
            instruments,
            clock_out,
            primer_out,
            gate: None,
            flush: None,
            probes_mhz: Vec::new(),
            reported_mhz,
            resolution,
            kernel_clock: None,
            dropped_rounds: 0,
        };
        t.probe_clock()?;
        if t.instruments.is_some() {
            t.resolution.busy_floor_s = Some(t.busy_floor(32)?);
        }
        Ok(t)
    }

    /// The event-pair floor on a busy stream: `pairs` empty start/end pairs
    /// queued behind the gate and run back to back; the median, seconds.
    /// What any gated sample carries on top of its work.
    fn busy_floor(&mut self, pairs: usize) -> Result<f64> {
        self.ensure_ring()?;
        let n = pairs.clamp(2, PIPELINE_RING);
        for _ in 0..3 {
            let opened = self.gated(&mut |t| {
                for (a, b) in t.ring.iter().take(n) {
                    a.record(&t.stream)?;
                    b.record(&t.stream)?;
                }
                Ok(())
            })?;
            let mut v = Vec::with_capacity(n);
            for (a, b) in self.ring.iter().take(n) {
                b.synchronize()?;
                v.push(a.elapsed(b)?.as_secs_f64());
            }
            if opened {
                return Ok(crate::stats::median(&v));
            }
            self.dropped_rounds += 1;
        }
        Err(Error::InvalidArgument(
            "the spin gate timed out three times while measuring the event-pair floor".into(),
        ))
    }

    fn ensure_ring(&mut self) -> Result<()> {
        if self.ring.len() < PIPELINE_RING {
            let d = self.stream.device().clone();
            while self.ring.len() < PIPELINE_RING {
                self.ring.push((TimingEvent::new(&d)?, TimingEvent::new(&d)?));
            }
        }
        Ok(())
    }

    /// The gated batch, written once: closes the gate, queues the spin gate
    /// kernel on the timing stream, lets `enqueue` queue work behind it,
    /// opens the gate (whatever `enqueue` returned, so the stream drains)
    /// and synchronizes the stream. Returns whether the host opened the gate
    /// before the kernel's timeout (otherwise part of the work ran with host
    /// gaps between its pieces). Needs instruments.
    ///
    /// # Errors
    /// A driver error, or `enqueue`'s.
    pub fn gated(&mut self, enqueue: &mut dyn FnMut(&mut Timer) -> Result<()>) -> Result<bool> {
        let Some(inst) = self.instruments.clone() else {
            return Err(Error::InvalidArgument(
                "the spin gate needs instruments (gpu_bench::instruments)".into(),
            ));
        };
        let (mut flag, mut out) = match self.gate.take() {
            Some(g) => g,
            None => (GateFlag::new(self.stream.device())?, DeviceBuffer::<u64>::zeroed(&self.stream, 1)?),
        };
        let queued = flag
            .close()
            .and_then(|()| inst.gate(&self.stream, &flag, GATE_TIMEOUT_NS, &mut out))
            .and_then(|()| enqueue(self));
        let opened = flag.open();
        let done = self.stream.synchronize().map(|_| ());
        let read = self.stream.to_vec(&out);
        self.gate = Some((flag, out));
        queued?;
        opened?;
        done?;
        Ok(read?.first().copied() == Some(1))
    }

    /// Makes kernel mode's CUPTI consumer (kernels, copies, memsets) and
    /// finds the timing stream's CUPTI id, once; the reason as text when
    /// CUPTI cannot be used here.
    fn kernel_clock(&mut self) -> std::result::Result<(), String> {
        if self.kernel_clock.is_some() {
            return Ok(());
        }
        let a = gpu_sync::cuda_sys::cupti::activity().map_err(|e| e.to_string())?;
        let c = a
            .consumer(&[ActivityKind::Kernel, ActivityKind::Memcpy, ActivityKind::Memset])
            .map_err(|e| e.to_string())?;
        let sid = a
            .stream_id(self.stream.device().raw_context(), self.stream.as_raw())
            .map_err(|e| e.to_string())?;
        self.kernel_clock = Some((c, sid));
        Ok(())
    }

    /// Whether kernel mode can run here (CUPTI loads and no other tool owns
    /// the profiling interface); the reason when it cannot. CUPTI records
    /// nothing after this returns: kernel mode enables it while it samples.
    ///
    /// # Errors
    /// The reason, as text.
    pub fn kernel_mode_available(&mut self) -> std::result::Result<(), String> {
        let r = self.kernel_clock();
        self.kernel_clock = None;
        r
    }

    /// Rounds of gated samples dropped so far because the gate timed out
    /// before the host had queued them (their samples are not kept).
    pub fn dropped_rounds(&self) -> usize {
        self.dropped_rounds
    }

    /// The timing stream (the one closures are given).
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The event timer's resolution measured at creation.
    pub fn resolution(&self) -> &Resolution {
        &self.resolution
    }

    /// The SM clock probes so far, if instruments are loaded.
    pub fn clock(&self) -> Option<ClockCheck> {
        ClockCheck::of(self.probes_mhz.clone(), self.reported_mhz)
    }

    /// Whether batch mode and clock checks are available.
    pub fn has_instruments(&self) -> bool {
        self.instruments.is_some()
    }

    /// One clock probe (`clock64` over `%globaltimer`), MHz; `None` without
    /// instruments or when the probe reports no elapsed time.
    ///
    /// # Errors
    /// A driver error.
    pub fn probe_clock(&mut self) -> Result<Option<f64>> {
        let (Some(inst), Some(out)) = (&self.instruments, self.clock_out.as_mut()) else {
            return Ok(None);
        };
        inst.clock_probe(&self.stream, PROBE_CYCLES, out)?;
        let v = self.stream.to_vec(&*out)?;
        let mhz = match v.as_slice() {
            [cycles, ns] if *ns > 0 => *cycles as f64 / *ns as f64 * 1e3,
            _ => return Ok(None),
        };
        self.probes_mhz.push(mhz);
        Ok(Some(mhz))
    }

    /// One sample on its own: the untimed primer spin (with instruments),
    /// then timing events around `f` on the timing stream, then an event
    /// synchronization; seconds. The primer keeps the GPU busy while the
    /// host submits `f`, so the host's submission is not timed. For callers
    /// building their own loops ([`crate::compare::paired`]); the modes of
    /// [`Bench`] use the pipeline instead (see the module docs).
    ///
    /// # Errors
    /// A driver error or `f`'s error.
    pub fn time(&mut self, mut f: impl FnMut(&Stream) -> Result<()>) -> Result<f64> {
        self.prime()?;
        self.time_events(&mut f)
    }

    /// Enqueues the untimed primer spin, if instruments are loaded.
    fn prime(&mut self) -> Result<()> {
        if let (Some(inst), Some(out)) = (&self.instruments, self.primer_out.as_mut()) {
            inst.clock_probe(&self.stream, PRIMER_CYCLES, out)?;
        }
        Ok(())
    }

    /// Events around `f` on the timing stream, synchronized: seconds.
    fn time_events(&mut self, f: &mut dyn FnMut(&Stream) -> Result<()>) -> Result<f64> {
        self.start.record(&self.stream)?;
        f(&self.stream)?;
        self.end.record(&self.stream)?;
        self.end.synchronize()?;
        Ok(self.start.elapsed(&self.end)?.as_secs_f64())
    }

    fn flush_l2(&mut self, salt: u8) -> Result<()> {
        if self.flush.is_none() {
            let l2 =
                self.stream.device().attribute(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?.max(1 << 20) as usize;
            self.flush = Some(DeviceBuffer::<u8>::alloc(&self.stream, 2 * l2)?);
        }
        if let Some(buf) = self.flush.as_mut() {
            self.stream.fill_bytes(buf, salt)?;
        }
        Ok(())
    }

    /// `runs` runs behind the spin gate: (seconds per run, whether the host
    /// opened the gate before its timeout).
    fn time_batch(&mut self, runs: usize, f: &mut dyn FnMut(&Stream) -> Result<()>) -> Result<(f64, bool)> {
        let opened = self.gated(&mut |t| {
            t.start.record(&t.stream)?;
            for _ in 0..runs {
                f(&t.stream)?;
            }
            t.end.record(&t.stream)
        })?;
        Ok((self.start.elapsed(&self.end)?.as_secs_f64() / runs.max(1) as f64, opened))
    }
}

fn measure_resolution(s: &Stream, a: &TimingEvent, b: &TimingEvent, pairs: usize) -> Result<Resolution> {
    let mut v = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        a.record(s)?;
        b.record(s)?;
        b.synchronize()?;
        v.push(a.elapsed(b)?.as_secs_f64());
    }
    let floor = Summary::of(&v).map_or(0.0, |s| s.median);
    let step = v
        .iter()
        .copied()
        .filter(|&x| x > 0.0)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))));
    Ok(Resolution { floor_s: floor, step_s: step, pairs, busy_floor_s: None })
}

/// What one pipelined sample enqueues between its events.
enum Work<'f> {
    /// The caller's closure, on the timing stream.
    Run(&'f mut dyn FnMut(&Stream) -> Result<()>),
    /// An L2 flush (outside the events), then the caller's closure.
    Cold(&'f mut dyn FnMut(&Stream) -> Result<()>, u8),
}

/// Samples enqueued ahead on the timer's ring of event pairs (see the
/// module docs): `next` returns the oldest completed sample, keeping up to
/// `depth` in flight; `drain` reads the rest.
struct Pipeline<'f> {
    work: Work<'f>,
    /// Ring slots in flight, oldest first.
    in_flight: std::collections::VecDeque<usize>,
    next_slot: usize,
    depth: usize,
    /// Runs it may still enqueue (the sample cap).
    left: usize,
    /// Runs enqueued so far.
    runs: usize,
    /// Whether the GPU may have gone idle since the last enqueue (the next
    /// sample is then primed).
    idle: bool,
    /// Samples of the last gated round not yet handed out, oldest first.
    ready: VecDeque<f64>,
    /// Whether samples are still taken in gated rounds (cleared when a
    /// round's gate times out: work that blocks the host, such as a
    /// pageable copy, cannot be queued behind a closed gate).
    gated: bool,
}

impl<'f> Pipeline<'f> {
    fn new(work: Work<'f>) -> Pipeline<'f> {
        Pipeline {
            work,
            in_flight: Default::default(),
            next_slot: 0,
            depth: 2,
            left: 0,
            runs: 0,
            idle: true,
            ready: VecDeque::new(),
            gated: true,
        }
    }

    /// Sizes the queue for samples of about `estimate_s`: [`PIPELINE_AHEAD_S`]
    /// of work, at least 2 and at most [`PIPELINE_RING`] samples.
    fn size_for(&mut self, estimate_s: f64) {
        let n = if estimate_s > 0.0 { (PIPELINE_AHEAD_S / estimate_s).ceil() } else { PIPELINE_RING as f64 };
        self.depth = (n.min(PIPELINE_RING as f64) as usize).max(2);
    }

    fn enqueue(&mut self, t: &mut Timer, gated: bool) -> Result<()> {
        t.ensure_ring()?;
        if !gated && (self.idle || self.in_flight.is_empty()) {
            t.prime()?;
            self.idle = false;
        }
        let slot = self.next_slot;
        if let Work::Cold(_, salt) = &mut self.work {
            *salt = salt.wrapping_add(1);
            let s = *salt;
            t.flush_l2(s)?;
        }
        let Some((a, b)) = t.ring.get(slot) else {
            return Err(Error::InvalidArgument("sample ring slot out of range".into()));
        };
        a.record(&t.stream)?;
        match &mut self.work {
            Work::Run(f) | Work::Cold(f, _) => f(&t.stream)?,
        }
        b.record(&t.stream)?;
        self.in_flight.push_back(slot);
        self.next_slot = (slot + 1) % PIPELINE_RING;
        self.left = self.left.saturating_sub(1);
        self.runs += 1;
        Ok(())
    }

    /// Waits for the oldest sample in flight and reads it: seconds.
    fn read_oldest(&mut self, t: &Timer) -> Result<f64> {
        let slot = self.in_flight.pop_front();
        let Some((a, b)) = slot.and_then(|s| t.ring.get(s)) else {
            return Err(Error::InvalidArgument("no sample in flight".into()));
        };
        b.synchronize()?;
        Ok(a.elapsed(b)?.as_secs_f64())
    }

    /// The next sample. With instruments, samples come in gated rounds:
    /// up to `depth` samples (within the cap) are queued behind the closed
    /// spin gate, then the gate opens and the GPU runs start event → work →
    /// end event of every sample back to back, with no host gap inside any
    /// timed region. A round whose gate timed out before the host had queued
    /// it is dropped (counted in [`Timer::dropped_rounds`]) and run again.
    /// Without instruments, samples are enqueued ahead on the ring, the
    /// queue primed by a spin whenever it ran empty.
    fn next(&mut self, t: &mut Timer) -> Result<f64> {
        if self.ready.is_empty() && (t.instruments.is_none() || !self.gated) {
            while self.in_flight.len() < self.depth && self.left > 0 {
                self.enqueue(t, false)?;
            }
            return self.read_oldest(t);
        }
        while self.ready.is_empty() {
            let n = self.depth.min(self.left.max(1)).min(PIPELINE_RING);
            let opened = t.gated(&mut |t| {
                for _ in 0..n {
                    self.enqueue(t, true)?;
                }
                Ok(())
            })?;
            let mut round = Vec::with_capacity(n);
            while !self.in_flight.is_empty() {
                round.push(self.read_oldest(t)?);
            }
            if opened {
                self.ready.extend(round);
            } else {
                // The host could not queue the round before the gate's
                // timeout (work that blocks the host): the round's samples
                // are dropped, and the mode goes on ungated.
                t.dropped_rounds += 1;
                self.gated = false;
                // The dropped runs do not count against the cap.
                self.left += round.len();
                self.runs = self.runs.saturating_sub(round.len());
                return self.next(t);
            }
        }
        self.ready.pop_front().ok_or_else(|| Error::InvalidArgument("no sample ready".into()))
    }

    /// Reads every sample still in flight, in order.
    fn drain(&mut self, t: &Timer) -> Result<Vec<f64>> {
        let mut v: Vec<f64> = self.ready.drain(..).collect();
        while !self.in_flight.is_empty() {
            v.push(self.read_oldest(t)?);
        }
        Ok(v)
    }
}

/// Kernel mode's runs: the closure run plainly on the timing stream, in
/// rounds; after each round the CUPTI records of the timing stream are
/// taken and split into runs (each run must enqueue the same number of
/// device operations). A sample is the span from a run's first start to
/// its last end; the sum of its operations' durations is kept beside it.
struct KernelRuns<'f> {
    f: &'f mut dyn FnMut(&Stream) -> Result<()>,
    /// (span, sum) of runs measured and not yet handed out, seconds.
    ready: VecDeque<(f64, f64)>,
    /// The sums of the runs handed out since the last [`Source::clear_side`].
    sums: &'f mut Vec<f64>,
    /// Device operations per run, learnt from the first round.
    per_run: Option<usize>,
    depth: usize,
    left: usize,
}

impl KernelRuns<'_> {
    fn next(&mut self, t: &mut Timer) -> BenchResult<f64> {
        while self.ready.is_empty() {
            let n = self.depth.min(self.left.max(1));
            let Some((consumer, sid)) = t.kernel_clock.as_ref() else {
                return Err(BenchError::Kernel("no CUPTI consumer".into()));
            };
            let sid = *sid;
            // Records of earlier work on the stream (clock probes) are not
            // this round's.
            consumer.take().map_err(|e| BenchError::Kernel(e.to_string()))?;
            for _ in 0..n {
                (self.f)(&t.stream)?;
            }
            t.stream.synchronize()?;
            let Some((consumer, _)) = t.kernel_clock.as_ref() else {
                return Err(BenchError::Kernel("no CUPTI consumer".into()));
            };
            let mut recs: Vec<_> = consumer
                .take()
                .map_err(|e| BenchError::Kernel(e.to_string()))?
                .into_iter()
                .filter(|r| r.stream_id == sid)
                .collect();
            recs.sort_by_key(|r| r.start_ns);
            if recs.is_empty() {
                return Err(BenchError::Kernel(
                    "CUPTI recorded no kernel, copy or memset for the runs on the timing stream \
                     (does the closure enqueue its work on the stream it is given?)"
                        .into(),
                ));
            }
            let k = *self.per_run.get_or_insert(recs.len() / n);
            if k == 0 || recs.len() != k * n {
                return Err(BenchError::Kernel(format!(
                    "{} device operations recorded for {n} runs: each run must enqueue the same number \
                     ({k} in the first round)",
                    recs.len()
                )));
            }
            for run in recs.chunks(k) {
                let start = run.iter().map(|r| r.start_ns).min().unwrap_or(0);
                let end = run.iter().map(|r| r.end_ns).max().unwrap_or(0);
                let sum: u64 = run.iter().map(|r| r.duration_ns()).sum();
                self.ready.push_back((end.saturating_sub(start) as f64 * 1e-9, sum as f64 * 1e-9));
            }
            self.left = self.left.saturating_sub(n);
        }
        let (span, sum) = self.ready.pop_front().unwrap_or((0.0, 0.0));
        self.sums.push(sum);
        Ok(span)
    }
}

/// Where a mode's samples come from.
enum Source<'f> {
    /// Event-timed samples, gated rounds or enqueued ahead (hot, cold, graph).
    Pipe(Pipeline<'f>),
    /// One synchronized sample at a time (batch: each sample holds its own
    /// runs behind the spin gate).
    Each(&'f mut dyn FnMut(&mut Timer) -> Result<f64>),
    /// CUPTI's records of each run (kernel).
    Kernel(KernelRuns<'f>),
}

impl Source<'_> {
    fn next(&mut self, t: &mut Timer) -> BenchResult<f64> {
        match self {
            Source::Pipe(p) => Ok(p.next(t)?),
            Source::Each(f) => Ok(f(t)?),
            Source::Kernel(k) => k.next(t),
        }
    }

    fn size_for(&mut self, estimate_s: f64) {
        match self {
            Source::Pipe(p) => p.size_for(estimate_s),
            Source::Kernel(k) => {
                let n = if estimate_s > 0.0 { (PIPELINE_AHEAD_S / estimate_s).ceil() } else { 256.0 };
                k.depth = (n.min(256.0) as usize).max(1);
            }
            Source::Each(_) => {}
        }
    }

    /// The GPU went idle (a synchronizing clock probe): prime the next sample.
    fn set_idle(&mut self) {
        if let Source::Pipe(p) = self {
            p.idle = true;
        }
    }

    /// Runs it may still start (the sample cap).
    fn set_left(&mut self, n: usize) {
        match self {
            Source::Pipe(p) => p.left = n,
            Source::Kernel(k) => k.left = n,
            Source::Each(_) => {}
        }
    }

    /// Every run already measured and not handed out, in order.
    fn drain(&mut self, t: &Timer) -> BenchResult<Vec<f64>> {
        match self {
            Source::Pipe(p) => Ok(p.drain(t)?),
            Source::Kernel(k) => Ok(k
                .ready
                .drain(..)
                .map(|(span, sum)| {
                    k.sums.push(sum);
                    span
                })
                .collect()),
            Source::Each(_) => Ok(Vec::new()),
        }
    }

    /// Forgets what was kept beside the samples (kernel mode's sums) so far.
    fn clear_side(&mut self) {
        if let Source::Kernel(k) = self {
            k.sums.clear();
        }
    }
}

/// A first-call closure: what the very first run costs (for example, load
/// the module and launch once).
pub type FirstCall<'a> = dyn FnMut(&Stream) -> Result<()> + 'a;

/// A benchmark: a name, parameters, declared bytes and FLOPs per run, the
/// modes to time and the sampling settings. See the module docs.
#[derive(Clone)]
pub struct Bench {
    name: String,
    params: Vec<(String, String)>,
    bytes: Option<u64>,
    flops: Option<u64>,
    settings: Settings,
    modes: Vec<Mode>,
    instruments: Option<Arc<dyn Instruments>>,
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
        mut first: Option<&mut FirstCall<'_>>,
        mut f: impl FnMut(&Stream) -> Result<()>,
    ) -> BenchResult<Record> {
        let mut rec = Record::new(
            self.name.clone(),
            &self.params.iter().map(|(k, v)| (k.as_str(), v.clone())).collect::<Vec<_>>(),
        );
        rec.bytes_per_run = self.bytes;
        rec.flops_per_run = self.flops;
        let s = &self.settings;
        for &mode in &self.modes {
            timer.stream.wait_stream(&timer.caller)?;
            let result = match mode {
                Mode::FirstCall => {
                    let t0 = Instant::now();
                    match first.as_mut() {
                        Some(g) => g(&timer.stream)?,
                        None => f(&timer.stream)?,
                    }
                    timer.stream.synchronize()?;
                    let t = t0.elapsed().as_secs_f64();
                    let mut r = self.finish(mode, vec![t], 1, None, Vec::new(), (0, true), 0);
                    r.sampling_s = t;
                    Some(r)
                }
                Mode::Hot => {
                    Some(self.sample(timer, mode, 1, Source::Pipe(Pipeline::new(Work::Run(&mut f))))?)
                }
                Mode::Cold => {
                    Some(self.sample(timer, mode, 1, Source::Pipe(Pipeline::new(Work::Cold(&mut f, 0))))?)
                }
                Mode::Batch if timer.instruments.is_none() => {
                    self.unavailable(
                        &mut rec,
                        mode,
                        "no instruments loaded (the spin gate): Bench::instruments(gpu_bench::instruments::load(..))"
                            .into(),
                    )?;
                    None
                }
                Mode::Kernel => match timer.kernel_clock() {
                    Ok(()) => {
                        let mut sums = Vec::new();
                        let runs = KernelRuns {
                            f: &mut f,
                            ready: VecDeque::new(),
                            sums: &mut sums,
                            per_run: None,
                            depth: 1,
                            left: 0,
                        };
                        let r = self.sample(timer, mode, 1, Source::Kernel(runs));
                        // CUPTI records only while kernel mode samples: the
                        // other modes run without it.
                        timer.kernel_clock = None;
                        let mut r = r?;
                        if !sums.is_empty() {
                            r.counters.push(Counter::new(
                                "device-op sum",
                                crate::stats::median(&sums),
                                Unit::Seconds,
                            ));
                        }
                        Some(r)
                    }
                    Err(why) => {
                        self.unavailable(&mut rec, mode, why)?;
                        None
                    }
                },
                Mode::Batch => {
                    // Samples of about PIPELINE_AHEAD_S of work: a 10 ms
                    // kernel is not batched 64 times per sample.
                    let est = timer.time(&mut f)?;
                    let fit = if est > 0.0 { (PIPELINE_AHEAD_S / est).ceil() as usize } else { usize::MAX };
                    let n = s.batch_runs.max(1).min(fit.max(1));
                    let mut timeouts = 0usize;
                    let mut one = |t: &mut Timer| {
                        let (per_run, opened) = t.time_batch(n, &mut f)?;
                        timeouts += usize::from(!opened);
                        Ok(per_run)
                    };
                    let r = self.sample(timer, mode, n, Source::Each(&mut one))?;
                    if timeouts > 0 {
                        rec.warnings.push(Warning {
                            rule: Rule::Gate,
                            mode: Some(mode),
                            message: format!(
                                "the spin gate timed out in {timeouts} samples before {n} runs were queued: \
                                 those include host launch gaps"
                            ),
                        });
                    }
                    Some(r)
                }
                Mode::Graph => match timer.stream.capture(|c| f(c.stream())).and_then(|g| g.instantiate()) {
                    Ok(exec) => {
                        let mut replay = |s: &Stream| exec.launch(s);
                        Some(self.sample(
                            timer,
                            mode,
                            1,
                            Source::Pipe(Pipeline::new(Work::Run(&mut replay))),
                        )?)
                    }
                    Err(e) => {
                        self.unavailable(
                            &mut rec,
                            mode,
                            format!("the work could not be captured into a graph: {e}"),
                        )?;
                        None
                    }
                },
            };
            if let Some(r) = result {
                self.warn(&mut rec, &r, timer);
                rec.modes.push(r);
            }
        }
        timer.caller.wait_stream(&timer.stream)?;
        derive(&mut rec);
        Ok(rec)
    }

    /// A requested mode that cannot run: an error, or with
    /// [`Bench::best_effort`] a warning in the record.
    fn unavailable(&self, rec: &mut Record, mode: Mode, why: String) -> BenchResult<()> {
        if !self.best_effort {
            return Err(BenchError::Unavailable { mode, why });
        }
        rec.warnings.push(Warning { rule: Rule::Unavailable, mode: Some(mode), message: why });
        Ok(())
    }

    /// Warmup until steady, then the one sampling loop, with clock probes.
    fn sample(
        &self,
        timer: &mut Timer,
        mode: Mode,
        runs_per_sample: usize,
        mut src: Source<'_>,
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
    fn finish(
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
                        "the halves' medians differ by {:.2}% (more than {:.2}%)",
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

/// Differences between modes, with their meaning. A difference that
/// cannot be negative (launch overhead, cache effect, first-call cost) but
/// is, by more than three standard errors of the two medians, is not
/// printed as a number: its value is NaN (rendered "—") and a
/// [`Rule::Consistency`] warning says why.
fn derive(rec: &mut Record) {
    let med = |m: Mode| rec.mode(m).map(|r| (r.median(), r.summary.median_noise() * r.median()));
    let pairs = [
        ("launch overhead", Mode::Hot, Mode::Batch, true),
        ("cache effect", Mode::Cold, Mode::Hot, true),
        ("first-call cost", Mode::FirstCall, Mode::Hot, true),
        ("graph saving", Mode::Hot, Mode::Graph, false),
    ];
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
