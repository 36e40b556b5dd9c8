//! [`Profiler`]: turns gpu-sync's recording on for a device, drives it by
//! a [`Schedule`] and hands each finished cycle's [`Trace`] to a callback —
//! `torch.profiler.profile(schedule=…, on_trace_ready=…)` with `step()`.

use super::adapt;
use super::cupti::CuptiSide;
use super::schedule::{Action, Schedule};
use super::trace::{Source, Trace};
use crate::error::{Error, Result};
use gpu_sync::Device;
use gpu_sync::trace::{RecordOptions, Recorder, Timing};

/// Where device spans come from.
///
/// [`Profiler`](crate::profile::Profiler)'s example uses one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A pair of timing events around each operation (everywhere, the
    /// simulator included).
    Events,
    /// CUPTI's activity records (the GPU's own timestamps; kernels inside
    /// replayed graphs); an error where libcupti does not load.
    Cupti,
    /// CUPTI where it loads and subscribes, else events (the reason is kept
    /// in the trace's notes).
    Auto,
}

/// The callback a finished cycle's trace is handed to.
type OnTraceReady<'cb> = Box<dyn FnMut(&Trace) + 'cb>;

/// One recording stretch: from a cycle's first recorded step to its save.
struct Run {
    recorder: Recorder,
    cupti: Option<CuptiSide>,
    /// The first step the run's trace covers.
    first_step: u64,
    /// When the covered stretch began (host clock).
    since_ns: u64,
}

/// The profiler (see the module docs). Build it, [`Profiler::start`] it,
/// call [`Profiler::step`] at the end of each step of the program, and
/// [`Profiler::finish`] it.
///
/// ```
/// # gpu_sync::sim::install().unwrap();
/// use gpu_bench::profile::{Backend, Profiler, Schedule};
/// use gpu_sync::{Device, DeviceBuffer, Stream, trace};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let mut buf = DeviceBuffer::<u32>::zeroed(&stream, 1024)?;
/// let mut traces = Vec::new();
/// let mut p = Profiler::new(&device)
///     .backend(Backend::Events)
///     .schedule(Schedule::new(1, 1, 2, 1))
///     .on_trace_ready(|t| traces.push(t.key_averages().markdown()));
/// p.start()?;
/// for _ in 0..6 {
///     trace::scope("step", || stream.fill_u32(&mut buf, 7))?;
///     p.step()?;
/// }
/// p.finish()?;
/// drop(p);
/// assert_eq!(traces.len(), 1);
/// assert!(traces[0].contains("memset"));
/// # Ok::<(), gpu_bench::Error>(())
/// ```
pub struct Profiler<'cb> {
    device: Device,
    backend: Backend,
    streams: Option<Vec<u64>>,
    schedule: Option<Schedule>,
    on_ready: Option<OnTraceReady<'cb>>,
    source: Option<Source>,
    run: Option<Run>,
    step: u64,
    notes: Vec<String>,
    started: bool,
}

impl std::fmt::Debug for Profiler<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("device", &self.device.ordinal())
            .field("backend", &self.backend)
            .field("schedule", &self.schedule)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

