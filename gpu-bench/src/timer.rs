//! The timer's state for one caller stream ([`Timer`]): the timing stream,
//! its event pairs, the instruments (clock probe, spin gate) and their
//! buffers, the L2 flush buffer, and what was measured about the device
//! (event resolution and the busy event-pair floor, SM clock). The time
//! sources (`clock/`) and the methods (`method/`) of the engine work on
//! it; [`Timer::gated`] is the one gated batch every gated source uses.

use crate::info::{ClockCheck, Resolution};
use crate::instruments::{Instruments, SpinGate};
use gpu_sync::cuda_sys::CUdevice_attribute as A;
use gpu_sync::cuda_sys::cupti::{ActivityKind, Consumer, KernelDurations, StreamRecords};
use gpu_sync::{DeviceBuffer, Error, Result, Stream, TimingEvent};
use std::sync::Arc;

/// SM cycles one clock probe spins (~1 ms at 2 GHz).
pub(crate) const PROBE_CYCLES: u64 = 2_000_000;
/// Seconds of sampling between clock probes.
pub(crate) const PROBE_EVERY_S: f64 = 0.2;
/// How long a spin gate waits for the host before giving up, ns.
pub const GATE_TIMEOUT_NS: u64 = 2_000_000_000;
/// Warmup is steady when the last this many runs agree…
pub(crate) const WARMUP_WINDOW: usize = 5;
/// …within this relative range ((max − min) / median).
pub(crate) const WARMUP_TOLERANCE: f64 = 0.02;
/// Most samples the pipeline keeps in flight (event pairs in its ring).
pub const PIPELINE_RING: usize = 64;
/// Device time the pipeline queues ahead, about, in seconds (at least two
/// samples are in flight whatever their length).
pub const PIPELINE_AHEAD_S: f64 = 0.02;
/// SM cycles of the untimed spin that primes an empty queue (~50 µs at
/// 2 GHz: longer than the host needs to submit one sample).
pub(crate) const PRIMER_CYCLES: u64 = 100_000;

/// Which CUPTI kernel records kernel mode reads ([`Timer::set_kernel_records`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum KernelRecords {
    /// Concurrent kernel records ([`ActivityKind::Kernel`],
    /// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`): kernels keep their
    /// concurrency, and CUPTI instruments their code to time them, which
    /// can slow a kernel of many short blocks.
    #[default]
    Concurrent,
    /// Serialized kernel records ([`ActivityKind::SerialKernel`],
    /// `CUPTI_ACTIVITY_KIND_KERNEL`): CUPTI serializes every kernel while
    /// kernel mode samples, without that instrumentation: on an H100 and an
    /// H200 a 262,144-block launch ran no slower with them on (CUPTI's
    /// duration within 0.1 % of the events' with CUPTI off; concurrent
    /// records: +8 to +10 %), but small kernels read about 1.7 µs longer
    /// than with the concurrent kind (`docs/results/*/2026-11-27-tenth-session.md`).
    Serialized,
    /// CUPTI's range profiler ([`KernelDurations`]): the counter Nsight
    /// Compute reports as a kernel's duration, `gpu__time_duration.sum`,
    /// one range per kernel. It adds no code to the kernels (the concurrent
    /// records' per-block cost) and serializes each kernel; a sample is the
    /// sum of its run's kernel durations, since the counter has no
    /// timestamps. It sees kernels only: kernel mode fails when a run
    /// enqueues a copy or memset on the timing stream (one run is first
    /// watched through CUPTI's memcpy and memset records, off again before
    /// the profiler starts). Each run is timed after [`PROFILER_IDLE_S`] of
    /// idle GPU (it says why).
    /// [`Bench::run_streams`](crate::Bench::run_streams) makes its own
    /// timers, on concurrent records.
    Profiler,
}

impl KernelRecords {
    /// The CUPTI activity kind kernel mode's consumer asks for; `None` for
    /// [`KernelRecords::Profiler`], which reads no activity records of
    /// kernels.
    pub fn activity_kind(self) -> Option<ActivityKind> {
        match self {
            KernelRecords::Concurrent => Some(ActivityKind::Kernel),
            KernelRecords::Serialized => Some(ActivityKind::SerialKernel),
            KernelRecords::Profiler => None,
        }
    }

    /// The CUPTI source's name.
    pub fn cupti_name(self) -> &'static str {
        match self {
            KernelRecords::Concurrent => "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL",
            KernelRecords::Serialized => "CUPTI_ACTIVITY_KIND_KERNEL",
            KernelRecords::Profiler => "the CUPTI range profiler's gpu__time_duration.sum",
        }
    }

    /// Its name, as the CLI spells it (`concurrent`, `serial`, `profiler`).
    pub fn name(self) -> &'static str {
        match self {
            KernelRecords::Concurrent => "concurrent",
            KernelRecords::Serialized => "serial",
            KernelRecords::Profiler => "profiler",
        }
    }
}

/// Kernels the range profiler has room for between a start and a stop
/// (kernel mode's round is cut to fit).
pub(crate) const PROFILER_MAX_KERNELS: usize = 1024;

/// Idle GPU before each run of kernel mode on the range profiler, seconds:
/// each run is timed after the GPU has had no work for this long. On an
/// H200 an empty kernel launched back to back (or 20–200 µs after the
/// last) runs at one of two levels at random (about 1.25 and 1.56 µs; 1–67 %
/// of launches on the upper one), and after 2 ms of idle on the lower one
/// in 94–100 % of launches, the level Nsight Compute read on every launch
/// (`docs/results/h200/2026-11-28-placement.md`, "The empty kernel's two
/// levels"; how long ncu leaves the GPU idle between the kernels it times
/// was not measured). On an H100 the empty kernel read one level back to
/// back; the wait was not tried there.
pub const PROFILER_IDLE_S: f64 = 0.002;