impl<'cb> Profiler<'cb> {
    /// A profiler of `device`: [`Backend::Auto`], every stream, no schedule
    /// (recording from [`Profiler::start`] to [`Profiler::finish`]).
    pub fn new(device: &Device) -> Profiler<'cb> {
        Profiler {
            device: device.clone(),
            backend: Backend::Auto,
            streams: None,
            schedule: None,
            on_ready: None,
            source: None,
            run: None,
            step: 0,
            notes: Vec::new(),
            started: false,
        }
    }

    /// Chooses the backend.
    pub fn backend(mut self, backend: Backend) -> Profiler<'cb> {
        self.backend = backend;
        self
    }

    /// Records only these streams (by `Stream::id`).
    pub fn streams(mut self, ids: impl IntoIterator<Item = u64>) -> Profiler<'cb> {
        self.streams = Some(ids.into_iter().collect());
        self
    }

    /// Drives recording by `schedule` (see [`Schedule`]).
    pub fn schedule(mut self, schedule: Schedule) -> Profiler<'cb> {
        self.schedule = Some(schedule);
        self
    }

    /// Called with each finished cycle's trace, at the end of its last
    /// active step.
    pub fn on_trace_ready(mut self, f: impl FnMut(&Trace) + 'cb) -> Profiler<'cb> {
        self.on_ready = Some(Box::new(f));
        self
    }

    /// The backend in use once started (`None` before).
    pub fn source(&self) -> Option<Source> {
        self.source
    }

    /// The current step.
    pub fn current_step(&self) -> u64 {
        self.step
    }

    fn action(&self, step: u64) -> Action {
        match &self.schedule {
            Some(s) => s.action(step),
            None => Action::Record,
        }
    }

    /// Chooses the backend ([`Backend::Auto`] tries CUPTI) and starts
    /// recording if step 0 records.
    ///
    /// # Errors
    /// [`Error::Settings`] for a schedule without active steps or a second
    /// start; [`Backend::Cupti`] without a usable CUPTI:
    /// `gpu_sync::Error::Cupti` naming the cause; a second recorder of the
    /// device (`gpu_sync::Error::AlreadyRecording`); a driver error.
    pub fn start(&mut self) -> Result<()> {
        if self.started {
            return Err(Error::Settings("profiler: started twice".into()));
        }
        if let Some(s) = &self.schedule {
            s.validate().map_err(Error::Settings)?;
        }
        self.source = Some(match self.backend {
            Backend::Events => Source::Events,
            Backend::Cupti => {
                gpu_sync::cuda_sys::cupti::activity().map_err(|e| Error::Gpu(gpu_sync::Error::Cupti(e)))?;
                Source::Cupti
            }
            Backend::Auto => match gpu_sync::cuda_sys::cupti::activity() {
                Ok(_) => Source::Cupti,
                Err(e) => {
                    self.notes.push(format!("CUPTI backend unavailable ({e}); device spans from events"));
                    Source::Events
                }
            },
        });
        self.started = true;
        let a = self.action(0);
        if a.records() {
            self.begin()?;
        }
        Ok(())
    }

    fn options(&self, timing: Timing) -> RecordOptions {
        let mut o = RecordOptions::new(timing);
        o.streams.clone_from(&self.streams);
        o
    }

    /// Starts a run: the CUPTI consumer first (so no record of the first
    /// operation is missed), then the recorder.
    fn begin(&mut self) -> Result<()> {
        let mut cupti = None;
        if self.source == Some(Source::Cupti) {
            let started = gpu_sync::cuda_sys::cupti::activity().and_then(CuptiSide::start);
            match (started, self.backend) {
                (Ok(c), _) => cupti = Some(c),
                (Err(e), Backend::Auto) => {
                    self.notes.push(format!("CUPTI backend unavailable ({e}); device spans from events"));
                    self.source = Some(Source::Events);
                }
                (Err(e), _) => return Err(Error::Gpu(gpu_sync::Error::Cupti(e))),
            }
        }
        let timing = if cupti.is_some() { Timing::Cupti } else { Timing::Events };
        let recorder = match self.device.record(self.options(timing)) {
            Ok(r) => r,
            Err(gpu_sync::Error::Cupti(e)) if self.backend == Backend::Auto => {
                self.notes.push(format!("CUPTI recording unavailable ({e}); device spans from events"));
                self.source = Some(Source::Events);
                cupti = None;
                self.device.record(self.options(Timing::Events))?
            }
            Err(e) => return Err(e.into()),
        };
        self.run = Some(Run { recorder, cupti, first_step: self.step, since_ns: gpu_sync::trace::now_ns() });
        Ok(())
    }

    /// Throws away what the run recorded so far (a warmup).
    fn discard(&mut self) -> Result<()> {
        if let Some(run) = &mut self.run {
            if run.cupti.is_some() {
                self.device.synchronize()?;
            }
            run.recorder.take()?;
            if let Some(c) = &mut run.cupti {
                c.discard().map_err(|e| Error::Gpu(gpu_sync::Error::Cupti(e)))?;
            }
            run.first_step = self.step;
            run.since_ns = gpu_sync::trace::now_ns();
        }
        Ok(())
    }

    /// The run's trace so far (its recording taken; the run goes on).
    fn collect(&mut self, last_step: u64) -> Result<Option<Trace>> {
        let source = self.source.unwrap_or(Source::Events);
        let device = self.device.clone();
        let Some(run) = &mut self.run else { return Ok(None) };
        if run.cupti.is_some() {
            // CUPTI hands over a record once its work completed.
            device.synchronize()?;
        }
        let rec = run.recorder.take()?;
        let now = gpu_sync::trace::now_ns();
        let mut trace = adapt::from_recording(&rec, source);
        if let Some(c) = &mut run.cupti {
            let raw: Vec<(u64, u64)> = rec.streams.iter().map(|s| (s.stream, s.raw)).collect();
            let j = c
                .collect(&mut trace, &device, &raw, (run.since_ns, now))
                .map_err(|e| Error::Gpu(gpu_sync::Error::Cupti(e)))?;
            trace.notes.push(format!(
                "CUPTI: {} device records joined to operations, {} unclaimed, {} host synchronization records, \
                 {} overhead records ({:.1} µs)",
                j.claimed,
                j.unclaimed,
                j.syncs,
                j.overheads.0,
                j.overheads.1 as f64 / 1e3
            ));
            if j.earlier > 0 {
                trace.notes.push(format!(
                    "{} CUPTI records of operations recorded before this trace (late records of a warmup) left out",
                    j.earlier
                ));
            }
        }
        trace.notes.extend(self.notes.iter().cloned());
        let ord = device.ordinal();
        let name = device.name().unwrap_or_else(|e| format!("name unknown: {e}"));
        trace.devices.push(super::trace::DeviceTrack { device: ord, name });
        if self.schedule.is_some() {
            trace.steps = Some((run.first_step, last_step));
        }
        run.first_step = last_step + 1;
        run.since_ns = now;
        trace.normalize();
        Ok(Some(trace))
    }

    /// Ends the current step: hands the cycle's trace to the callback when
    /// the step was a cycle's last active one, then starts, restarts or
    /// stops recording as the next step's action says.
    ///
    /// # Errors
    /// [`Error::Settings`] before [`Profiler::start`]; a driver or CUPTI
    /// error.
    pub fn step(&mut self) -> Result<()> {
        if !self.started {
            return Err(Error::Settings("profiler: step() before start()".into()));
        }
        let now = self.action(self.step);
        if now == Action::RecordAndSave
            && let Some(trace) = self.collect(self.step)?
            && let Some(f) = &mut self.on_ready
        {
            f(&trace);
        }
        self.step += 1;
        let next = self.action(self.step);
        match (now, next) {
            (_, Action::None) => {
                self.run = None; // the recorder's drop turns recording off
            }
            (Action::None, _) => self.begin()?,
            (Action::Warmup, Action::Record | Action::RecordAndSave) => self.discard()?,
            _ => {}
        }
        Ok(())
    }

    /// Stops recording. Without a schedule: the whole recording's trace.
    /// With one: the trace of an active cycle not finished yet (the
    /// callback is not called for it), `None` outside an active stretch.
    ///
    /// # Errors
    /// A driver or CUPTI error.
    pub fn finish(&mut self) -> Result<Option<Trace>> {
        let a = self.action(self.step);
        let out =
            if matches!(a, Action::Record | Action::RecordAndSave) { self.collect(self.step)? } else { None };
        if let Some(run) = self.run.take() {
            run.recorder.stop()?;
        }
        Ok(out)
    }
}