/// The engine's state for one caller stream: a timing stream, a pair of
/// timing events, the instruments and their buffers, and what was measured
/// about the device (resolution, clock). Several [`Bench`](crate::Bench)es can share one
/// ([`Bench::run_on`](crate::Bench::run_on)) so the checks are made once.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::Timer;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let stream = Stream::new(&Device::get(0)?)?;
/// let mut buf = DeviceBuffer::<u8>::alloc(&stream, 1 << 20)?;
/// let mut timer = Timer::new(&stream, None)?; // no instruments: events only
/// assert_eq!(timer.resolution().pairs, 32); // measured once, at creation
/// let seconds = timer.time(|s| s.fill_bytes(&mut buf, 7))?; // one sample
/// assert!(seconds > 0.0);
/// assert!(!timer.has_instruments() && timer.clock().is_none());
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct Timer {
    pub(crate) caller: Stream,
    pub(crate) stream: Stream,
    start: TimingEvent,
    end: TimingEvent,
    pub(crate) ring: Vec<(TimingEvent, TimingEvent)>,
    pub(crate) instruments: Option<Arc<dyn Instruments>>,
    clock_out: Option<DeviceBuffer<u64>>,
    primer_out: Option<DeviceBuffer<u64>>,
    gate: Option<SpinGate>,
    flush: Option<DeviceBuffer<u8>>,
    pub(crate) probes_mhz: Vec<f64>,
    reported_mhz: f64,
    pub(crate) resolution: Resolution,
    /// The CUPTI consumer of kernel mode and CUPTI's id of the timing
    /// stream, made at the first kernel-mode run.
    pub(crate) kernel_clock: Option<(Consumer, StreamRecords)>,
    /// The range profiler of [`KernelRecords::Profiler`], made with
    /// `kernel_clock`, whose consumer then takes only copies and memsets:
    /// kernel mode's first run is checked with it, then it is dropped
    /// before the profiler starts. Kept, enabled and stopped, from one
    /// kernel-mode measurement to the next (see [`Timer::end_kernel_mode`]).
    pub(crate) kernel_counters: Option<KernelDurations<'static>>,
    /// Seconds to make the range profiler and start it once (its first
    /// start is the dear one), when it was made.
    kernel_setup_s: Option<f64>,
    /// Which kernel records `kernel_clock` asks for.
    kernel_records: KernelRecords,
    /// Rounds of gated samples dropped because the gate timed out.
    pub(crate) dropped_rounds: usize,
    /// The warm-up runs of the last mode sampled, seconds each, in order
    /// (taken by the bench for the record's warm-up curve).
    pub(crate) last_warmup: Vec<f64>,
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
        let (resolution, idle) = measure_resolution(&stream, &start, &end, 32)?;
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
            kernel_counters: None,
            kernel_setup_s: None,
            kernel_records: KernelRecords::default(),
            dropped_rounds: 0,
            last_warmup: Vec::new(),
        };
        t.probe_clock()?;
        if t.instruments.is_some() {
            let (floor, mut busy) = t.busy_floor(32)?;
            t.resolution.busy_floor_s = Some(floor);
            // The tick from every reading of an empty pair, idle and busy.
            busy.extend(idle);
            t.resolution.step_s = Resolution::tick_of(&busy);
        }
        Ok(t)
    }

    /// The event-pair floor on a busy stream: `pairs` empty start/end pairs
    /// queued behind the gate and run back to back; the median and the
    /// readings, seconds. What any gated sample carries on top of its work.
    fn busy_floor(&mut self, pairs: usize) -> Result<(f64, Vec<f64>)> {
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
                return Ok((crate::stats::median(&v), v));
            }
            self.dropped_rounds += 1;
        }
        Err(Error::InvalidArgument(
            "the spin gate timed out three times while measuring the event-pair floor".into(),
        ))
    }

    pub(crate) fn ensure_ring(&mut self) -> Result<()> {
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
        let mut gate = match self.gate.take() {
            Some(g) => g,
            None => SpinGate::new(inst, &self.stream, GATE_TIMEOUT_NS)?,
        };
        let queued = gate.hold(&self.stream).and_then(|()| enqueue(self));
        let opened = gate.open();
        let done = self.stream.synchronize().map(|_| ());
        let read = gate.opened(&self.stream);
        self.gate = Some(gate);
        queued?;
        opened?;
        done?;
        read
    }

    /// Makes kernel mode's CUPTI consumer (kernels of the
    /// [`KernelRecords`] kind set, copies, memsets) and finds the timing
    /// stream's CUPTI id, once; with [`KernelRecords::Profiler`] the
    /// consumer takes copies and memsets only, and the range profiler is
    /// made beside it. The reason as text when CUPTI cannot be used here.
    pub(crate) fn kernel_clock(&mut self) -> std::result::Result<(), String> {
        if self.kernel_clock.is_some() {
            return Ok(());
        }
        let device = self.stream.device().clone();
        // Made into locals and kept only once all of it is made, so a
        // failure leaves no profiler enabled.
        let counters = match self.kernel_records {
            // The profiler first, before this process's activity records
            // are enabled (the profiler records nothing while the memcpy
            // and memset kinds are on).
            KernelRecords::Profiler if self.kernel_counters.is_none() => {
                let began = std::time::Instant::now();
                device.make_current().map_err(|e| e.to_string())?;
                let ordinal = usize::try_from(device.ordinal()).map_err(|e| e.to_string())?;
                let mut counters = KernelDurations::new(device.context(), ordinal, PROFILER_MAX_KERNELS)
                    .map_err(|e| format!("CUPTI's range profiler: {e}"))?;
                self.first_start(&mut counters).map_err(|e| format!("CUPTI's range profiler: {e}"))?;
                self.kernel_setup_s = Some(began.elapsed().as_secs_f64());
                Some(counters)
            }
            _ => None,
        };
        let a = gpu_sync::cuda_sys::cupti::activity().map_err(|e| e.to_string())?;
        let mut kinds = vec![ActivityKind::Memcpy, ActivityKind::Memset];
        kinds.extend(self.kernel_records.activity_kind());
        let c = a.consumer(&kinds).map_err(|e| e.to_string())?;
        let sid = a.stream_records(device.raw_context(), self.stream.as_raw()).map_err(|e| e.to_string())?;
        if counters.is_some() {
            self.kernel_counters = counters;
        }
        self.kernel_clock = Some((c, sid));
        Ok(())
    }

    /// With instruments loaded, starts the new range profiler once around
    /// one short spin and stops it: its first start costs about a second
    /// (0.94–1.26 s on an H200, 0.97–1.20 s on an H100, CUPTI 13.0; later
    /// starts about 1 µs), paid here, once, rather than in a benchmark's
    /// warm-up.
    fn first_start(&mut self, counters: &mut KernelDurations<'static>) -> std::result::Result<(), String> {
        let (Some(inst), Some(out)) = (&self.instruments, self.primer_out.as_mut()) else {
            return Ok(());
        };
        counters.start().map_err(|e| e.to_string())?;
        let ran = inst.clock_probe(&self.stream, 1_000, out).and_then(|()| self.stream.synchronize());
        let current = self.stream.device().make_current().map_err(|e| e.to_string());
        // Stopped whatever the spin did, so the profiler can start again.
        let read = counters.stop().map_err(|e| e.to_string());
        ran.map_err(|e| e.to_string())?;
        current?;
        read.map(drop)
    }

    /// Drops kernel mode's CUPTI consumer: CUPTI records only while kernel
    /// mode samples. The range profiler stays enabled and stopped (it
    /// records nothing) for the next kernel-mode measurement.
    pub(crate) fn drop_kernel_clock(&mut self) {
        self.kernel_clock = None;
    }

    /// Ends kernel mode on this timer: drops its CUPTI consumer and
    /// disables the range profiler that [`KernelRecords::Profiler`] keeps
    /// enabled (stopped) from one kernel-mode measurement to the next.
    /// Making and first starting the profiler costs about a second, so it
    /// is made once per timer; a context has one range profiler at a
    /// time, so call this before anything else in the process uses one
    /// (another timer, `cuda_sys::cupti::KernelDurations`, a profiling
    /// tool). Dropping the timer does the same; the next kernel-mode
    /// measurement makes a new one.
    pub fn end_kernel_mode(&mut self) {
        self.kernel_clock = None;
        self.kernel_counters = None;
    }

    /// Seconds it took to make kernel mode's range profiler and start it
    /// the first time ([`KernelRecords::Profiler`]), once per timer; `None`
    /// before it is made or with other kernel records.
    pub fn kernel_mode_setup_s(&self) -> Option<f64> {
        self.kernel_counters.as_ref().and(self.kernel_setup_s)
    }

    /// Whether kernel mode can run here (CUPTI loads and no other tool owns
    /// the profiling interface); the reason when it cannot. CUPTI records
    /// nothing after this returns: kernel mode enables it while it samples.
    /// With [`KernelRecords::Profiler`] the range profiler made here is
    /// kept, stopped, for kernel mode ([`Timer::end_kernel_mode`]).
    ///
    /// # Errors
    /// The reason, as text.
    pub fn kernel_mode_available(&mut self) -> std::result::Result<(), String> {
        let r = self.kernel_clock();
        self.drop_kernel_clock();
        r
    }

    /// Sets which CUPTI kernel records kernel mode reads (concurrent by
    /// default). A kernel-mode consumer made for the other kind is dropped,
    /// so the next kernel-mode sample asks for the new one.
    pub fn set_kernel_records(&mut self, records: KernelRecords) {
        if records != self.kernel_records {
            self.end_kernel_mode();
        }
        self.kernel_records = records;
    }

    /// Which CUPTI kernel records kernel mode reads.
    pub fn kernel_records(&self) -> KernelRecords {
        self.kernel_records
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
    /// [`Bench`](crate::Bench) use gated rounds instead (see [`crate::bench`]).
    ///
    /// # Errors
    /// A driver error or `f`'s error.
    pub fn time(&mut self, mut f: impl FnMut(&Stream) -> Result<()>) -> Result<f64> {
        self.prime()?;
        self.time_events(&mut f)
    }

    /// Enqueues the untimed primer spin, if instruments are loaded.
    pub(crate) fn prime(&mut self) -> Result<()> {
        if let (Some(inst), Some(out)) = (&self.instruments, self.primer_out.as_mut()) {
            inst.clock_probe(&self.stream, PRIMER_CYCLES, out)?;
        }
        Ok(())
    }

    /// Events around `f` on the timing stream, synchronized: seconds.
    pub(crate) fn time_events(&mut self, f: &mut dyn FnMut(&Stream) -> Result<()>) -> Result<f64> {
        self.start.record(&self.stream)?;
        f(&self.stream)?;
        self.end.record(&self.stream)?;
        self.end.synchronize()?;
        Ok(self.start.elapsed(&self.end)?.as_secs_f64())
    }

    pub(crate) fn flush_l2(&mut self, salt: u8) -> Result<()> {
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
    pub(crate) fn time_batch(
        &mut self,
        runs: usize,
        f: &mut dyn FnMut(&Stream) -> Result<()>,
    ) -> Result<(f64, bool)> {
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

/// `pairs` empty event pairs on the idle stream, each synchronized: the
/// resolution they show and their readings, seconds.
fn measure_resolution(
    s: &Stream,
    a: &TimingEvent,
    b: &TimingEvent,
    pairs: usize,
) -> Result<(Resolution, Vec<f64>)> {
    let mut v = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        a.record(s)?;
        b.record(s)?;
        b.synchronize()?;
        v.push(a.elapsed(b)?.as_secs_f64());
    }
    Ok((Resolution::of_idle_pairs(&v), v))
}
